import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { byCodePoint } from '../../src/core/order.js';
import { hashPassword } from '../../src/core/passwords.js';
import { profileDefaults } from '../../src/resources/profile/profile.js';
import { migrationsAlone } from '../../src/store/db.js';
import { migrationProvider } from '../../src/store/migrations/index.js';
import { Client } from '../helpers/client.js';
import { cli } from '../helpers/cli.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { serveProcess } from '../helpers/process.js';
import { startServer } from '../helpers/server.js';
import { FUTURE_YEAR } from '../helpers/clock.js';

/**
 * Schema changes only on purpose: `serve` and `stratus migrate` create or upgrade the schema; every other
 * command refuses a database that is missing, empty, older or newer, and changes nothing. A database made
 * by the first release's migration opens in this version.
 */
let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-schema-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

async function newDatabase(name: string): Promise<string> {
  return engine === 'sqlite' ? join(dir, `${name}.db`) : (await freshDatabase()).url;
}

/** A Kysely handle on the database outside Stratus's Store (as an older release would have opened it). */
function rawDb(url: string): Kysely<any> {
  if (engine === 'sqlite') return new Kysely<any>({ dialect: new SqliteDialect({ database: new SQLite(url) }) });
  return new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) });
}

/** The tables of this database (on PostgreSQL: of this test's schema; other tests' schemas come and go). */
async function tableNames(db: Kysely<any>): Promise<string[]> {
  const tables = await db.introspection.getTables();
  const schema = engine === 'postgres' ? (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0].s : undefined;
  return tables
    .filter((t) => schema === undefined || t.schema === schema)
    .map((t) => t.name)
    .sort();
}

describe('operator commands never change the schema', () => {
  test('a missing SQLite file, an empty database, an in-memory one: refused (exit 2) with what to run, nothing created', async () => {
    if (engine === 'sqlite') {
      const file = join(dir, 'absent', 'stratus.db');
      const res = await cli(['users', 'list', '--db', file]);
      assert.equal(res.status, 2, res.stderr);
      assert.match(
        res.stderr,
        /^stratus: db: there is no database at .*absent\/stratus\.db: run `stratus migrate --db .*` \(or start `stratus serve`\) to create it, or fix --db\n$/,
      );
      assert.equal(existsSync(join(dir, 'absent')), false, 'no folder made');
      const mem = await cli(['users', 'list', '--db', ':memory:']);
      assert.equal(mem.status, 2);
      assert.match(mem.stderr, /an in-memory database belongs to the one process that made it/);
    }
    const url = await newDatabase('empty');
    if (engine === 'sqlite') new SQLite(url).close(); // an empty file
    const res = await cli(['users', 'list', '--db', url]);
    assert.equal(res.status, 2, res.stderr);
    assert.match(res.stderr, /^stratus: db: .* has no Stratus schema: run `stratus migrate --db …` \(or start `stratus serve`\) to create it, or fix --db\n$/);
    const db = rawDb(url);
    try {
      assert.deepEqual(await tableNames(db), [], 'no table was created');
    } finally {
      await db.destroy();
    }
    const migrate = await cli(['migrate', '--db', url]);
    assert.equal(migrate.status, 0, migrate.stderr);
    assert.match(migrate.stdout, /created: \d+ migration\(s\) applied/);
    const again = await cli(['migrate', '--db', url]);
    assert.match(again.stdout, /^schema of .* is current \(\d{4}_\w+\)\n$/);
    assert.equal((await cli(['users', 'list', '--db', url])).status, 0);
    assert.equal((await cli(['migrate', 'now', '--db', url])).status, 2);
  });

  test('a database of a newer Stratus is refused by every command, serve and migrate included', async () => {
    const url = await newDatabase('newer');
    assert.equal((await cli(['migrate', '--db', url])).status, 0);
    const db = rawDb(url);
    try {
      await db.insertInto('kysely_migration').values({ name: '9999_from_the_future', timestamp: new Date().toISOString() }).execute();
    } finally {
      await db.destroy();
    }
    for (const args of [['users', 'list'], ['migrate']]) {
      const res = await cli([...args, '--db', url]);
      assert.equal(res.status, 2, res.stderr);
      assert.match(res.stderr, /was upgraded by a newer Stratus \(schema 9999_from_the_future; this one knows up to \d{4}_\w+\): run that version/);
    }
    await assert.rejects(serveProcess(['--db', url]), /exited with 2.*newer Stratus/s);
  });
});

