/**
 * Start-up cost of the commands users run (issue 11, "Start"): `node bin/stratus.js serve` and `npm start`
 * from spawn to the first 200 of an authenticated GET /api/2.0/capabilities/, the server's idle RSS about a
 * second later, and each operator command from spawn to exit. Median of 3 runs each. Every run uses a temp
 * SQLite file (and, with a PostgreSQL URL, a fresh schema) and port 0.
 *
 * `npm run bench:start` prints the table (STRATUS_BENCH_PG_URL adds the PostgreSQL rows); bench/run.ts
 * calls measureStartup.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { postgresDatabase } from './database.js';

export type StartupRow = { what: string; ms: number; rssMiB?: number; goalMs?: number; goalRssMiB?: number };

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin/stratus.js');
const RUNS = 3;
const GOAL_MS = 300;
/** The goal for PostgreSQL (a server over the network, its schema's migrations included): 400 ms. */
const PG_GOAL_MS = 400;
const GOAL_RSS_MIB = 80;
/** When the idle RSS is read, after the first answer. */
const IDLE_AFTER_MS = 1000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** GET with Basic authentication through node:http (no fetch: its first use costs the bench ~20 ms). */
function get(url: string, auth: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { auth, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
}

/** VmRSS of a process, MiB. */
function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) / 1024;
}

/** The pid of the server: the deepest node process running `serve` under `pid` (itself, or under npm, sh, tsx). */
function serverPid(pid: number): number {
  const queue = [pid];
  let found: number | undefined;
  while (queue.length) {
    const p = queue.shift()!;
    const argv = readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
    if (/(^|\/)node$/.test(argv[0]) && argv.includes('serve')) found = p;
    for (const t of readdirSync(`/proc/${p}/task`)) {
      const children = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8').trim();
      if (children) queue.push(...children.split(' ').map(Number));
    }
  }
  if (found === undefined) throw new Error(`no stratus server process under ${pid}`);
  return found;
}

function waitExit(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', (code) => resolve(code))));
}

/** The start banner, when `line` is it. */
function startEvent(line: string): { url: string; demo_login: { email: string; password: string } } | undefined {
  if (!line.includes('"event":"start"')) return undefined;
  try {
    const e = JSON.parse(line) as { event?: string; url?: string; demo_login?: { email: string; password: string } };
    return e.event === 'start' && e.url && e.demo_login ? { url: e.url, demo_login: e.demo_login } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The base URL and demo login of a spawned server, from its start banner on stdout (JSON lines when piped);
 * rejects when it exits first or says nothing within `ms`.
 */
function started(child: ChildProcess, stderr: () => string, ms: number): Promise<{ base: string; auth: string }> {
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start banner within ${ms} ms: ${out}${stderr()}`)), ms);
    child.stdout!.on('data', (d) => {
      out += d;
      for (const line of out.split('\n')) {
        const start = startEvent(line);
        if (!start) continue;
        clearTimeout(timer);
        resolve({ base: start.url, auth: `${start.demo_login.email}:${start.demo_login.password}` });
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${child.spawnargs.join(' ')} exited with ${code}: ${out}${stderr()}`));
    });
  });
}

/**
 * Spawns a server command, waits for its listen line and demo login, and GETs the capabilities with it
 * until a 200 (the first GET is normally it: the line is printed once the port listens).
 */
