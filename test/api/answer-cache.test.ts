import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';
import { sql } from 'kysely';
import { startPeer, startServer, type TestServer } from '../helpers/server.js';
import { Store } from '../../src/store/db.js';
import { answerChannel } from '../../src/store/changes.js';
import { TABLE_NAMES, UNANNOUNCED } from '../../src/store/tables.js';
import { Client } from '../helpers/client.js';
import { engine } from '../helpers/db.js';
import { cli } from '../helpers/cli.js';
import { onlyOn } from '../helpers/skips.js';

/**
 * GET answers reused while no row changes (src/http/answer-cache.ts): they are kept and served again, and
 * every way a row can change makes the next GET read afresh — a write through the API, a write of another
 * connection (an operator command, another API process), and time for answers made from the clock. On
 * PostgreSQL through the tables' write announcements and the barrier (src/store/answer-barrier.ts).
 */
type User = Client & { uuid: string; email: string; password: string };
const MINIMAL = { cpu: 1000, mem: 536870912, name: 'cached', vnc_password: 'testserver' };

let srv: TestServer;
let dir: string | undefined;
let alice: User, bob: User;

before(async () => {
  // A file on SQLite, so that another connection (an operator command) can write to it.
  dir = engine === 'sqlite' ? mkdtempSync(join(tmpdir(), 'stratus-answers-')) : undefined;
  srv = await startServer(dir ? { db: join(dir, 'stratus.db'), delays: 'server.boot=0,server.stop=0' } : { delays: 'server.boot=0,server.stop=0' });
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(async () => {
  await srv.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const counts = () => ({ ...srv.app.answerCache!.counts });

async function until(what: string, probe: () => Promise<boolean>, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function server(c: Client, body: Record<string, unknown> = {}) {
  const res = await c.post('servers/', { objects: [{ ...MINIMAL, ...body }] });
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0] as { uuid: string; name: string };
}

describe('answer cache', () => {
  test('a repeated GET is served from the cache, byte for byte; the metrics count it', async () => {
    const s = await server(alice);
    const first = await alice.get('servers/detail/?limit=20');
    const before = counts();
    const again = await alice.get('servers/detail/?limit=20');
    assert.equal(again.status, 200);
    assert.equal(again.text, first.text);
    assert.equal(again.headers['content-type'], first.headers['content-type']);
    assert.ok(again.headers['x-request-id'] && again.headers['x-request-id'] !== first.headers['x-request-id'], 'headers are per request');
    assert.equal(counts().reused, before.reused + 1);
    assert.ok(again.json.objects.some((o: { uuid: string }) => o.uuid === s.uuid));
    const metrics = await srv.anon().get('/_stratus/metrics');
    assert.match(metrics.text, /stratus_answer_cache_answers\{outcome="reused"\} [1-9]/);
    assert.match(metrics.text, /stratus_answer_cache_bytes [1-9]/);
  });

  test('a write through the API: the next GET reads afresh', async () => {
    const s = await server(alice);
    assert.equal((await alice.get(`servers/${s.uuid}/`)).json.name, 'cached');
    assert.equal((await alice.get(`servers/${s.uuid}/`)).json.name, 'cached');
    assert.equal((await alice.put(`servers/${s.uuid}/`, { ...MINIMAL, name: 'renamed' })).status, 200);
    assert.equal((await alice.get(`servers/${s.uuid}/`)).json.name, 'renamed');
    // A tag is another row: attaching one changes the server's answer too.
    const tag = (await alice.post('tags/', { name: 'red', resources: [s.uuid] })).json.objects[0];
    assert.deepEqual(
      (await alice.get(`servers/${s.uuid}/`)).json.tags.map((t: { uuid: string }) => t.uuid),
      [tag.uuid],
    );
    assert.equal((await alice.delete(`servers/${s.uuid}/`)).status, 204);
    assert.equal((await alice.get(`servers/${s.uuid}/`)).status, 404);
  });

  test('a write of another connection (an operator command on the same file): the next GET reads afresh', async () => {
    const balance = async () => (await alice.get('balance/')).json.balance as string;
    const was = await balance();
    assert.equal(await balance(), was);
    const topup = await cli(['billing', 'topup', alice.email, '25', '--db', srv.dbUrl]);
    assert.equal(topup.status, 0, topup.stderr);
    assert.notEqual(await balance(), was);
  });

  test('answers made from the clock are never kept: a running server shows its runtime as of now', async () => {
    const s = await server(alice, { nics: [{ ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' }] });
    assert.equal((await alice.post(`servers/${s.uuid}/action/?do=start`)).status, 202);
    await srv.advance(1000);
    const running = await alice.get(`servers/${s.uuid}/`);
    assert.equal(running.json.status, 'running');
    const before = counts();
    // Time moves without any row changing (no timer runs): the runtime counters still grow.
    srv.clock.advance(10_000);
    const later = await alice.get(`servers/${s.uuid}/`);
    const received = (r: typeof running) => r.json.runtime.nics[0].io.bytes_recv as number;
    assert.ok(received(later) > received(running), `${received(later)} > ${received(running)}`);
    assert.equal(counts().reused, before.reused);
    assert.equal(counts().timed, before.timed + 1);
  });

  test('answers are per caller, format and URL', async () => {
    const s = await server(alice, { name: 'mine' });
    const a = await alice.get('servers/?limit=0');
    const b = await bob.get('servers/?limit=0');
    assert.ok(a.json.objects.some((o: { uuid: string }) => o.uuid === s.uuid));
    assert.ok(!b.json.objects.some((o: { uuid: string }) => o.uuid === s.uuid), "bob never gets alice's answer");
    const xml = await alice.get('servers/?limit=0', { accept: 'application/xml' });
    assert.match(String(xml.headers['content-type']), /xml/);
    assert.match(xml.text, /^<\?xml/);
    const fields = await alice.get('servers/?limit=0&fields=uuid');
    assert.deepEqual(Object.keys(fields.json.objects[0]), ['uuid']);
  });

  test('compressed as asked, the same way every time: gzip, deflate, none', async () => {
    // A user of its own: another test's running server (its runtime grows with the clock) in the list
    // would change the answer between the GETs compared.
    const carol = (await srv.user()) as User;
    await server(carol, { name: 'zipped' });
    const plain = await carol.get('servers/detail/?limit=0');
    for (let i = 0; i < 2; i++) {
      const gz = await carol.get('servers/detail/?limit=0', { 'accept-encoding': 'gzip, deflate' });
      assert.equal(gz.headers['content-encoding'], 'gzip');
      assert.match(String(gz.headers.vary), /accept-encoding/);
      assert.equal(gz.text, plain.text);
      const df = await carol.get('servers/detail/?limit=0', { 'accept-encoding': 'deflate' });
      assert.equal(df.headers['content-encoding'], 'deflate');
      assert.equal(inflateSync(df.raw).toString('utf8'), plain.text);
      assert.equal(df.text, plain.text);
      const none = await carol.get('servers/detail/?limit=0', { 'accept-encoding': 'identity', 'x-no-compression': '1' });
      assert.equal(none.headers['content-encoding'], undefined);
      assert.equal(none.text, plain.text);
    }
  });

  test('--answer-cache-mib 0: nothing kept', async () => {
    const off = await startServer({ 'answer-cache-mib': '0' });
    try {
      assert.equal(off.app.answerCache, null);
      const u = await off.user();
      assert.equal((await u.get('servers/')).status, 200);
    } finally {
      await off.close();
    }
  });
});

describe('answers and other processes', () => {
  test('another API process on the same database: what it wrote is in the very next GET here', async () => {
    const peer = await startPeer(srv);
    // PostgreSQL: writes are heard 100 ms after they commit, as over a slow link: only the barrier makes
    // the next GET see them.
    srv.services.store.answerBarrier?.delayNotifications(100);
    try {
      const s = await server(alice);
      const viaPeer = new Client(peer.base, { email: alice.email, password: alice.password });
      for (let i = 0; i < 10; i++) {
        const here = await alice.get(`servers/${s.uuid}/`);
        assert.equal((await alice.get(`servers/${s.uuid}/`)).text, here.text);
        assert.equal((await viaPeer.put(`servers/${s.uuid}/`, { ...MINIMAL, name: `peer-${i}` })).status, 200);
        assert.equal((await alice.get(`servers/${s.uuid}/`)).json.name, `peer-${i}`, `round ${i}`);
      }
    } finally {
      srv.services.store.answerBarrier?.delayNotifications(0);
      await peer.close();
    }
  });

  test('PostgreSQL: every table an answer is made of announces its writes', { skip: onlyOn('postgres') /* SQLite counts changes itself */ }, async () => {
    const { rows } = await sql<{ table: string; announced: boolean }>`
      select t.table_name as "table", exists (
        select 1 from information_schema.triggers g
        where g.event_object_schema = t.table_schema and g.event_object_table = t.table_name and g.trigger_name = 'stratus_announce_write'
      ) as announced
      from information_schema.tables t where t.table_schema = current_schema() and t.table_type = 'BASE TABLE'`.execute(srv.services.store.db);
    assert.ok(rows.length > 20, `${rows.length} tables`);
    const unannounced = rows.filter((r) => !r.announced).map((r) => r.table);
    // kysely's own bookkeeping is never announced; every other table as store/tables.ts describes it.
    assert.deepEqual(
      unannounced.sort(),
      [...UNANNOUNCED, 'kysely_migration', 'kysely_migration_lock'].sort(),
      'a table store/tables.ts says announces needs announceWrites in its migration (0021_answer_changes.ts)',
    );
    assert.deepEqual(
      rows
        .map((r) => r.table)
        .filter((t) => !t.startsWith('kysely_'))
        .sort(),
      [...TABLE_NAMES].sort(),
      'every table of the database is described in store/tables.ts',
    );
  });

  test('a write committed by another connection is in the next settled token (PostgreSQL: heard late, still in it)', async () => {
    const store = srv.services.store;
    const other = await Store.open(srv.dbUrl);
    // Writes are heard 100 ms after they commit, as over a slow link.
    store.answerBarrier?.delayNotifications(100);
    try {
      for (let i = 0; i < 10; i++) {
        // Earlier rounds' announcements are all heard by then (settling waits for a barrier sent after them,
        // and notifications arrive in commit order, delayed or not): only this round's writes can move it.
        const before = await store.settleAnswers();
        assert.ok(before !== undefined);
        await other.db
          .updateTable('settings')
          .set({ value: `v${i}` })
          .where('key', '=', 'answer-test')
          .execute();
        await other.db
          .insertInto('settings')
          .values({ key: `answer-test-${i}`, value: 'x' })
          .execute();
        assert.notEqual(await store.settleAnswers(), before, `round ${i}`);
      }
    } finally {
      store.answerBarrier?.delayNotifications(0);
      await other.close();
    }
  });

  test(
    'PostgreSQL: while the announcements are not heard, nothing is reused; afterwards it is again',
    { skip: onlyOn('postgres') /* SQLite counts changes itself */ },
    async () => {
      const s = await server(alice);
      await alice.get(`servers/${s.uuid}/`);
      const killed = await sql<{ n: number }>`select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
      where application_name = ${`stratus ${answerChannel((await sql<{ s: string }>`select current_schema() as s`.execute(srv.services.store.db)).rows[0].s)}`}`.execute(
        srv.services.store.db,
      );
      assert.equal(killed.rows[0].n, 1);
      await until('the token is gone', async () => srv.services.store.answerToken() === undefined);
      const before = counts();
      assert.equal((await alice.get(`servers/${s.uuid}/`)).status, 200);
      assert.equal((await alice.get(`servers/${s.uuid}/`)).status, 200);
      assert.equal(counts().reused, before.reused);
      await until('listening again', async () => srv.services.store.answerToken() !== undefined, 5000);
      await alice.get(`servers/${s.uuid}/`);
      await alice.get(`servers/${s.uuid}/`);
      assert.ok(counts().reused > before.reused);
    },
  );

  test(
    'PostgreSQL: a serving process announces its writes after their commit; any other writer in its transaction',
    { skip: onlyOn('postgres') /* no NOTIFY on SQLite */ },
    async () => {
      const store = srv.services.store;
      const other = await Store.open(srv.dbUrl);
      try {
        // A transaction that asks for it (store/db.ts, a serving process's): the triggers collect the
        // payloads (migration 0120) and NOTIFY nothing, so its commit takes no database-wide NOTIFY lock.
        const before = await store.settleAnswers();
        const collected = await other.db.transaction().execute(async (tx) => {
          await sql`select set_config('stratus.announce_later', 'on', true)`.execute(tx);
          await tx.updateTable('settings').set({ value: 'later' }).where('key', '=', 'answer-test').execute();
          await tx.insertInto('settings').values({ key: 'answer-later', value: 'x' }).execute();
          return (await sql<{ a: string }>`select current_setting('stratus.announced', true) as a`.execute(tx)).rows[0].a;
        });
        // One payload, once: '' ("anything may have changed") for the two writes.
        assert.equal(collected, '\n');
        assert.equal(await store.settleAnswers(), before, 'nothing announced in the transaction');
        // Without it (an operator command, a plain statement): announced by its commit, as before.
        await other.db.deleteFrom('settings').where('key', '=', 'answer-later').execute();
        assert.notEqual(await store.settleAnswers(), before);
        // This process's own transaction: announced after the commit, before it resolves.
        const mine = await store.settleAnswers();
        await store.transaction((tx) => tx.insertInto('settings').values({ key: 'answer-later', value: 'y' }).execute());
        assert.notEqual(await store.settleAnswers(), mine);
      } finally {
        await other.close();
      }
    },
  );
});
