import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import { startServer, type TestServer } from '../helpers/server.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { migrationsAlone, Store } from '../../src/store/db.js';
import { migrationProvider } from '../../src/store/migrations/index.js';
import { onlyOn } from '../helpers/skips.js';

describe('the event record', () => {
  let srv: TestServer;
  before(async () => {
    srv = await startServer();
  });
  after(() => srv.close());

  test('record() writes the audit entry always and an outbox row only for subscribed types, in the same transaction', async () => {
    const u = await srv.user();
    srv.services.events!.subscribe(['drives.create', 'servers.start_send']);
    const d = (await u.post('drives/', { media: 'disk', name: 'evt', size: 1024 ** 3 })).json.objects[0];
    await u.put(`drives/${d.uuid}/`, { name: 'evt2' }); // drives.update: audited, nobody subscribed
    const outbox = await srv.services.store.db.selectFrom('event_outbox').selectAll().where('resource_uuid', '=', d.uuid).execute();
    assert.deepEqual(
      outbox.map((e) => [e.type, e.owner_uuid, e.resource_kind]),
      [['drives.create', u.uuid, 'drives']],
    );
    assert.equal(JSON.parse(outbox[0].payload).actor, u.uuid);
    const audit = await srv.services.store.db.selectFrom('audit_log').select('action').where('uuid', '=', d.uuid).orderBy('seq').execute();
    assert.deepEqual(
      audit.map((a) => a.action),
      ['create', 'update'],
    );

    // A change that fails writes neither: a server start refused (not stopped) leaves no outbox row.
    const s = (await u.post('servers/', { cpu: 1000, mem: 512 * 1024 ** 2, name: 'e', vnc_password: 'x' })).json.objects[0];
    assert.equal((await u.post(`servers/${s.uuid}/action/?do=start`)).status, 202);
    assert.equal((await u.post(`servers/${s.uuid}/action/?do=start`)).status, 403);
    const starts = await srv.services.store.db.selectFrom('event_outbox').select('type').where('resource_uuid', '=', s.uuid).execute();
    assert.deepEqual(
      starts.map((e) => e.type),
      ['servers.start_send'],
    );
  });
});

describe('simulator state is not part of API bodies', () => {
  let srv: TestServer;
  before(async () => {
    srv = await startServer();
  });
  after(() => srv.close());

  test('a running server, its drive and a clone job keep their simulator state in sim_state; no stored body has `_` keys', async () => {
    const u = await srv.user();
    const d = (await u.post('drives/', { media: 'disk', name: 'd', size: 1024 ** 3 })).json.objects[0];
    await srv.advance(5_000);
    const s = (
      await u.post('servers/', {
        cpu: 1000,
        mem: 512 * 1024 ** 2,
        name: 's',
        vnc_password: 'x',
        drives: [{ drive: d.uuid, device: 'virtio', dev_channel: '0:0' }],
        nics: [{ ip_v4_conf: { conf: 'dhcp' } }],
      })
    ).json.objects[0];
    await u.post(`servers/${s.uuid}/action/?do=start`);
    await srv.advance(5_000);
    await u.post(`servers/${s.uuid}/action/?do=open_vnc`);
    await srv.advance(10_000);
    await u.post(`servers/${s.uuid}/action/?do=stop`);
    await srv.advance(5_000);
    await u.post(`drives/${d.uuid}/action/?do=clone`, {});
    const db = srv.services.store.db;
    const bodies = await db.selectFrom('resources').select(['kind', 'body']).execute();
    for (const b of bodies) assert.ok(!Object.keys(JSON.parse(b.body)).some((k) => k.startsWith('_')), `${b.kind} body has simulator keys: ${b.body}`);
    const states = await db.selectFrom('sim_state').selectAll().execute();
    const drive = states.find((r) => r.kind === 'drives' && r.uuid === d.uuid);
    assert.ok(drive && JSON.parse(drive.state).written > 0, 'the guest wrote to its disk while it ran');
    assert.ok(
      states.some((r) => r.kind === 'jobs'),
      'a running clone job has its planned end in the simulator',
    );
  });
});

