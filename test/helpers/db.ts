import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** Which engine this test run uses: `STRATUS_TEST_DB=sqlite` (default) or `postgres`. */
export const engine = process.env.STRATUS_TEST_DB === 'postgres' ? 'postgres' : 'sqlite';
export const PG_URL = process.env.STRATUS_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * A fresh, empty database for one test server: `:memory:` on SQLite; on PostgreSQL a new schema
 * (dropped by `drop()`), selected through the connection's search_path.
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
    drop: async () => {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`drop schema if exists ${schema} cascade`);
      await c.end();
    },
  };
}
