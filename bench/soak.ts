/**
 * `npx tsx bench/soak.ts --minutes 5 [options] [-- serve flags]`: a memory soak. Starts `stratus serve` (the
 * shipped build, bin/stratus.js) on a fresh SQLite file in a temp folder, with rate limits and login
 * protection off, and drives the mixed load of bench/soak-load.ts through many users (more join all the
 * time) and event-stream clients, for the given minutes. Every `--sample` seconds it prints the server's RSS
 * (from /proc) and `process.memoryUsage()` (through the inspector: the server runs with `--inspect`). At the
 * start (users made, before the load) and at the end (load stopped) it forces a full garbage collection and
 * measures again: growth that survives a collection is retained, the rest is garbage not yet collected.
 * `--snapshots DIR` also writes a heap snapshot at both points (compare them with bench/heap-diff.ts). It ends with
 * the slope of RSS and heapUsed over the run's second half (MiB per minute): a flat end state is near 0.
 *
 * Options: --minutes 5, --port 19431 (the inspector listens on port+1), --users 100 (at the start),
 * --new-users 60 (per minute), --concurrency 12, --streams-every 500 (ms between event-stream clients),
 * --sample 5 (s), --seed 1, --db FILE|postgres://… (default: a SQLite file in a temp folder), --snapshots DIR,
 * --wrap 'heaptrack -o FILE' (a native memory profiler around the server; RSS is then the wrapper's), --root DIR
 * (another checkout's bin/stratus.js: an earlier commit for a before/after). Heap snapshots cost the server's
 * malloc heap ~100 MiB that glibc keeps: measure RSS in a run without --snapshots.
 * Flags after `--` go to `stratus serve` (e.g. `-- --answer-cache-mib 0 --cache-mib 0`).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Inspector } from './inspector.js';
import { Load, random } from './soak-load.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MiB = 1024 * 1024;

const { values: o, positionals: serveFlags } = parseArgs({
  allowPositionals: true,
  options: {
    minutes: { type: 'string', default: '5' },
    port: { type: 'string', default: '19431' },
    users: { type: 'string', default: '100' },
    'new-users': { type: 'string', default: '60' },
    concurrency: { type: 'string', default: '12' },
    'streams-every': { type: 'string', default: '500' },
    sample: { type: 'string', default: '5' },
    seed: { type: 'string', default: '1' },
    db: { type: 'string' },
    snapshots: { type: 'string' },
    wrap: { type: 'string' },
    root: { type: 'string' },
  },
});
const num = (k: keyof typeof o) => {
  const n = Number(o[k]);
  if (!(n >= 0)) throw new Error(`--${k} must be a number, got ${o[k]}`);
  return n;
};

function rssMiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

/** Resident memory by kind of mapping: the main thread's malloc heap (`[heap]`), anonymous maps (V8's heap, thread arenas), files. */
function mapsMiB(pid: number): { brk: number; anon: number; file: number } {
  const out = { brk: 0, anon: 0, file: 0 };
  let kind: keyof typeof out = 'anon';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const map = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (map) kind = map[1] === '[heap]' ? 'brk' : map[1] === '' || map[1].startsWith('[') ? 'anon' : 'file';
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) out[kind] += Number(rss[1]) / 1024;
  }
  return out;
}

const mib = (n: number) => (n / MiB).toFixed(1);

/** Least-squares slope of `key` over the samples of the run's second half, in MiB per minute (a flat end state: near 0). */
function secondHalfSlope(samples: { t: number; rss: number; heapUsed: number }[], key: 'rss' | 'heapUsed'): number {
  const end = samples.at(-1)?.t ?? 0;
  const half = samples.filter((s) => s.t >= end / 2);
  if (half.length < 2) return NaN;
  const mt = half.reduce((a, s) => a + s.t, 0) / half.length;
  const mv = half.reduce((a, s) => a + s[key], 0) / half.length;
  const num = half.reduce((a, s) => a + (s.t - mt) * (s[key] - mv), 0);
  const den = half.reduce((a, s) => a + (s.t - mt) ** 2, 0);
  return (60 * num) / den;
}
const row = (cells: (string | number)[]) => cells.map((c, i) => String(c).padStart(i === 0 ? 8 : 10)).join(' ');
const HEADER = row(['t', 'req/s', 'rss', 'heapUsed', 'heapTotal', 'external', 'arrayBuf', 'users', 'sockets']);