async function serveOnce(cmd: string, args: string[]): Promise<{ ms: number; rssMiB: number }> {
  const t0 = performance.now();
  const child = spawn(cmd, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  try {
    const login = await started(child, () => err, 60_000);
    for (let i = 0; ; i++) {
      const status = await get(`${login.base}capabilities/`, login.auth);
      if (status === 200) break;
      if (i === 50) throw new Error(`GET capabilities/ answered ${status}`);
      await sleep(10);
    }
    const ms = performance.now() - t0;
    await sleep(IDLE_AFTER_MS);
    return { ms, rssMiB: rssMiB(serverPid(child.pid!)) };
  } finally {
    // The whole process group: `npm start` runs the server under npm and a shell.
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGTERM');
    await waitExit(child);
  }
}

/** Runs a command to its end; ms from spawn to exit (and its output). A non-zero exit is an error. */
async function runOnce(args: string[]): Promise<{ ms: number; out: string }> {
  const started = performance.now();
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const code = await waitExit(child);
  const ms = performance.now() - started;
  if (code !== 0) throw new Error(`stratus ${args.join(' ')} exited with ${code}: ${out}`);
  return { ms, out };
}

/**
 * Node itself starting and exiting (`node -e 0`), for scale: machines differ by tens of milliseconds here
 * (one whose environment sets NODE_EXTRA_CA_CERTS reads the named certificates at every start), and every row
 * below pays it.
 */
async function nodeOnce(): Promise<Sample> {
  const started = performance.now();
  const code = await waitExit(spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' }));
  if (code !== 0) throw new Error(`node -e 0 exited with ${code}`);
  return { ms: performance.now() - started };
}

/** The API's own request for the operator commands' subjects: a server and a drive (sim server/drive). */
async function post(base: string, auth: string, path: string, body: unknown): Promise<string> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request(`${base}${path}`, { method: 'POST', auth, agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => (res.statusCode === 201 ? resolve(JSON.parse(text).objects[0].uuid) : reject(new Error(`POST ${path}: ${res.statusCode} ${text}`))));
    });
    req.on('error', reject);
    req.end(data);
  });
}

type Sample = { ms: number; rssMiB?: number };
const row = (what: string, samples: Sample[], goalMs?: number, goalRssMiB?: number): StartupRow => {
  const rss = samples.map((s) => s.rssMiB).filter((r): r is number => r !== undefined);
  return { what, ms: median(samples.map((s) => s.ms)), ...(rss.length ? { rssMiB: median(rss) } : {}), goalMs, goalRssMiB };
};

