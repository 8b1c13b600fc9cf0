import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** Which engine this test run uses: `STRATUS_TEST_DB=sqlite` (default) or `postgres`. */
export const engine = process.env.STRATUS_TEST_DB === 'postgres' ? 'postgres' : 'sqlite';
export const PG_URL = process.env.STRATUS_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * A fresh, empty database for one test server: `:memory:` on SQLite; on PostgreSQL a new schema
 * (dropped with all test schemas when the run ends), selected through the connection's search_path.
 */
export async function freshDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  if (engine === 'sqlite') return { url: ':memory:', drop: async () => {} };
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  await admin.end();
  const sep = PG_URL.includes('?') ? '&' : '?';
  return {
    url: `${PG_URL}${sep}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    // Schemas are dropped once the whole run is over (test/run.ts), never while other servers start:
    // Kysely's migrator inspects every schema of the database, and a schema vanishing mid-inspection
    // fails an unrelated server's start-up ("schema … does not exist").
    drop: async () => {},
  };
}

/** Drop every test schema (`t_…`) of the test database: before and after a whole PostgreSQL run. */
export async function dropTestSchemas(): Promise<number> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    const { rows } = await c.query<{ nspname: string }>(`select nspname from pg_namespace where nspname ~ '^t_[0-9a-f]{12}$'`);
    for (const r of rows) await c.query(`drop schema if exists ${r.nspname} cascade`);
    return rows.length;
  } finally {
    await c.end();
  }
}
