/**
 * `npx tsx bench/cpu.ts <db>`: server CPU µs per request (user + system of the server process, from /proc)
 * for the made-afresh GETs of issue 31, on a database kept by bench/profile.ts (PROFILE_KEEP=1): the solo
 * account's detail page, list page, one server, tags page and capabilities. Load-independent, unlike req/s:
 * a fixed number of requests (CPU_N, default 20000) over 10 connections, after a warm-up of CPU_N / 4.
 *
 *   CPU_WHAT=detail,single,...   a subset;  CPU_KEPT=1   whole answers kept (the default server);
 *   CPU_RAW=1                    also the raw node:http server replaying the same bytes;
 *   CPU_PROF=<dir>               the server under `node --cpu-prof` (profiles in <dir>/<what>/)
 */
import autocannon from 'autocannon';
import { readFileSync } from 'node:fs';
import { startChild, type Child } from './children.js';
import { basicAuth } from './http.js';

const db = process.argv[2];
const N = Number(process.env.CPU_N ?? 20_000);

function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

const fire = (base: string, path: string, headers: Record<string, string>, amount: number) =>
  new Promise<autocannon.Result>((resolve, reject) =>
    autocannon({ url: base + path, headers, connections: 10, amount }, (err, r) => (err ? reject(err) : resolve(r))),
  );

async function measure(child: Child, path: string, headers: Record<string, string>): Promise<string> {
  await fire(child.base, path, headers, Math.ceil(N / 4));
  await child.drain();
  const [c0, n0] = [cpuMs(child.pid), (await child.stats()).answered];
  const r = await fire(child.base, path, headers, N);
  await child.drain();
  const [c1, n1] = [cpuMs(child.pid), (await child.stats()).answered];
  const bad = r.non2xx + r.errors;
  return `${(((c1 - c0) / (n1 - n0)) * 1000).toFixed(0).padStart(5)} µs CPU/request${bad ? ` (${bad} bad)` : ''}`;
}

const solo = basicAuth('solo@bench.local', 'bench-solo-password');
const probe = await startChild({ mode: 'stratus', db });
const first = (await (await fetch(`${probe.base}/api/2.0/servers/?limit=1`, { headers: solo })).json()) as { objects: { uuid: string }[] };
const paths: Record<string, string> = {
  detail: '/api/2.0/servers/detail/?limit=20',
  single: `/api/2.0/servers/${first.objects[0].uuid}/`,
  tags: '/api/2.0/tags/?limit=20',
  capabilities: '/api/2.0/capabilities/',
  list: '/api/2.0/servers/?limit=20',
};
const what = (process.env.CPU_WHAT ?? Object.keys(paths).join(',')).split(',');
const replies = [];
for (const w of what) {
  const res = await fetch(probe.base + paths[w], { headers: solo });
  replies.push({
    path: paths[w],
    status: res.status,
    contentType: res.headers.get('content-type')!,
    body: Buffer.from(await res.arrayBuffer()).toString('base64'),
  });
}
await probe.close();
for (const w of what) {
  const prof = process.env.CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.CPU_PROF}/${w}`] : [];
  const child = await startChild({ mode: 'stratus', db, execArgv: prof, ...(process.env.CPU_KEPT === '1' ? {} : { answerCacheMiB: 0 }) });
  const line = await measure(child, paths[w], solo);
  await child.close();
  let raw = '';
  if (process.env.CPU_RAW === '1') {
    const r = await startChild({ mode: 'raw', replies });
    raw = `   raw: ${await measure(r, paths[w], {})}`;
    await r.close();
  }
  process.stdout.write(`${w.padEnd(13)} ${line}${raw}\n`);
}