describe('a newer Stratus opens an older database', () => {
  test("the first release's schema and data: commands say to migrate; serve upgrades it and its users log in", async () => {
    const url = await newDatabase('first-release');
    // The database as the first release left it: only migration 0001 applied, one user of that time.
    const db = rawDb(url);
    try {
      const schema = engine === 'postgres' ? (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0].s : undefined;
      const migrator = new Migrator({ db, provider: migrationProvider(engine), migrationTableSchema: schema, nameComparator: byCodePoint });
      const { error } = await migrationsAlone(engine === 'postgres' ? url : null, () => migrator.migrateTo('0001_initial'));
      assert.equal(error, undefined);
      await db
        .insertInto('users')
        .values({
          uuid: '6f3f9b8e-0d51-4a56-9d7e-000000000001',
          email: 'old@example.com',
          password_hash: await hashPassword('old-secret'),
          state: 'REGULAR',
          // The profile sign-up writes (as version 0001 wrote it too).
          profile: JSON.stringify(profileDefaults('6f3f9b8e-0d51-4a56-9d7e-000000000001', new Date('2024-01-01T00:00:00Z'), 'EUR')),
          created_at: '2024-01-01T00:00:00.000000+00:00',
        })
        .execute();
    } finally {
      await db.destroy();
    }

    const res = await cli(['users', 'list', '--db', url]);
    assert.equal(res.status, 2, res.stderr);
    assert.match(
      res.stderr,
      /has an older Stratus schema \(0001_initial; this version needs \d{4}_\w+\): run `stratus migrate --db …` \(or start `stratus serve`\) to upgrade it/,
    );

    const srv = await serveProcess(['--db', url]);
    try {
      const old = new Client(srv.base, { email: 'old@example.com', password: 'old-secret' });
      assert.equal((await old.get('profile/')).status, 200);
      const tag = await old.post('tags/', { name: 'after-upgrade' });
      assert.equal(tag.status, 201, tag.text);
      assert.equal((await old.get('tags/')).json.meta.total_count, 1);
    } finally {
      srv.child.kill('SIGTERM');
      assert.equal(await srv.exited, 0);
    }
    const list = await cli(['users', 'list', '--db', url]);
    assert.equal(list.status, 0, list.stderr);
    assert.match(list.stdout, /REGULAR\s+old@example\.com/);
  });
});

describe('a database the renewal loop wrote (times past year 9999) upgrades into one that stops', () => {
  test('migration 0022: the out-of-range timer is failed, the rest keep their time as epoch ms; nothing runs in a loop', async () => {
    const url = await newDatabase('renewal-loop');
    const db = rawDb(url);
    const owner = '6f3f9b8e-0d51-4a56-9d7e-000000000002';
    const loopEnd = '+010000-01-01T12:00:00.000000+00:00';
    const inTime = `${FUTURE_YEAR}-01-01T12:00:00.000000+00:00`;
    try {
      const schema = engine === 'postgres' ? (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0].s : undefined;
      const migrator = new Migrator({ db, provider: migrationProvider(engine), migrationTableSchema: schema, nameComparator: byCodePoint });
      assert.equal((await migrationsAlone(engine === 'postgres' ? url : null, () => migrator.migrateTo('0021_answer_changes'))).error, undefined);
      const sub = (start: string, end: string, uuid: string) => ({
        uuid,
        owner_uuid: owner,
        resource: 'vlan',
        amount: 1,
        start_time: start,
        end_time: end,
        period: null,
        price: '1.00000000000000000000',
        discount_amount: '0.00000000000000000000',
        discount_percent: '0.0000000000',
        auto_renew: 1,
        subscribed_object: null,
        parent_id: null,
        root_id: null,
        created_at: '2026-11-01T00:00:00.000000+00:00',
      });
      const [looping] = await db
        .insertInto('subscriptions')
        .values(sub('9999-12-31T12:00:00.000000+00:00', loopEnd, 'loop'))
        .returning('id')
        .execute();
      const [fine] = await db
        .insertInto('subscriptions')
        .values(sub('2029-12-01T12:00:00.000000+00:00', inTime, 'fine'))
        .returning('id')
        .execute();
      const timer = (subject: unknown, due: string) => ({
        kind: 'subscription.end',
        subject: String(subject),
        due_at: due,
        payload: '{}',
        state: 'pending',
        attempts: 0,
        last_error: null,
        created_at: '2026-11-01T00:00:00.000000+00:00',
        unique_key: null,
      });
      await db
        .insertInto('timers')
        .values([timer(looping!.id, loopEnd), timer(fine!.id, inTime)])
        .execute();
    } finally {
      await db.destroy();
    }

    const srv = await startServer({ db: url });
    try {
      const timers = await srv.services.store.db
        .selectFrom('timers')
        .select(['subject', 'state', 'due_ms', 'last_error'])
        .where('kind', '=', 'subscription.end')
        .orderBy('id')
        .execute();
      assert.deepEqual(
        timers.map((t) => [t.state, Number(t.due_ms)]),
        [
          ['failed', 0],
          ['pending', Date.parse(`${FUTURE_YEAR}-01-01T12:00:00Z`)],
        ],
      );
      assert.match(String(timers[0]!.last_error), /out of range/);
      const subs = await srv.services.store.db.selectFrom('subscriptions').select(['uuid', 'end_ms']).orderBy('id').execute();
      assert.deepEqual(
        subs.map((s) => [s.uuid, Number(s.end_ms)]),
        [
          ['loop', Date.parse(loopEnd)],
          ['fine', Date.parse(`${FUTURE_YEAR}-01-01T12:00:00Z`)],
        ],
      );
      // Before the fix, the year-10000 timer was due at every pass and renewed itself each time.
      for (let pass = 0; pass < 3; pass++) await srv.scheduler.runDue();
      const count = await srv.services.store.db
        .selectFrom('subscriptions')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow();
      assert.equal(Number(count.n), 2, 'no renewal ran');
    } finally {
      await srv.close();
    }
  });
});