describe('an older database opens in a newer Stratus', () => {
  test('bodies written with simulator keys (before migration 0008) move them to sim_state', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-mig-'));
    const fresh = engine === 'postgres' ? await freshDatabase() : { url: join(dir, 'old.db'), drop: async () => {} };
    const dialect = engine === 'postgres' ? 'postgres' : 'sqlite';
    const raw =
      engine === 'postgres'
        ? new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: fresh.url, max: 1 }) }) })
        : new Kysely<any>({ dialect: new SqliteDialect({ database: new SQLite(fresh.url) }) });
    try {
      const schema =
        engine === 'postgres'
          ? ((await raw.selectNoFrom((eb) => eb.fn<string>('current_schema').as('s')).executeTakeFirstOrThrow()) as { s: string }).s
          : undefined;
      const old = new Migrator({ db: raw, provider: migrationProvider(dialect), migrationTableSchema: schema });
      const { error } = await migrationsAlone(engine === 'postgres' ? fresh.url : null, () => old.migrateTo('0007_networks'));
      assert.equal(error, undefined);
      const now = '2020-01-01T00:00:00.000000+00:00';
      const row = (kind: string, uuid: string, body: object) => ({
        kind,
        uuid,
        owner_uuid: 'u1',
        name: null,
        status: null,
        body: JSON.stringify(body),
        created_at: now,
        updated_at: now,
      });
      await raw
        .insertInto('resources')
        .values([
          row('servers', 's1', { status: 'running', name: 'x', _active_since: 1, _leases: { m: '1.2.3.4' }, _acpi_ignore: true, _fail_next_boot: false }),
          row('drives', 'd1', { status: 'unmounted', _written: 42 }),
          row('jobs', 'j1', { state: 'started', _children: ['j2'], _started_at: 5, _ends_at: 9 }),
          row('tags', 't1', { name: 'plain' }),
        ])
        .execute();
      await raw.destroy();
      const store = await Store.open(fresh.url);
      try {
        const bodies = Object.fromEntries((await store.db.selectFrom('resources').select(['uuid', 'body']).execute()).map((r) => [r.uuid, JSON.parse(r.body)]));
        assert.deepEqual(bodies.s1, { status: 'running', name: 'x' });
        assert.deepEqual(bodies.d1, { status: 'unmounted' });
        assert.deepEqual(bodies.j1, { state: 'started', children: ['j2'] });
        assert.deepEqual(bodies.t1, { name: 'plain' });
        const states = Object.fromEntries(
          (await store.db.selectFrom('sim_state').selectAll().execute()).map((r) => [`${r.kind}/${r.uuid}`, JSON.parse(r.state)]),
        );
        assert.deepEqual(states, {
          'servers/s1': { active_since: 1, leases: { m: '1.2.3.4' }, acpi_ignore: true },
          'drives/d1': { written: 42 },
          'jobs/j1': { started_at: 5, ends_at: 9 },
        });
      } finally {
        await store.close();
      }
    } finally {
      await fresh.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('recurring durable work with two API processes', () => {
  test(
    'one pending reconcile timer across both schedulers; a stuck server is healed once',
    { skip: onlyOn('postgres') } /* two processes on one PostgreSQL database */,
    async () => {
      const { startPeer } = await import('../helpers/server.js');
      const a = await startServer();
      const b = await startPeer(a);
      try {
        const u = await a.user();
        const s = (await u.post('servers/', { cpu: 1000, mem: 512 * 1024 ** 2, name: 'stuck', vnc_password: 'x' })).json.objects[0];
        assert.equal((await u.post(`servers/${s.uuid}/action/?do=start`)).status, 202);
        await a.services.store.db.deleteFrom('timers').where('subject', '=', s.uuid).execute(); // the boot is lost
        // Both processes make sure the recurring timer exists, and both run what falls due, at the same time.
        await Promise.all([a.scheduler.runDue(), b.scheduler.runDue()]);
        a.clock.advance(61_000);
        await Promise.all([a.scheduler.runDue(), b.scheduler.runDue()]);
        const pending = await a.services.store.db
          .selectFrom('timers')
          .select('kind')
          .where('kind', '=', 'servers.reconcile')
          .where('state', '=', 'pending')
          .execute();
        assert.equal(pending.length, 1);
        const heals = await a.services.store.db.selectFrom('audit_log').select('action').where('uuid', '=', s.uuid).where('action', '=', 'heal').execute();
        assert.equal(heals.length, 1);
        assert.equal((await u.get(`servers/${s.uuid}/`)).json.status, 'stopped');
      } finally {
        await b.close();
        await a.close();
      }
    },
  );
});
