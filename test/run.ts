/**
 * The test command: runs every suite with node's test runner, first on SQLite, then on PostgreSQL (or on
 * the one store STRATUS_TEST_DB names).
 * PostgreSQL comes from STRATUS_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test). When it is
 * unreachable the PostgreSQL run is skipped with a loud notice — except under CI (CI=true), where that fails.
 *
 * Each test file runs as its own `node --test` process (STRATUS_TEST_CONCURRENCY at once), in a scratch
 * folder of its own as working directory (so whatever the code writes to ./data — outbox, TLS files — lands
 * there, never in the clone), killed with everything it started when it hangs: no test of it started or ended
 * for STRATUS_TEST_FILE_TIMEOUT seconds (or it ran STRATUS_TEST_FILE_CAP seconds in all).
 * Every run has an id: its build folder is `.test-build/run-<id>`, its PostgreSQL schemas `t_<id>_…`
 * (test/helpers/pg-runs.ts), so two runs in one clone or on one database leave each other alone.
 *
 * Output per store: one line per test file as it finishes (test/reporter/progress.mjs), then every failure
 * in full and a summary (counts, files, wall time, the slowest files, the failing tests, the skips), read
 * from the events test/reporter/events.mjs wrote. The run fails on a failing test, a file that timed out,
 * and under CI on a skip that was not declared as expected (test/helpers/skips.ts) or a tool missing, and on
 * a ./data changed by the run. The last lines are one `<store>: N passed, N failed, N skipped, N todo` line
 * per store, the overall result, and the plain `all: N passed, N failed, N skipped` line CI reads.
 */
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import pg from 'pg';
import { countRunSchemas, holdRun, newRunId, PG_URL, schemaPrefix } from './helpers/pg-runs.js';
import { describeFailure, summarize, unfinished, type Failure, type RunResult } from './reporter/summary.js';
import { skipProblem } from './reporter/skip-verdict.js';

const root = new URL('..', import.meta.url).pathname;
const CI = !!process.env.CI && process.env.CI !== 'false';

function findFiles(dir: string, ending: string): string[] {
  return readdirSync(dir)
    .flatMap((name) => {
      const p = join(dir, name);
      // (test/data holds fixtures, ./data a local server's state; a source folder may be called data.)
      if (name === 'node_modules' || p === join(root, 'data') || p === join(root, 'test', 'data')) return [];
      return statSync(p).isDirectory() ? findFiles(p, ending) : name.endsWith(ending) ? [p] : [];
    })
    .sort();
}
const findTests = (dir: string) => findFiles(dir, '.test.ts');

const runId = newRunId();

/**
 * The suites run as plain JavaScript: src/ and test/ are transpiled once (esbuild, ~1 s) into this run's
 * `.test-build/run-<id>/`, with inline source maps so stack traces name the TypeScript lines. Loading the
 * code through a TypeScript loader hook instead costs each of the ~70 test-file processes 3–4 s of CPU,
 * most of a 2-core machine's time for the whole run. Data the code finds next to itself (JSON catalogues,
 * test data, the client scripts, bin/) is copied or linked beside the output. `STRATUS_TEST_TSX=1` runs
 * the sources through tsx instead (no build).
 *
 * dist/ (scripts/build.js, run by bin/stratus.js) stays the clone's one folder: a build writes each file
 * beside its place and renames it over (a process starting meanwhile loads the old or the new build whole),
 * and two runs in one clone build the same sources into the same files.
 */
const BUILD = join(root, '.test-build', `run-${runId}`);
const useTsx = process.env.STRATUS_TEST_TSX === '1';

async function compile(): Promise<void> {
  const entryPoints = [...findFiles(join(root, 'src'), '.ts'), ...findFiles(join(root, 'test'), '.ts')];
  await build({ entryPoints, outdir: BUILD, outbase: root, format: 'esm', platform: 'node', target: 'node20', sourcemap: 'inline', logLevel: 'warning' });
  for (const json of findFiles(join(root, 'src'), '.json')) {
    const to = join(BUILD, relative(root, json));
    mkdirSync(dirname(to), { recursive: true });
    cpSync(json, to);
  }
  for (const linked of ['test/data', 'test/clients', 'bin', 'dist']) symlinkSync(join(root, linked), join(BUILD, linked));
}
const compiled = (file: string) => join(useTsx ? root : BUILD, useTsx ? file : file.replace(/\.ts$/, '.js'));

