/**
 * The test command: runs every suite with node's test runner, first on SQLite, then on PostgreSQL.
 * PostgreSQL comes from STRATUS_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test). When it is
 * unreachable the PostgreSQL run is skipped with a loud notice — except under CI (CI=true), where that fails.
 *
 * Output per store: one line per test file as it finishes (test/reporter/progress.mjs), then every failure
 * in full and a summary (counts, files, wall time, the slowest files, the failing tests), read from the
 * events test/reporter/events.mjs wrote. The last lines are one plain `<store>: N passed, N failed, N skipped`
 * line per store (CI reads them) and the overall result.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { build } from 'esbuild';
import pg from 'pg';
import { dropTestSchemas, PG_URL } from './helpers/db.js';
import { describeFailure, summarize, type RunResult } from './reporter/summary.js';

const root = new URL('..', import.meta.url).pathname;

function findFiles(dir: string, ending: string): string[] {
  return readdirSync(dir)
    .flatMap((name) => {
      const p = join(dir, name);
      if (name === 'data' || name === 'node_modules') return [];
      return statSync(p).isDirectory() ? findFiles(p, ending) : name.endsWith(ending) ? [p] : [];
    })
    .sort();
}
const findTests = (dir: string) => findFiles(dir, '.test.ts');

/**
 * The suites run as plain JavaScript: src/ and test/ are transpiled once (esbuild, ~1 s) into
 * `.test-build/`, with inline source maps so stack traces name the TypeScript lines. Loading the code
 * through a TypeScript loader hook instead costs each of the ~70 test-file processes 3–4 s of CPU, most of
 * a 2-core machine's time for the whole run. Data the code finds next to itself (JSON catalogues, test
 * data, the client scripts, bin/) is copied or linked beside the output. `STRATUS_TEST_TSX=1` runs the
 * sources through tsx instead (no build).
 */
const BUILD = join(root, '.test-build');
const useTsx = process.env.STRATUS_TEST_TSX === '1';

async function compile(): Promise<void> {
  rmSync(BUILD, { recursive: true, force: true });
  const entryPoints = [...findFiles(join(root, 'src'), '.ts'), ...findFiles(join(root, 'test'), '.ts')];
  await build({ entryPoints, outdir: BUILD, outbase: root, format: 'esm', platform: 'node', target: 'node20', sourcemap: 'inline', logLevel: 'warning' });
  for (const json of findFiles(join(root, 'src'), '.json')) {
    const to = join(BUILD, relative(root, json));
    mkdirSync(dirname(to), { recursive: true });
    cpSync(json, to);
  }
  for (const linked of ['test/data', 'test/clients', 'bin', 'dist']) symlinkSync(join(root, linked), join(BUILD, linked));
}
const compiled = (file: string) => (useTsx ? file : join(relative(root, BUILD), file.replace(/\.ts$/, '.js')));

// Optional filters: `npm test -- tags acls` runs only files whose path contains "tags" or "acls".
const filters = process.argv.slice(2);
const files = findTests(join(root, 'test'))
  .map((f) => relative(root, f))
  .filter((f) => !filters.length || filters.some((w) => f.includes(w)));

// Test files run as child processes, this many at once (most of their time is spent waiting on servers
// and databases, so more than the core count pays).
const CONCURRENCY = Number(process.env.STRATUS_TEST_CONCURRENCY) || 4;
const eventsDir = mkdtempSync(join(tmpdir(), 'stratus-test-events-'));

const seconds = (ms: number) =>
  ms >= 60_000 ? `${Math.floor(ms / 60_000)}m${String(Math.round((ms % 60_000) / 1000)).padStart(2, '0')}s` : `${(ms / 1000).toFixed(1)}s`;
const counts = (r: RunResult) => `${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped`;

interface Outcome {
  engine: string;
  line: string;
  failed: boolean;
  failingNames: string[];
}