const dir = mkdtempSync(join(tmpdir(), 'stratus-soak-'));
const port = num('port');
const token = 'soak-admin-token-0123456789';
const ready = join(dir, 'ready.json');
const db = o.db ?? join(dir, 'soak.db');
const args = [
  `--inspect=127.0.0.1:${port + 1}`,
  join(o.root ?? ROOT, 'bin/stratus.js'),
  'serve',
  ...['--db', db, '--port', String(port), '--admin-token', token, '--ready-file', ready, '--outbox', join(dir, 'outbox')],
  ...['--rate-limits', 'off', '--login-protection', 'off', '--log-level', 'warn', '--log-format', 'json'],
  ...serveFlags,
];
// `--wrap 'heaptrack -o FILE'`: run the server under a native memory profiler (RSS then reads the wrapper's).
const wrap = o.wrap ? o.wrap.split(' ') : [];
// Its own process group, so a stop reaches the server under a wrapper too.
const server = spawn(wrap[0] ?? process.execPath, [...wrap.slice(1), ...(wrap.length ? [process.execPath] : []), ...args], {
  stdio: ['ignore', 'ignore', 'inherit'],
  detached: true,
});
const exited = new Promise<void>((resolve) => server.once('exit', () => resolve()));
const stopServer = (signal: NodeJS.Signals) => server.exitCode === null && process.kill(-server.pid!, signal);
process.on('exit', () => stopServer('SIGKILL'));

