import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { migrationsAlone, Store } from '../../src/store/db.js';
import { freshDatabase, PG_URL } from '../helpers/db.js';
import { onlyOn } from '../helpers/skips.js';
import { until } from '../helpers/until.js';

/**
 * Deployments (and test servers) in other schemas of one PostgreSQL database do not hold up a start: a
 * migration waits only for migrations of its own schema, and reads only its own schema's catalogue. (Kysely's
 * stock dialect serialised every migration of the database and listed every schema's tables: a test run on a
 * loaded machine had servers queued 90 s on that lock, behind one another's catalogue reads.)
 */
const HOLDER = `stratus-test-migration-${process.pid}`;
const schemaOf = (url: string) => /search_path%3D([a-z0-9_]+)/.exec(url)![1];

test('a migration in one schema does not wait for one in progress in another', { skip: onlyOn('postgres') }, async () => {
  const [busy, mine] = [await freshDatabase(), await freshDatabase()];
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let holding!: () => void;
  const isHeld = new Promise<void>((r) => (holding = r));
  // Another schema's migration in progress: its migration lock held until the test lets it go.
  const other = migrationsAlone(`${busy.url}&application_name=${HOLDER}`, async () => {
    holding();
    await held;
  });
  await isHeld;
  const watcher = new pg.Client({ connectionString: PG_URL });
  await watcher.connect();
  try {
    let store: Store | undefined;
    const opening = Store.open(mine.url).then((s) => (store = s));
    // Done, or seen queued behind the other schema's migration (a backend blocked by its holder): whichever first.
    const waiting = async () =>
      (
        await watcher.query<{ n: number }>(
          `select count(*)::int as n from pg_stat_activity w, pg_stat_activity h
            where h.application_name = $1 and h.pid = any(pg_blocking_pids(w.pid))`,
          [HOLDER],
        )
      ).rows[0].n > 0;
    const outcome = await until('the store opened or waited on a lock', async () => (store ? 'opened' : (await waiting()) ? 'waited' : false), 300_000);
    release();
    await other;
    const opened = await opening;
    try {
      assert.equal(outcome, 'opened', 'the migration of one schema waited for the migration lock of another');
      assert.ok(opened.migrated.length > 0);
    } finally {
      await opened.close();
    }
  } finally {
    release();
    await watcher.end();
  }
});

test("the migrator lists only its own schema's tables", { skip: onlyOn('postgres') }, async () => {
  const [a, b] = [await freshDatabase(), await freshDatabase()];
  const first = await Store.open(a.url);
  const second = await Store.open(b.url);
  try {
    const tables = await second.db.introspection.getTables({ withInternalKyselyTables: true });
    assert.ok(tables.some((t) => t.name === 'kysely_migration'));
    assert.deepEqual([...new Set(tables.map((t) => t.schema))], [schemaOf(b.url)]);
    assert.deepEqual(
      (await second.db.introspection.getSchemas()).map((s) => s.name),
      [schemaOf(b.url)],
    );
  } finally {
    await first.close();
    await second.close();
  }
});

test('a new schema migrates in few round trips; a failing migration is still named and rolls everything back', { skip: onlyOn('postgres') }, async () => {
  const fresh = await freshDatabase();
  const store = await Store.open(fresh.url);
  try {
    // Statements sent ahead (pg-client.ts, PipelineMode): about three waited per migration, where each
    // of a new schema's ~200 statements was one.
    assert.ok(store.migrated.length > 20);
    assert.ok(store.roundTrips < 4 * store.migrated.length, `${store.roundTrips} round trips for ${store.migrated.length} migrations`);
  } finally {
    await store.close();
  }
  // A table in the way of migration 0040: its statement fails while sent ahead.
  const broken = await freshDatabase();
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    const schema = schemaOf(broken.url);
    await admin.query(`create table ${schema}.data_blocks (x int)`);
    await assert.rejects(Store.open(broken.url), /0040_drive_data.*already exists/);
    // One transaction: nothing of the migrations before it stays.
    const { rows } = await admin.query<{ t: string }>(`select table_name as t from information_schema.tables where table_schema = $1 order by 1`, [schema]);
    assert.deepEqual(
      rows.map((r) => r.t).filter((t) => !t.startsWith('kysely_')),
      ['data_blocks'],
    );
  } finally {
    await admin.end();
  }
});
