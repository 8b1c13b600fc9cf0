/**
 * "Mixed" (issue 31): a realistic load on `stratus serve` as a real process, with 1 and then 2 workers
 * (`--workers`), on a SQLite file and, with BENCH_PG_URL, on PostgreSQL (a fresh schema per run): many accounts (50 × 200 servers; BENCH_QUICK=1: 10 × 20), each sharing
 * a tag of its servers with the next account through an ACL, and clients doing what CI and consoles do
 * (bench/mixed-load.ts MIX: polling single objects and lists, PUTs, start/stop, creates and deletes, 20%
 * writes) plus event-stream subscribers, for a fixed time. The load generator is a process of its own
 * (keep-alive agents). Printed: throughput, p50/p99 per request type, the kept-answer hit rate (the workers'
 * /_stratus/metrics), and the ratio to a raw server replaying the reads' answers under the same load.
 * Also printed, as figures the machine's other load does not move much: CPU µs per request of the server
 * (the serve process and its workers, utime+stime from /proc) and, on PostgreSQL, of the database's
 * backends (those of BENCH_PG_URL's database: other runs in that database count too), over the warm-up and
 * the measured time (requests of the warm-up counted at the measured rate).
 *
 * Goals on the 2-core machine, the load generator on it too: 2 workers ≥ 1.5× one worker's throughput;
 * p99 < 20 ms. With 32 closed-loop clients the saturated p50 is about 32 / throughput (Little's law), so
 * a p99 under 20 ms at saturation needs several thousand req/s: the saturated figures are printed as they
 * are, and beside them an open-loop run on the same server (BENCH_MIXED_OPEN, default 0.5: requests started
 * at that fraction of one worker's saturated throughput, the same rate for 1 and 2 workers, latency counted
 * from when each was due): the latency a client sees below saturation. BENCH_MIXED_OPEN=0 leaves it out.
 * Run alone: `npx tsx bench/mixed.ts` (BENCH_QUICK=1 for a short version; BENCH_PG_URL also
 * runs it on PostgreSQL, BENCH_SQLITE=0 leaves SQLite out; BENCH_MIXED_PROF=<dir> profiles the server's processes).
 */
import { fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuMsOf, startChild } from './children.js';
import { postgresDatabase, type BenchDatabase } from './database.js';
import { optionsFromEnv, type Options } from './options.js';
import { call, request } from './http.js';
import type { MixedAccount, MixedPlan, MixedResult } from './mixed-load.js';
import type { RawReply } from './serve-child.js';
import type { Goal } from './report.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BIN = join(ROOT, 'bin/stratus.js');
const LOAD = fileURLToPath(new URL('./mixed-load.ts', import.meta.url));

export const MIXED_SPEEDUP_GOAL = 1.5;
export const MIXED_P99_GOAL_MS = 20;
/** The open-loop run's rate, as a share of one worker's saturated throughput (0: no open-loop run). */
const OPEN_SHARE = Number(process.env.BENCH_MIXED_OPEN ?? 0.5);

export interface MixedRow {
  workers: number;
  result: MixedResult;
  /** Reused answers over reusable GET answers in the run (the workers' /_stratus/metrics), null when unknown. */
  hitRate: number | null;
  /** The open-loop run after it (BENCH_MIXED_OPEN), null when left out. */
  open: MixedResult | null;
  /** CPU µs per request: the server's processes, and PostgreSQL's backends (null: SQLite, or no /proc). */
  cpuUs: { server: number | null; database: number | null };
}

/** utime+stime in ms of the processes `pids` (Linux /proc); null without /proc. */
const cpuMs = (pids: number[]): number | null => (existsSync('/proc/self/stat') ? cpuMsOf(pids) : null);

/** `root` and every process below it (a server's workers). */
function tree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of existsSync('/proc') ? readdirSync('/proc') : []) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const ppid = Number(readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1].split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {
      // Gone meanwhile.
    }
  }
  const out: number[] = [];
  for (const todo = [root]; todo.length;) {
    const p = todo.pop()!;
    out.push(p);
    todo.push(...(children.get(p) ?? []));
  }
  return out;
}