// Optional filters: `npm test -- tags acls` runs only files whose path contains "tags" or "acls".
const filters = process.argv.slice(2);
const files = findTests(join(root, 'test'))
  .map((f) => relative(root, f))
  .filter((f) => !filters.length || filters.some((w) => f.includes(w)));

// The stores to run on: both (SQLite, then PostgreSQL), or the one STRATUS_TEST_DB names.
const only = process.env.STRATUS_TEST_DB;
if (only && only !== 'sqlite' && only !== 'postgres') throw new Error(`STRATUS_TEST_DB=${only}: sqlite or postgres`);
const stores = only ? [only] : ['sqlite', 'postgres'];

// Test files run as child processes, this many at once (most of their time is spent waiting on servers
// and databases, so more than the core count pays).
const CONCURRENCY = Number(process.env.STRATUS_TEST_CONCURRENCY) || 4;
/**
 * A file is taken as hung when none of its tests started or ended (its events file did not grow) for this
 * long: killed (with the servers it started) and failed by name. Progress is measured by the work the file
 * does, not by the time it takes: on a loaded machine (two clones' runs and other work on 2 cores, load 40)
 * the permission matrix took over 600 s in all while finishing a route every few seconds, and a wall-clock
 * bound failed it. The slowest single tests (a docs file's blocks, the fuzz) take 2–4 min at such a load.
 */
const FILE_TIMEOUT_S = Number(process.env.STRATUS_TEST_FILE_TIMEOUT) || 600;
/** Whatever its progress, a file running this long is killed (a loop of tests that never ends). */
const FILE_CAP_S = Number(process.env.STRATUS_TEST_FILE_CAP) || 3600;
const eventsDir = mkdtempSync(join(tmpdir(), 'stratus-test-events-'));
const reporter = (name: string) => pathToFileURL(join(root, 'test/reporter', name)).href;

const seconds = (ms: number) =>
  ms >= 60_000 ? `${Math.floor(ms / 60_000)}m${String(Math.round((ms % 60_000) / 1000)).padStart(2, '0')}s` : `${(ms / 1000).toFixed(1)}s`;
const counts = (r: RunResult) => `${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped, ${r.todo} todo`;

interface Outcome {
  engine: string;
  line: string;
  failed: boolean;
  failingNames: string[];
  result?: RunResult;
}

interface FileRun {
  file: string;
  eventsFile: string;
  exit: number | null;
  /** Why the file was killed as hung, or null. */
  timedOut: string | null;
}

/** Runs one test file in its own process group and scratch folder; kills the group when it runs too long. */
function runFile(file: string, engine: string, index: number): Promise<FileRun> {
  const scratch = mkdtempSync(join(tmpdir(), 'stratus-test-scratch-'));
  const eventsFile = join(eventsDir, engine, `${index}.jsonl`);
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        // (tsx by path: the working directory is the scratch folder, where no node_modules is.)
        ...(useTsx ? ['--import', pathToFileURL(join(root, 'node_modules/tsx/dist/loader.mjs')).href] : ['--enable-source-maps']),
        '--test',
        `--test-reporter=${reporter('progress.mjs')}`,
        '--test-reporter-destination=stdout',
        `--test-reporter=${reporter('events.mjs')}`,
        `--test-reporter-destination=${eventsFile}`,
        compiled(file),
      ],
      {
        cwd: scratch,
        detached: true, // its own process group: the file, and every server it started, killed as one
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, STRATUS_TEST_DB: engine, STRATUS_CONTRACT_COUNTS: eventsDir, STRATUS_TEST_RUN_ID: runId, STRATUS_TEST_SCRATCH: scratch },
      },
    );
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    let timedOut: string | null = null;
    const started = Date.now();
    let moved = started;
    let seen = -1;
    let timer: NodeJS.Timeout;
    const watch = () => {
      const size = existsSync(eventsFile) ? statSync(eventsFile).size : 0;
      if (size !== seen) [seen, moved] = [size, Date.now()];
      const idle = Date.now() - moved > FILE_TIMEOUT_S * 1000;
      if (idle || Date.now() - started > FILE_CAP_S * 1000) {
        timedOut = idle ? `no test started or ended for ${FILE_TIMEOUT_S} s` : `ran ${FILE_CAP_S} s in all`;
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
      } else timer = setTimeout(watch, 1000);
    };
    timer = setTimeout(watch, 1000);
    child.on('close', (exit) => {
      clearTimeout(timer);
      // Whatever the file left behind (a server it failed to stop) goes with it.
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // the group is empty
      }
      rmSync(scratch, { recursive: true, force: true });
      if (timedOut) out += `  ✖ ${file}  TIMED OUT (${timedOut}): killed\n`;
      process.stdout.write(out);
      resolve({ file, eventsFile, exit, timedOut });
    });
  });
}