function run(engine: 'sqlite' | 'postgres'): Outcome {
  console.log(`\n=== Test run on ${engine} (${files.length} files, ${CONCURRENCY} at once) ===\n`);
  const eventsFile = join(eventsDir, `${engine}.jsonl`);
  const started = performance.now();
  const res = spawnSync(
    process.execPath,
    [
      ...(useTsx ? ['--import', 'tsx'] : ['--enable-source-maps']),
      '--test',
      `--test-concurrency=${CONCURRENCY}`,
      '--test-reporter=./test/reporter/progress.mjs',
      '--test-reporter-destination=stdout',
      '--test-reporter=./test/reporter/events.mjs',
      `--test-reporter-destination=${eventsFile}`,
      ...files.map(compiled),
    ],
    { cwd: root, stdio: 'inherit', env: { ...process.env, STRATUS_TEST_DB: engine, STRATUS_CONTRACT_COUNTS: eventsDir } },
  );
  const wall = performance.now() - started;
  const r = summarize(eventsFile, root);
  // The runner's own verdict counts too (e.g. it could not start, or a file vanished mid-run).
  const failed = res.status !== 0 || r.failed > 0;

  if (r.failures.length) {
    console.log(`\n--- ${engine}: ${r.failures.length} failure(s) ---\n`);
    r.failures.forEach((f, i) => console.log(describeFailure(f, i + 1, root) + '\n'));
  }
  console.log(`--- ${engine}: summary ---`);
  console.log(`tests:   ${r.passed + r.failed + r.skipped + r.todo} (${counts(r)}, ${r.todo} todo)`);
  console.log(`files:   ${r.files.length} of ${files.length}${r.files.length < files.length ? ' (some never reported: see above)' : ''}`);
  console.log(`time:    ${seconds(wall)} wall`);
  console.log(`contract: ${contractChecks(engine)} answers checked against the OpenAPI document (test/helpers/contract.ts)`);
  const slowest = [...r.files].sort((a, b) => b.ms - a.ms).slice(0, 5);
  console.log(`slowest: ${slowest.map((f) => `${f.file} ${seconds(f.ms)}`).join(', ')}`);
  if (res.status !== 0 && r.failed === 0) console.log(`the test runner exited with ${res.status ?? res.signal}`);
  for (const f of r.failures) console.log(`  ✖ ${f.name}  (${f.where})`);
  return { engine, line: `${engine}: ${counts(r)}`, failed, failingNames: r.failures.map((f) => f.name) };
}

/** Answers the test client checked against the OpenAPI document: each test process adds a line on exit. */
function contractChecks(engine: string): number {
  const file = join(eventsDir, `${engine}.count`);
  if (!existsSync(file)) return 0;
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .reduce((sum, n) => sum + Number(n), 0);
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

// The suites that run `stratus` as a process (test/helpers/process.ts) run bin/stratus.js, that is the
// compiled dist/: built here from the current sources, so they never test an old build.
const built = spawnSync(process.execPath, [join(root, 'scripts/build.js')], { cwd: root, stdio: 'inherit' });
if (built.status !== 0) process.exit(1);
if (!useTsx) await compile();
const outcomes: Outcome[] = [];
outcomes.push(run('sqlite'));

const pgProblem = await postgresReachable();
if (pgProblem) {
  const msg = `PostgreSQL at ${PG_URL} is not reachable (${pgProblem})`;
  if (process.env.CI) outcomes.push({ engine: 'postgres', line: `postgres: FAILED: ${msg}`, failed: true, failingNames: [] });
  else outcomes.push({ engine: 'postgres', line: `postgres: SKIPPED: ${msg}; set STRATUS_TEST_PG_URL to run it`, failed: false, failingNames: [] });
} else {
  await dropTestSchemas(); // leftovers of an interrupted run
  outcomes.push(run('postgres'));
  await dropTestSchemas();
}
rmSync(eventsDir, { recursive: true, force: true });
if (!useTsx) rmSync(BUILD, { recursive: true, force: true });

const failed = outcomes.some((o) => o.failed);
console.log('\n=== Summary ===');
for (const o of outcomes) {
  console.log(o.line);
  for (const name of o.failingNames) console.log(`  ✖ ${name}`);
}
console.log(failed ? 'FAILED' : 'PASSED');
process.exit(failed ? 1 : 0);