/** Measures start-up: serve (new and existing database), `npm start`, the operator commands. */
export async function measureStartup(opts: { pgUrl?: string } = {}): Promise<StartupRow[]> {
  const rows: StartupRow[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-start-'));
  const serveArgs = (db: string) => ['serve', '--db', db, '--port', '0', '--log-level', 'warn'];
  try {
    const fresh: Sample[] = [];
    const again: Sample[] = [];
    const npmStart: Sample[] = [];
    const bare: Sample[] = [];
    for (let i = 0; i < RUNS; i++) bare.push(await nodeOnce());
    rows.push(row('node -e 0 (Node alone, for scale)', bare));
    for (let i = 0; i < RUNS; i++) {
      const db = join(dir, `serve-${i}.db`);
      fresh.push(await serveOnce(process.execPath, [BIN, ...serveArgs(db)]));
      again.push(await serveOnce(process.execPath, [BIN, ...serveArgs(db)]));
      npmStart.push(await serveOnce('npm', ['start', '--silent', '--', ...serveArgs(db).slice(1)]));
    }
    rows.push(row('node bin/stratus.js serve (new SQLite database)', fresh, GOAL_MS, GOAL_RSS_MIB));
    rows.push(row('node bin/stratus.js serve (existing SQLite database)', again, GOAL_MS, GOAL_RSS_MIB));
    rows.push(row('npm start (existing SQLite database, end to end)', npmStart, undefined, GOAL_RSS_MIB));

    if (opts.pgUrl) {
      const pgFresh: Sample[] = [];
      const pgAgain: Sample[] = [];
      for (let i = 0; i < RUNS; i++) {
        const schema = await postgresDatabase(opts.pgUrl);
        try {
          pgFresh.push(await serveOnce(process.execPath, [BIN, ...serveArgs(schema.url)]));
          pgAgain.push(await serveOnce(process.execPath, [BIN, ...serveArgs(schema.url)]));
        } finally {
          await schema.drop();
        }
      }
      rows.push(row('node bin/stratus.js serve (new PostgreSQL schema)', pgFresh, PG_GOAL_MS));
      rows.push(row('node bin/stratus.js serve (existing PostgreSQL schema)', pgAgain, PG_GOAL_MS));
    }

    rows.push(...(await operatorCommands(join(dir, 'ops.db'))));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

/** Each operator command of src/cli/ on a database with a server, a drive and a user to act on. */
async function operatorCommands(db: string): Promise<StartupRow[]> {
  // A running server creates the demo user and the subjects of `sim server` and `sim drive`.
  const child = spawn(process.execPath, [BIN, 'serve', '--db', db, '--port', '0', '--log-level', 'warn', '--rate-limits', 'off'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const { base, auth } = await started(child, () => '', 60_000);
  const server = await post(base, auth, 'servers/', { name: 'bench', cpu: 1000, mem: 536870912, vnc_password: 'benchbench' });
  const drive = await post(base, auth, 'drives/', { name: 'bench', size: 1073741824, media: 'disk' });
  child.kill('SIGTERM');
  await waitExit(child);

  const d = ['--db', db];
  // Commands whose effect a later run would undo or refuse act on a subject of their run (ops<i>@).
  const commands: { what: string; args: (i: number) => string[] }[] = [
    { what: 'stratus --help', args: () => ['--help'] },
    { what: 'stratus users add', args: (i) => ['users', 'add', `ops${i}@bench.local`, '--password', 'bench-password-1', ...d] },
    { what: 'stratus users list', args: () => ['users', 'list', ...d] },
    { what: 'stratus users set-password', args: (i) => ['users', 'set-password', `ops${i}@bench.local`, '--password', 'bench-password-2', ...d] },
    { what: 'stratus users set-state', args: (i) => ['users', 'set-state', `ops${i}@bench.local`, 'TRIAL', ...d] },
    { what: 'stratus users limits --off', args: (i) => ['users', 'limits', `ops${i}@bench.local`, '--off', ...d] },
    { what: 'stratus ips assign', args: (i) => ['ips', 'assign', `ops${i}@bench.local`, ...d] },
    { what: 'stratus ips list', args: () => ['ips', 'list', ...d] },
    { what: 'stratus vlans assign', args: (i) => ['vlans', 'assign', `ops${i}@bench.local`, ...d] },
    { what: 'stratus vlans list', args: () => ['vlans', 'list', ...d] },
    { what: 'stratus sim server (poweroff)', args: () => ['sim', 'server', server, 'poweroff', ...d] },
    { what: 'stratus sim drive --written', args: () => ['sim', 'drive', drive, '--written', '1024', ...d] },
  ];
  const rows: StartupRow[] = [];
  const outputs: string[] = [];
  for (const c of commands) {
    const samples: Sample[] = [];
    for (let i = 0; i < RUNS; i++) {
      const { ms, out } = await runOnce(c.args(i));
      samples.push({ ms });
      outputs.push(out);
    }
    rows.push(row(c.what, samples, GOAL_MS));
  }
  // The release commands give back what the assign runs above handed out.
  const assigned = outputs.join('');
  const release = async (what: string, args: string[][]) => {
    const samples: Sample[] = [];
    for (const a of args.slice(0, RUNS)) samples.push({ ms: (await runOnce([...a, ...d])).ms });
    rows.push(row(what, samples, GOAL_MS));
  };
  await release(
    'stratus ips release',
    [...assigned.matchAll(/^assigned (\d+\.\d+\.\d+\.\d+) to/gm)].map((m) => ['ips', 'release', m[1]]),
  );
  await release(
    'stratus vlans release',
    [...assigned.matchAll(/^assigned vlan (\S+) to/gm)].map((m) => ['vlans', 'release', m[1]]),
  );
  return rows;
}

/** The table: one line per row, goal and PASS/MISS where a goal is set. */
export function formatStartup(rows: StartupRow[]): string {
  const width = Math.max(...rows.map((r) => r.what.length));
  const lines = [`${'what'.padEnd(width)}  ${'ms'.padStart(6)}  ${'goal'.padStart(6)}  ${'RSS MiB'.padStart(7)}  ${'goal'.padStart(5)}  result`];
  for (const r of rows) {
    const pass = (r.goalMs === undefined || r.ms < r.goalMs) && (r.goalRssMiB === undefined || (r.rssMiB ?? 0) < r.goalRssMiB);
    const hasGoal = r.goalMs !== undefined || r.goalRssMiB !== undefined;
    lines.push(
      [
        r.what.padEnd(width),
        r.ms.toFixed(0).padStart(6),
        (r.goalMs === undefined ? '-' : `<${r.goalMs}`).padStart(6),
        (r.rssMiB === undefined ? '-' : r.rssMiB.toFixed(1)).padStart(7),
        (r.goalRssMiB === undefined ? '-' : `<${r.goalRssMiB}`).padStart(5),
        hasGoal ? (pass ? 'PASS' : 'MISS') : '',
      ].join('  '),
    );
  }
  return lines.join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await measureStartup({ pgUrl: process.env.STRATUS_BENCH_PG_URL });
  console.log(formatStartup(rows));
  if (process.env.STRATUS_BENCH_JSON) console.log(JSON.stringify(rows));
}
