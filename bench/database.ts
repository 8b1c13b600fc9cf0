/**
 * A throw-away database per engine. SQLite: a file in a temp directory, opened by Store.open in WAL mode
 * like production (`:memory:` would be private to one process and hide the file I/O the service pays).
 * PostgreSQL: a fresh schema (`bench_<pid>` unless named) in the given database, selected through the connection's
 * search_path (as the test suite does), dropped at the end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export interface BenchDatabase {
  engine: 'sqlite' | 'postgres';
  /** What Store.open and the server process are given. */
  url: string;
  /** Where it lives, for the report. */
  label: string;
  drop(): Promise<void>;
}

export async function sqliteDatabase(): Promise<BenchDatabase> {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-'));
  const url = join(dir, 'bench.db');
  return { engine: 'sqlite', url, label: `${url} (WAL)`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
}

export async function postgresDatabase(base: string, schema = `bench_${process.pid}`): Promise<BenchDatabase> {
  const admin = async (text: string) => {
    const c = new pg.Client({ connectionString: base });
    await c.connect();
    try {
      await c.query(text);
    } finally {
      await c.end();
    }
  };
  await admin(`drop schema if exists ${schema} cascade; create schema ${schema}`);
  const sep = base.includes('?') ? '&' : '?';
  return {
    engine: 'postgres',
    url: `${base}${sep}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    label: `${base.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@')} schema ${schema}`,
    drop: () => admin(`drop schema if exists ${schema} cascade`),
  };
}