/**
 * Files whose checks are timings (how long other requests wait while one does a big job) say so with a
 * `@runs-alone` line in their header: they run after the pool, one at a time, so the other files of the run
 * are not what they measure.
 */
const runsAlone = (file: string): boolean => /^\s*\*\s*@runs-alone\b/m.test(readFileSync(join(root, file), 'utf8').slice(0, 4000));

async function runFiles(engine: string): Promise<FileRun[]> {
  mkdirSync(join(eventsDir, engine), { recursive: true });
  const all = files.map((file, index) => ({ file, index }));
  const queue = all.filter((f) => !runsAlone(f.file));
  const done: FileRun[] = [];
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) done.push(await runFile(next.file, engine, next.index));
  };
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, queue.length) }, worker));
  for (const f of all.filter((f) => runsAlone(f.file))) done.push(await runFile(f.file, engine, f.index));
  return done.sort((a, b) => a.file.localeCompare(b.file));
}

async function run(engine: 'sqlite' | 'postgres'): Promise<Outcome> {
  console.log(`\n=== Test run on ${engine} (${files.length} files, ${CONCURRENCY} at once, a file killed after ${FILE_TIMEOUT_S} s without progress) ===\n`);
  const started = performance.now();
  const runs = await runFiles(engine);
  const wall = performance.now() - started;
  const r = summarize(
    runs.map((f) => f.eventsFile),
    root,
  );
  // The runner's own verdicts count too: a file killed as hung, a file whose process failed with no test failing.
  const own: Failure[] = [];
  for (const f of runs) {
    if (f.timedOut) {
      const running = unfinished(f.eventsFile);
      own.push({
        name: `${f.file} timed out: ${f.timedOut} (STRATUS_TEST_FILE_TIMEOUT, STRATUS_TEST_FILE_CAP): killed`,
        where: `${f.file}:1:1`,
        note: running.length ? `still running: ${running.join('; ')}` : undefined,
      });
    } else if (f.exit !== 0 && !r.failures.some((x) => x.where.startsWith(`${f.file}:`)))
      own.push({ name: `${f.file}: its test process exited with ${f.exit} and no failing test`, where: `${f.file}:1:1` });
  }
  const skipProblems = r.skips.map((s) => ({ s, problem: skipProblem(s, engine) })).filter((x) => x.problem);
  if (CI) for (const { s, problem } of skipProblems) own.push({ name: `${s.name}: skipped: ${problem}`, where: s.where });
  r.failed += own.length;
  r.failures.push(...own);
  const failed = r.failed > 0;

  if (r.failures.length) {
    console.log(`\n--- ${engine}: ${r.failures.length} failure(s) ---\n`);
    r.failures.forEach((f, i) => console.log(describeFailure(f, i + 1, root) + '\n'));
  }
  console.log(`--- ${engine}: summary ---`);
  console.log(`tests:   ${r.passed + r.failed + r.skipped + r.todo} (${counts(r)})`);
  console.log(`files:   ${r.files.length} of ${files.length}${r.files.length < files.length ? ' (some never reported: see above)' : ''}`);
  console.log(`time:    ${seconds(wall)} wall`);
  console.log(`contract: ${contractChecks(engine)} answers checked against the OpenAPI document (test/helpers/contract.ts)`);
  const slowest = [...r.files].sort((a, b) => b.ms - a.ms).slice(0, 5);
  console.log(`slowest: ${slowest.map((f) => `${f.file} ${seconds(f.ms)}`).join(', ')}`);
  if (r.reports.length) {
    console.log('reports:');
    for (const line of r.reports) console.log(`  ${line}`);
  }
  if (r.skips.length) {
    console.log(`skipped: ${r.skips.length}`);
    for (const s of r.skips) {
      const problem = skipProblem(s, engine);
      console.log(`  ${problem ? (CI ? '✖' : '!') : '-'} ${s.name}  (${s.where}): ${problem ?? s.reason}`);
    }
  }
  for (const f of r.failures) console.log(`  ✖ ${f.name}  (${f.where})`);
  return { engine, line: `${engine}: ${counts(r)}`, failed, failingNames: r.failures.map((f) => f.name), result: r };
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

/** What PostgreSQL answers at PG_URL (its version and database), or why it does not answer. */
async function postgresInfo(): Promise<{ version: string; database: string } | { problem: string }> {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    const { rows } = await c.query<{ version: string; database: string }>('select version() as version, current_database() as database');
    return rows[0];
  } catch (e) {
    return { problem: (e as Error).message };
  } finally {
    await c.end().catch(() => {});
  }
}