/** The client backends of the database `url` names (but this query's). */
async function backends(url: string): Promise<number[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const { rows } = await c.query<{ pid: number }>(
      `select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()`,
    );
    return rows.map((r) => r.pid);
  } finally {
    await c.end();
  }
}

export interface MixedReport {
  engine: 'sqlite' | 'postgres';
  accounts: number;
  servers: number;
  connections: number;
  subscribers: number;
  durationS: number;
  rows: MixedRow[];
  raw: MixedResult;
  goals: Goal[];
}

const progress = (msg: string) => process.stderr.write(`bench: mixed: ${msg}\n`);

function stratus(args: string[]): void {
  const res = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 600_000 });
  if (res.status !== 0) throw new Error(`stratus ${args.join(' ')}: ${res.status} ${res.stderr}${res.stdout}`);
}

/** `stratus serve` on `db` with `workers`; resolves once its ready file is written. */
async function serve(db: string, dir: string, workers: number): Promise<{ proc: ChildProcess; base: string; token: string; stop: () => Promise<void> }> {
  const ready = join(dir, `ready-${workers}.json`);
  rmSync(ready, { force: true });
  // BENCH_MIXED_PROF=<dir>: the server's processes under `node --cpu-prof` (the workers inherit it), a folder per run.
  const prof = process.env.BENCH_MIXED_PROF ? ['--cpu-prof', `--cpu-prof-dir=${join(process.env.BENCH_MIXED_PROF, `workers-${workers}`)}`] : [];
  const proc = spawn(
    process.execPath,
    [
      ...prof,
      BIN,
      'serve',
      '--port',
      '0',
      '--db',
      db,
      '--workers',
      String(workers),
      '--ci',
      '--rate-limits',
      'off',
      '--log-level',
      'warn',
      '--ready-file',
      ready,
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  for (let i = 0; !existsSync(ready); i++) {
    if (proc.exitCode !== null) throw new Error(`stratus serve exited ${proc.exitCode}`);
    if (i > 1200) throw new Error('stratus serve did not start within 120 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  const info = JSON.parse(readFileSync(ready, 'utf8')) as { url: string; admin_token: string };
  return {
    proc,
    base: info.url.replace(/\/api\/2\.0\/$/, ''),
    token: info.admin_token,
    stop: () =>
      new Promise<void>((resolve) => {
        if (proc.exitCode !== null) return resolve();
        proc.once('exit', () => resolve());
        proc.kill('SIGTERM');
      }),
  };
}

/** Each worker's `stratus_answer_cache_answers{outcome}` (asked on fresh connections until every worker answered). */
async function answerCounts(base: string, token: string, workers: number): Promise<Record<string, number>> {
  const seen = new Map<string, Record<string, number>>();
  for (let i = 0; i < 40 && seen.size < workers; i++) {
    const r = await request(`${base}/_stratus/metrics`, { authorization: `Bearer ${token}` });
    const counts: Record<string, number> = {};
    for (const m of r.body.toString('utf8').matchAll(/^stratus_answer_cache_answers\{outcome="(\w+)"\} (\d+)/gm)) counts[m[1]] = Number(m[2]);
    seen.set(String(r.headers['x-stratus-worker'] ?? i), counts);
  }
  const sum: Record<string, number> = {};
  for (const c of seen.values()) for (const [k, v] of Object.entries(c)) sum[k] = (sum[k] ?? 0) + v;
  return sum;
}

function loadProcess(plan: MixedPlan): Promise<MixedResult> {
  return new Promise((resolve, reject) => {
    const child = fork(LOAD, ['--mixed-load'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child.once('message', (r: MixedResult) => resolve(r));
    child.once('exit', (code) => code !== 0 && reject(new Error(`mixed load process exited ${code}`)));
    child.send(plan);
  });
}

/** Seeds `accounts` × `servers` (stratus seed) and the ACL shares (through the API of a one-worker server). */
async function seedDatabase(db: string, dir: string, accounts: number, servers: number): Promise<MixedAccount[]> {
  const users = Array.from({ length: accounts }, (_, i) => ({
    email: `mixed-${i}@example.com`,
    password: `mixed-secret-${i}`,
    servers: Array.from({ length: servers }, (_, j) => ({ name: `s-${j}`, cpu: 1000, mem: 536870912, vnc_password: 'mixedpass' })),
    tags: [
      { name: 'shared', resources: Array.from({ length: Math.ceil(servers / 10) }, (_, j) => `s-${j}`) },
      { name: 'web', resources: Array.from({ length: Math.ceil(servers / 2) }, (_, j) => `s-${j}`) },
    ],
  }));
  const file = join(dir, 'seed.json');
  writeFileSync(file, JSON.stringify({ users }));
  stratus(['migrate', '--db', db]);
  stratus(['seed', file, '--db', db]);
  const srv = await serve(db, dir, 1);
  try {
    const api = `${srv.base}/api/2.0/`;
    const out: MixedAccount[] = [];
    const uuids: string[] = [];
    for (const u of users) {
      const auth = { authorization: `Basic ${Buffer.from(`${u.email}:${u.password}`).toString('base64')}` };
      uuids.push((await call<{ uuid: string }>(`${api}profile/`, auth)).uuid);
      const list = await call<{ objects: { uuid: string }[] }>(`${api}servers/?limit=0`, auth);
      const tags = await call<{ objects: { uuid: string; name: string }[] }>(`${api}tags/?limit=0`, auth);
      out.push({ email: u.email, password: u.password, servers: list.objects.map((o) => o.uuid), tags: tags.objects.map((t) => t.uuid) });
    }
    // Each account shares its "shared" tag's servers with the next account (read: LIST).
    for (const [i, u] of users.entries()) {
      const auth = { authorization: `Basic ${Buffer.from(`${u.email}:${u.password}`).toString('base64')}` };
      const tags = await call<{ objects: { uuid: string; name: string }[] }>(`${api}tags/?limit=0`, auth);
      const shared = tags.objects.find((t) => t.name === 'shared')!.uuid;
      await call(`${api}acls/`, auth, 'POST', { name: 'share', grantees: [uuids[(i + 1) % users.length]], rules: [{ permission: 'LIST' }], tags: [shared] });
    }
    return out;
  } finally {
    await srv.stop();
  }
}

/** The reads' answers, recorded from Stratus, for the raw replay server. */
async function recordReplies(base: string, acct: MixedAccount): Promise<RawReply[]> {
  const auth = { authorization: `Basic ${Buffer.from(`${acct.email}:${acct.password}`).toString('base64')}` };
  const paths = [
    ...acct.servers.map((u) => `/api/2.0/servers/${u}/`),
    ...acct.tags.map((u) => `/api/2.0/tags/${u}/`),
    '/api/2.0/servers/detail/?limit=20',
    '/api/2.0/servers/?limit=50',
    '/api/2.0/tags/?limit=20',
    '/api/2.0/balance/',
  ];
  const out: RawReply[] = [];
  for (const path of paths) {
    const r = await request(`${base}${path}`, auth);
    out.push({ path, status: r.status, contentType: String(r.headers['content-type'] ?? 'application/json'), body: r.body.toString('base64') });
  }
  return out;
}

/**
 * The database of one run, seeded: SQLite copies one seeded file per run; PostgreSQL seeds a fresh schema
 * per run (there is no file to copy), the same accounts in the same order.
 */
type RunDatabase = { url: string; accounts: MixedAccount[]; drop: () => Promise<void> };

export async function mixedSection(quick: boolean, spec: Options['stores'][number] = { engine: 'sqlite' }): Promise<MixedReport> {
  const accounts = quick ? 10 : 50;
  const servers = quick ? 20 : 200;
  const durationS = Number(process.env.BENCH_MIXED_DURATION ?? (quick ? 5 : 20));
  const connections = 32;
  const subscribers = quick ? 5 : 20;
  if (!existsSync(join(ROOT, 'dist/stratus.js'))) spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit' });
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-mixed-'));
  const say = (msg: string) => progress(`${spec.engine}: ${msg}`);
  try {
    let seeded: { file: string; accounts: MixedAccount[] } | undefined;
    const databaseFor = async (workers: number): Promise<RunDatabase> => {
      say(`seeding ${accounts} accounts × ${servers} servers`);
      if (spec.engine === 'postgres') {
        const db: BenchDatabase = await postgresDatabase(spec.url, `bench_${process.pid}_mixed_${workers}`);
        return { url: db.url, accounts: await seedDatabase(db.url, dir, accounts, servers), drop: () => db.drop() };
      }
      // Each run on its own copy of the seeded database (the first run's writes do not load the second).
      if (!seeded) {
        const file = join(dir, 'seeded.db');
        seeded = { file, accounts: await seedDatabase(file, dir, accounts, servers) };
      }
      const url = join(dir, `run-${workers}.db`);
      copyFileSync(seeded.file, url);
      return { url, accounts: seeded.accounts, drop: async () => {} };
    };
    const rows: MixedRow[] = [];
    let replies: RawReply[] = [];
    let accts: MixedAccount[] = [];
    const plan = (base: string): MixedPlan => ({ base, accounts: accts, connections, subscribers, warmupS: 2, durationS });
    for (const workers of [1, 2]) {
      const db = await databaseFor(workers);
      accts = db.accounts;
      const srv = await serve(db.url, dir, workers);
      try {
        say(`${workers} worker(s), ${durationS} s`);
        if (!replies.length) replies = await recordReplies(srv.base, accts[0]);
        const before = await answerCounts(srv.base, srv.token, workers);
        const procs = tree(srv.proc.pid!);
        const pgAtStart = spec.engine === 'postgres' ? await backends(spec.url) : [];
        const cpu0 = [cpuMs(procs), cpuMs(pgAtStart)];
        const result = await loadProcess(plan(srv.base));
        // Backends opened during the run count from 0.
        const pgAtEnd = spec.engine === 'postgres' ? await backends(spec.url) : [];
        const cpu1 = [cpuMs(procs), cpuMs(pgAtEnd.filter((p) => pgAtStart.includes(p)))];
        if (cpu1[1] !== null) cpu1[1] += cpuMs(pgAtEnd.filter((p) => !pgAtStart.includes(p))) ?? 0;
        const after = await answerCounts(srv.base, srv.token, workers);
        const d = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
        const reusable = d('reused') + d('kept') + d('timed');
        // The load's warm-up requests are not counted: counted at the measured rate.
        const served = (result.requests * (plan(srv.base).warmupS + durationS)) / durationS;
        const perRequest = (i: number) => (cpu0[i] === null || cpu1[i] === null || !served ? null : ((cpu1[i]! - cpu0[i]!) * 1000) / served);
        // The open loop at a fixed share of one worker's saturated throughput (the same rate for 2 workers).
        const openRate = OPEN_SHARE > 0 ? OPEN_SHARE * ((rows[0]?.result ?? result).requests / (rows[0]?.result ?? result).seconds) : 0;
        const open = openRate >= 1 ? await loadProcess({ ...plan(srv.base), rate: Math.round(openRate) }) : null;
        rows.push({
          workers,
          result,
          open,
          hitRate: reusable > 0 ? d('reused') / reusable : null,
          cpuUs: { server: perRequest(0), database: spec.engine === 'postgres' ? perRequest(1) : null },
        });
      } finally {
        await srv.stop();
        await db.drop();
      }
    }
    // The raw replay: the same clients and mix against answers replayed from memory (one account's reads;
    // writes and other accounts' paths are answered 404 at once): the machine's ceiling for this load.
    say('raw replay');
    const raw = await startChild({ mode: 'raw', replies });
    let rawResult: MixedResult;
    try {
      rawResult = await loadProcess({ ...plan(raw.base), accounts: [accts[0]], subscribers: 0 });
    } finally {
      await raw.close();
    }
    const one = rows[0].result;
    const two = rows[1].result;
    const speedup = one.requests ? two.requests / two.seconds / (one.requests / one.seconds) : 0;
    const goals: Goal[] = [
      {
        store: spec.engine,
        section: 'mixed',
        what: '2 workers / 1 worker (req/s)',
        value: speedup,
        kind: 'min',
        goal: MIXED_SPEEDUP_GOAL,
        pass: speedup >= MIXED_SPEEDUP_GOAL,
      },
      {
        store: spec.engine,
        section: 'mixed',
        what: 'p99 ms, 2 workers',
        value: two.p99,
        kind: 'max',
        goal: MIXED_P99_GOAL_MS,
        pass: two.p99 < MIXED_P99_GOAL_MS,
      },
    ];
    return { engine: spec.engine, accounts, servers, connections, subscribers, durationS, rows, raw: rawResult, goals };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const f1 = (n: number) => n.toFixed(1);

export function mixedBlock(r: MixedReport): string[] {
  const lines = [
    `Mixed load (${r.engine === 'postgres' ? 'PostgreSQL' : 'SQLite file'}; ${r.accounts} accounts × ${r.servers} servers, ACL shares; ${r.connections} keep-alive clients, ${r.subscribers} websocket subscribers; ${r.durationS} s; load generator in its own process)`,
  ];
  const rawRate = r.raw.requests / r.raw.seconds;
  for (const row of r.rows) {
    const x = row.result;
    const rate = x.requests / x.seconds;
    lines.push(
      `  ${row.workers} worker(s): ${f1(rate)} req/s (ratio to raw ${(rate / rawRate).toFixed(3)}), p50 ${x.p50.toFixed(2)} ms, p99 ${x.p99.toFixed(2)} ms, ` +
        `errors ${x.errors}, 4xx ${x.refused}, event frames ${x.frames}, kept-answer hit rate ${row.hitRate === null ? 'n/a' : `${(row.hitRate * 100).toFixed(1)}%`}`,
    );
    const us = (v: number | null) => (v === null ? 'n/a' : `${v.toFixed(0)} µs`);
    lines.push(`      CPU per request: server ${us(row.cpuUs.server)}${r.engine === 'postgres' ? `, PostgreSQL backends ${us(row.cpuUs.database)}` : ''}`);
    const o = row.open;
    if (o)
      lines.push(
        `      open loop at ${o.rate} req/s (${f1(o.requests / o.seconds)} served): p50 ${o.p50.toFixed(2)} ms, p99 ${o.p99.toFixed(2)} ms, errors ${o.errors}, not started ${o.skipped ?? 0}`,
      );
    for (const [k, v] of Object.entries(x.byType))
      lines.push(`      ${k.padEnd(32)} n ${String(v.n).padStart(7)}  p50 ${v.p50.toFixed(2).padStart(7)} ms  p99 ${v.p99.toFixed(2).padStart(7)} ms`);
  }
  lines.push(`  raw replay (same clients and mix, answers from memory): ${f1(rawRate)} req/s, p99 ${r.raw.p99.toFixed(2)} ms`);
  for (const g of r.goals) lines.push(`  goal ${g.what}: ${g.value.toFixed(2)} (${g.kind === 'min' ? '>=' : '<'} ${g.goal}) ${g.pass ? 'met' : 'MISSED'}`);
  lines.push('');
  return lines;
}

// Run alone: `npx tsx bench/mixed.ts`.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const reports: MixedReport[] = [];
  for (const spec of optionsFromEnv().stores) {
    const report = await mixedSection(process.env.BENCH_QUICK === '1', spec);
    process.stdout.write(mixedBlock(report).join('\n') + '\n');
    reports.push(report);
  }
  process.exit(reports.some((report) => report.rows.some((r) => r.result.errors > 0)) ? 1 : 0);
}
