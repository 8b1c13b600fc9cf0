import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
import pg from 'pg';
import { holdRun, newRunId, PG_URL, schemaPrefix, type RunLock } from './pg-runs.js';

/** Which engine this test run uses: `STRATUS_TEST_DB=sqlite` (default) or `postgres`. */
export const engine = process.env.STRATUS_TEST_DB === 'postgres' ? 'postgres' : 'sqlite';
export { PG_URL };

/** This run's id (test/helpers/pg-runs.ts): the runner's, or this file's own when it runs alone. */
const ownRun = !process.env.STRATUS_TEST_RUN_ID;
export const RUN_ID = process.env.STRATUS_TEST_RUN_ID ?? newRunId();

// A test file run on its own (no runner) is a run of its own, live from its first schema to its last test.
let ownLock: Promise<RunLock> | undefined;
if (ownRun && engine === 'postgres')
  after(async () => {
    if (ownLock) await (await ownLock).release();
  });

/**
 * A fresh, empty database for one test server: `:memory:` on SQLite; on PostgreSQL a new schema of this
 * run (dropped when the run ends, see holdRun), selected through the connection's search_path.
 */
export async function freshDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (engine === 'sqlite') return { url: ':memory:', drop: async () => {} };
  if (ownRun) await (ownLock ??= holdRun(RUN_ID));
  const schema = `${schemaPrefix(RUN_ID)}${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  await admin.end();
  const sep = PG_URL.includes('?') ? '&' : '?';
  return {
    url: `${PG_URL}${sep}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    // Dropped when the run ends (holdRun), never while servers start.
    drop: async () => {},
  };
}
