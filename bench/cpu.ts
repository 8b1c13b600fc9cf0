/**
 * `npx tsx bench/cpu.ts <db>`: server CPU µs per request (user + system of the server process, from /proc)
 * for the made-afresh GETs of issue 31, on a database kept by bench/profile.ts (PROFILE_KEEP=1): the solo
 * account's detail page, list page, one server, tags page and capabilities, and peer's detail and list pages
 * (`shared-detail`, `shared-list`: 20 own servers like solo's plus 1,000 shared by ACL). Load-independent, unlike req/s:
 * a fixed number of requests (CPU_N, default 20000) over 10 connections, after a warm-up of CPU_N / 4.
 *
 *   CPU_WHAT=detail,single,...   a subset;  CPU_KEPT=1   whole answers kept (the default server);
 *   CPU_RAW=1                    also the raw node:http server replaying the same bytes;
 *   CPU_PROF=<dir>               the server under `node --cpu-prof` (profiles in <dir>/<what>/)
 *   CPU_PROF_INTERVAL=<µs>       its sampling interval (default 1000)
 *   CPU_CALLGRIND=1              also instructions per request: the server under valgrind's callgrind, counting
 *                                only while the measured requests run (a count the machine's load does not
 *                                change, unlike CPU time; ~50x slower: use a CPU_N of a few thousand)
 */
import autocannon from 'autocannon';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuMs, startChild, type Child } from './children.js';
import { basicAuth } from './http.js';

const db = process.argv[2];
const N = Number(process.env.CPU_N ?? 20_000);

const fire = (base: string, path: string, headers: Record<string, string>, amount: number) =>
  new Promise<autocannon.Result>((resolve, reject) =>
    autocannon({ url: base + path, headers, connections: 10, amount }, (err, r) => (err ? reject(err) : resolve(r))),
  );

/** CPU_CALLGRIND: a wrapper that runs node under callgrind with counting off until callgrind_control turns it on. */
const grind = process.env.CPU_CALLGRIND === '1' ? mkdtempSync(join(tmpdir(), 'stratus-cg-')) : null;
if (grind) {
  writeFileSync(
    join(grind, 'node'),
    `#!/bin/sh\nexec valgrind --quiet --tool=callgrind --smc-check=all-non-file --instr-atstart=no --callgrind-out-file=${grind}/out.%p ${process.execPath} "$@"\n`,
  );
  chmodSync(join(grind, 'node'), 0o755);
}

/** Instructions callgrind counted in `pid` since counting was turned on (its dumps so far, summed). */
function instructions(pid: number): number {
  execFileSync('callgrind_control', ['-d', String(pid)], { stdio: 'ignore' });
  let total = 0;
  for (const f of readdirSync(grind!).filter((n) => n.startsWith(`out.${pid}`))) {
    const m = /^summary: (\d+)/m.exec(readFileSync(join(grind!, f), 'utf8'));
    if (m) total += Number(m[1]);
  }
  return total;
}

async function measure(child: Child, path: string, headers: Record<string, string>): Promise<string> {
  await fire(child.base, path, headers, Math.ceil(N / 4));
  await child.drain();
  if (grind) execFileSync('callgrind_control', ['-i', 'on', String(child.pid)], { stdio: 'ignore' });
  const [c0, n0] = [cpuMs(child.pid), (await child.stats()).answered];
  const r = await fire(child.base, path, headers, N);
  await child.drain();
  const [c1, n1] = [cpuMs(child.pid), (await child.stats()).answered];
  const bad = r.non2xx + r.errors;
  const ir = grind ? `  ${(instructions(child.pid) / (n1 - n0) / 1000).toFixed(1).padStart(7)} k instructions/request` : '';
  return `${(((c1 - c0) / (n1 - n0)) * 1000).toFixed(0).padStart(5)} µs CPU/request${ir}${bad ? ` (${bad} bad)` : ''}`;
}

const solo = basicAuth('solo@bench.local', 'bench-solo-password');
/** peer: solo's 20 servers of its own, plus the 1,000 servers the sharer's ACL shares with it. */
const peer = basicAuth('peer@bench.local', 'bench-peer-password');
const probe = await startChild({ mode: 'stratus', db });
const first = (await (await fetch(`${probe.base}/api/2.0/servers/?limit=1`, { headers: solo })).json()) as { objects: { uuid: string }[] };
const paths: Record<string, string> = {
  detail: '/api/2.0/servers/detail/?limit=20',
  single: `/api/2.0/servers/${first.objects[0].uuid}/`,
  tags: '/api/2.0/tags/?limit=20',
  capabilities: '/api/2.0/capabilities/',
  list: '/api/2.0/servers/?limit=20',
  'shared-detail': '/api/2.0/servers/detail/?limit=20',
  'shared-list': '/api/2.0/servers/?limit=20',
};
const headersOf = (w: string) => (w.startsWith('shared-') ? peer : solo);
const what = (process.env.CPU_WHAT ?? Object.keys(paths).join(',')).split(',');
const replies = [];
for (const w of what) {
  const res = await fetch(probe.base + paths[w], { headers: headersOf(w) });
  replies.push({
    path: paths[w],
    status: res.status,
    contentType: res.headers.get('content-type')!,
    body: Buffer.from(await res.arrayBuffer()).toString('base64'),
  });
}
await probe.close();
for (const w of what) {
  const prof = process.env.CPU_PROF
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.CPU_PROF}/${w}`, `--cpu-prof-interval=${process.env.CPU_PROF_INTERVAL ?? 1000}`]
    : [];
  const child = await startChild({
    mode: 'stratus',
    db,
    execArgv: prof,
    ...(process.env.CPU_KEPT === '1' ? {} : { answerCacheMiB: 0 }),
    ...(grind ? { execPath: join(grind, 'node') } : {}),
  });
  const line = await measure(child, paths[w], headersOf(w));
  await child.close();
  let raw = '';
  if (process.env.CPU_RAW === '1') {
    const r = await startChild({ mode: 'raw', replies, ...(grind ? { execPath: join(grind, 'node') } : {}) });
    raw = `   raw: ${await measure(r, paths[w], {})}`;
    await r.close();
  }
  process.stdout.write(`${w.padEnd(13)} ${line}${raw}\n`);
}
if (grind) rmSync(grind, { recursive: true, force: true });
