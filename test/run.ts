/**
 * The test command: runs every suite with node's test runner, first on SQLite, then on PostgreSQL.
 * PostgreSQL comes from STRATUS_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test). When it is
 * unreachable the PostgreSQL run is skipped with a loud notice — except under CI (CI=true), where that fails.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import pg from 'pg';
import { dropTestSchemas, PG_URL } from './helpers/db.js';

const root = new URL('..', import.meta.url).pathname;

function findTests(dir: string): string[] {
  return readdirSync(dir)
    .flatMap((name) => {
      const p = join(dir, name);
      return statSync(p).isDirectory() ? findTests(p) : name.endsWith('.test.ts') ? [p] : [];
    })
    .sort();
}

// Optional filter: `npm test -- tags` runs only files whose path contains "tags".
const filter = process.argv[2];
const files = findTests(join(root, 'test'))
  .map((f) => relative(root, f))
  .filter((f) => !filter || f.includes(filter));

function run(engine: 'sqlite' | 'postgres'): boolean {
  console.log(`\n=== Test run on ${engine} (${files.length} files) ===\n`);
  const res = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=4', ...files], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, STRATUS_TEST_DB: engine },
  });
  return res.status === 0;
}

async function postgresReachable(): Promise<string | null> {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    await c.query('select 1');
    return null;
  } catch (e) {
    return (e as Error).message;
  } finally {
    await c.end().catch(() => {});
  }
}

const results: [string, string][] = [];
let failed = false;
const sqliteOk = run('sqlite');
results.push(['sqlite', sqliteOk ? 'PASSED' : 'FAILED']);
failed ||= !sqliteOk;

const pgProblem = await postgresReachable();
if (pgProblem) {
  const msg = `PostgreSQL at ${PG_URL} is not reachable (${pgProblem})`;
  if (process.env.CI) {
    results.push(['postgres', `FAILED: ${msg}`]);
    failed = true;
  } else {
    results.push(['postgres', `SKIPPED: ${msg}; set STRATUS_TEST_PG_URL to run it`]);
  }
} else {
  await dropTestSchemas(); // leftovers of an interrupted run
  const pgOk = run('postgres');
  await dropTestSchemas();
  results.push(['postgres', pgOk ? 'PASSED' : 'FAILED']);
  failed ||= !pgOk;
}

console.log('\n=== Summary ===');
for (const [engine, outcome] of results) console.log(`${engine.padEnd(9)} ${outcome}`);
process.exit(failed ? 1 : 0);