/** ./data as files and their sizes and times: the tests must not create or change it (they work in scratch folders). */
function dataState(): string {
  const dir = join(root, 'data');
  if (!existsSync(dir)) return 'absent';
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .map((e) => {
      const p = join(e.parentPath ?? e.path, e.name);
      const st = statSync(p, { throwIfNoEntry: false });
      return `${relative(dir, p)} ${st?.size ?? '-'} ${st?.mtimeMs ?? '-'}`;
    })
    .sort()
    .join('\n');
}

// `npm run test:verify`: every server the suites start (in their processes and as `stratus` children,
// test/helpers/process.ts) makes each reused answer again and fails the request when it differs.
const VERIFY = process.env.STRATUS_ANSWER_CACHE_VERIFY === '1';
const dataBefore = dataState();
console.log(
  `run ${runId}: build ${relative(root, BUILD)}/, PostgreSQL schemas ${schemaPrefix(runId)}*, a file killed after ${FILE_TIMEOUT_S} s without progress${CI ? ', CI' : ''}${VERIFY ? ', answer-cache verify mode' : ''}`,
);
// The suites that run `stratus` as a process (test/helpers/process.ts) run bin/stratus.js, that is the
// compiled dist/: built here from the current sources, so they never test an old build.
const built = spawnSync(process.execPath, [join(root, 'scripts/build.js')], { cwd: root, stdio: 'inherit' });
if (built.status !== 0) process.exit(1);
if (!useTsx) await compile();
const outcomes: Outcome[] = [];
try {
  if (stores.includes('sqlite')) outcomes.push(await run('sqlite'));

  const info = stores.includes('postgres') ? await postgresInfo() : null;
  if (!info) {
    // SQLite only (STRATUS_TEST_DB=sqlite)
  } else if ('problem' in info) {
    const msg = `PostgreSQL at ${PG_URL} is not reachable (${info.problem})`;
    if (CI) outcomes.push({ engine: 'postgres', line: `postgres: FAILED: ${msg}`, failed: true, failingNames: [] });
    else outcomes.push({ engine: 'postgres', line: `postgres: SKIPPED: ${msg}; set STRATUS_TEST_PG_URL to run it`, failed: false, failingNames: [] });
  } else {
    const lock = await holdRun(runId);
    let made = 0;
    let outcome: Outcome;
    try {
      console.log(`\npostgres: select version() = ${info.version}; database ${info.database}; this run's schemas ${schemaPrefix(runId)}*`);
      outcome = await run('postgres');
      made = await countRunSchemas(runId);
    } finally {
      const { dropped, deferred } = await lock.release();
      console.log(`postgres: dropped ${dropped} schema(s)${deferred ? ' (none: another run is live on this database; the next run alone drops them)' : ''}`);
    }
    // The proof the pass ran on PostgreSQL: its test processes made schemas of this run there.
    console.log(`postgres: the test processes made ${made} schema(s) ${schemaPrefix(runId)}* in ${info.database}`);
    // (A filtered run may hold only files that need no database.)
    if (made === 0 && !filters.length) {
      outcome.failed = true;
      outcome.failingNames.push('the PostgreSQL pass made no schema on PostgreSQL: did its tests run on SQLite?');
    }
    outcomes.push(outcome);
  }
} finally {
  rmSync(eventsDir, { recursive: true, force: true });
  if (!useTsx) rmSync(BUILD, { recursive: true, force: true });
}

const dataAfter = dataState();
if (dataAfter !== dataBefore) {
  const msg = `./data was ${dataBefore === 'absent' ? 'created' : 'changed'} by the run: tests must write to their scratch folders`;
  outcomes.push({ engine: 'data', line: `data: ${msg}`, failed: CI, failingNames: [] });
}

const failed = outcomes.some((o) => o.failed);
console.log('\n=== Summary ===');
for (const o of outcomes) {
  console.log(o.line);
  for (const name of o.failingNames) console.log(`  ✖ ${name}`);
}
console.log(failed ? 'FAILED' : 'PASSED');
const all = outcomes.flatMap((o) => (o.result ? [o.result] : []));
const sum = (k: 'passed' | 'failed' | 'skipped') => all.reduce((n, r) => n + r[k], 0);
console.log(`all: ${sum('passed')} passed, ${sum('failed')} failed, ${sum('skipped')} skipped`);
process.exit(failed ? 1 : 0);