try {
  for (const t0 = Date.now(); !existsSync(ready) || !readFileSync(ready, 'utf8');) {
    if (server.exitCode !== null) throw new Error(`stratus serve exited (${server.exitCode})`);
    if (Date.now() - t0 > 60_000) throw new Error('stratus serve did not become ready in 60 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  const pid = server.pid!;
  const idleRss = rssMiB(pid);
  const inspector = await Inspector.connect(port + 1);
  const load = new Load(`http://127.0.0.1:${port}/`, token, random(num('seed')));
  console.log(`soak: ${o.minutes} min, stratus serve ${serveFlags.join(' ') || '(defaults)'} on ${o.db ? db : 'a temp SQLite file'}, pid ${pid}`);

  for (let i = 0; i < num('users'); i += 4) await Promise.all([0, 1, 2, 3].map(() => load.addUser()));
  await inspector.gc();
  const start = { rss: rssMiB(pid), mem: await inspector.memory(), maps: mapsMiB(pid) };
  if (o.snapshots) await inspector.heapSnapshot(join(o.snapshots, 'start.heapsnapshot'));
  console.log(
    `idle after start: rss ${idleRss.toFixed(1)} MiB; ${load.users.length} users made, after gc: rss ${start.rss.toFixed(1)}, heapUsed ${mib(start.mem.heapUsed)} ([heap] ${start.maps.brk.toFixed(1)}, anonymous ${start.maps.anon.toFixed(1)}, files ${start.maps.file.toFixed(1)})`,
  );
  console.log(HEADER);

  const t0 = Date.now();
  const workers = Array.from({ length: num('concurrency') }, () => load.worker());
  const streams = load.streams(num('streams-every'), `ws://127.0.0.1:${port}`);
  const joining = (async () => {
    const every = 60_000 / Math.max(num('new-users'), 1e-9);
    for (let next = Date.now() + every; Date.now() < t0 + num('minutes') * 60_000; next += every) {
      await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
      if (num('new-users') > 0) await load.addUser().catch(() => undefined);
    }
  })();
  const samples: { t: number; rss: number; heapUsed: number }[] = [];
  let lastReq = 0;
  let lastT = t0;
  while (Date.now() - t0 < num('minutes') * 60_000) {
    await new Promise((r) => setTimeout(r, num('sample') * 1000));
    const now = Date.now();
    const rss = rssMiB(pid);
    const mem = await inspector.memory();
    samples.push({ t: (now - t0) / 1000, rss, heapUsed: mem.heapUsed / MiB });
    const rate = ((load.tally.requests - lastReq) * 1000) / (now - lastT);
    [lastReq, lastT] = [load.tally.requests, now];
    console.log(
      row([
        `${((now - t0) / 1000).toFixed(0)}s`,
        rate.toFixed(0),
        rss.toFixed(1),
        mib(mem.heapUsed),
        mib(mem.heapTotal),
        mib(mem.external),
        mib(mem.arrayBuffers),
        load.users.length,
        load.tally.sockets,
      ]),
    );
  }
  load.stop();
  await Promise.all([...workers, streams, joining]);
  // Event-stream clients stay up to 10 s; timers the load scheduled run meanwhile.
  await new Promise((r) => setTimeout(r, 11_000));
  const endRss = rssMiB(pid);
  await inspector.gc();
  const end = { rss: rssMiB(pid), mem: await inspector.memory(), maps: mapsMiB(pid) };
  if (o.snapshots) await inspector.heapSnapshot(join(o.snapshots, 'end.heapsnapshot'));
  const metrics = await (await fetch(`http://127.0.0.1:${port}/_stratus/metrics`)).text();
  const gauge = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(metrics)?.[1] ?? NaN);

  console.log(
    `after the load, ${((Date.now() - t0) / 1000).toFixed(0)} s: rss ${endRss.toFixed(1)} MiB; after gc: ${row(['', '', end.rss.toFixed(1), mib(end.mem.heapUsed), mib(end.mem.heapTotal), mib(end.mem.external), mib(end.mem.arrayBuffers)]).trim()}`,
  );
  console.log(
    `resident after gc: malloc heap [heap] ${end.maps.brk.toFixed(1)} MiB, anonymous maps ${end.maps.anon.toFixed(1)}, files ${end.maps.file.toFixed(1)}`,
  );
  console.log(
    `requests ${load.tally.requests} (${Object.entries(load.tally.byClass)
      .map(([k, v]) => `${k} ${v}`)
      .join(
        ', ',
      )}), users ${load.users.length}, event-stream clients ${load.tally.sockets}, answer cache ${mib(gauge('stratus_answer_cache_bytes'))} MiB, object cache ${mib(gauge('stratus_object_cache_bytes'))} MiB (estimated)`,
  );
  for (const e of load.tally.errors) console.log(`  error: ${e}`);
  const peak = Math.max(...samples.map((s) => s.rss));
  console.log(
    `SOAK rss idle ${idleRss.toFixed(1)} MiB, start (after gc) ${start.rss.toFixed(1)}, peak ${peak.toFixed(1)}, end ${endRss.toFixed(1)}, end after gc ${end.rss.toFixed(1)}; heapUsed after gc start ${mib(start.mem.heapUsed)}, end ${mib(end.mem.heapUsed)} MiB`,
  );
  console.log(
    `SOAK_JSON ${JSON.stringify({ idleRss, start: { rss: start.rss, heapUsed: start.mem.heapUsed / MiB }, peakRss: peak, endRss, end: { rss: end.rss, maps: end.maps, heapUsed: end.mem.heapUsed / MiB, external: end.mem.external / MiB }, requests: load.tally.requests, byClass: load.tally.byClass, users: load.users.length, samples })}`,
  );
  // heapUsed samples include garbage not yet collected: its slope is noisy; the after-gc figures tell what is retained.
  console.log(
    `SOAK second half: rss ${secondHalfSlope(samples, 'rss').toFixed(1)} MiB/min, heapUsed ${secondHalfSlope(samples, 'heapUsed').toFixed(1)} MiB/min`,
  );
  load.close();
  inspector.close();
} finally {
  stopServer('SIGTERM');
  await exited;
  rmSync(dir, { recursive: true, force: true });
}
