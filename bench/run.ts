/**
 * `npm run bench`: requests per second of Stratus against a raw node:http server that replays
 * Stratus's own response bytes (the upper bound for this machine), on two read-only URLs.
 *
 * BENCH_DURATION=<seconds> sets the length of each measured run (default 10). Exits non-zero when a
 * measured run saw a non-2xx status, an error or a timeout.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { systemClock } from '../src/core/clock.js';
import type { Services } from '../src/core/context.js';
import { randomIds } from '../src/core/ids.js';
import { Store } from '../src/store/db.js';
import { createUser } from '../src/resources/users/users.js';
import { setAccountLimits } from '../src/http/ratelimit/overrides.js';

const CONNECTIONS = 10;
const WARMUP_SECONDS = 2;
const TAGS = 50;

function durationFromEnv(): number {
  const raw = process.env.BENCH_DURATION ?? '10';
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_DURATION must be a whole number of seconds >= 1, got "${raw}"`);
  return n;
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** One request with node:http, so no Accept-Encoding is sent (just like autocannon) and bytes are as served. */
function request(url: string, headers: Record<string, string>, method = 'GET', body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A server that answers each path (with query) with the recorded reply, and 404 otherwise. No auth. */
async function startRaw(replies: Map<string, Reply>): Promise<{ server: http.Server; base: string }> {
  const server = http.createServer((req, res) => {
    const r = replies.get(req.url ?? '');
    if (!r) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(r.status, { 'content-type': String(r.headers['content-type']), 'content-length': r.body.length });
    res.end(r.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

interface Row {
  url: string;
  server: 'stratus' | 'raw';
  reqPerSec: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
}

/** The load generator runs in its own worker thread, so it does not share the server's event loop. */
async function load(url: string, headers: Record<string, string>, duration: number): Promise<autocannon.Result> {
  return autocannon({ url, connections: CONNECTIONS, pipelining: 1, duration, headers, workers: 1 } as autocannon.Options);
}

async function main(): Promise<void> {
  const duration = durationFromEnv();

  // 1. Stratus in-process, as `stratus serve` builds it, on an in-memory SQLite database.
  const config = loadConfig({ db: ':memory:', port: '0', 'log-level': 'warn' });
  const store = await Store.open(':memory:');
  const services: Services = { store, clock: systemClock, ids: randomIds, config };
  const email = 'bench@stratus.local';
  const password = 'bench-password-1';
  // The deployment's rate limits stay on (the limiter's own cost is part of what is measured), but the
  // bench account is exempt, or the benchmark would measure 429s instead of the API.
  await createUser(services, { email, password });
  await setAccountLimits(services, email, 'off');
  const app = await buildApp(services);
  const stratus = await app.listen({ host: '127.0.0.1', port: 0 });
  const auth = { authorization: `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}` };

  let raw: http.Server | undefined;
  try {
    // 2. Seed through the real API.
    const objects = Array.from({ length: TAGS }, (_, i) => ({ name: `bench-${i}` }));
    const created = await request(`${stratus}/api/2.0/tags/`, { ...auth, 'content-type': 'application/json' }, 'POST', JSON.stringify({ objects }));
    if (created.status < 200 || created.status > 299) throw new Error(`seeding tags failed: ${created.status} ${created.body}`);
    const tagUuid = (JSON.parse(created.body.toString('utf8')) as { objects: { uuid: string }[] }).objects[0].uuid;

    // 3. Record Stratus's replies once and replay their bytes from a raw server.
    const paths = [`/api/2.0/tags/${tagUuid}/`, '/api/2.0/tags/?limit=20'];
    const replies = new Map<string, Reply>();
    for (const path of paths) {
      const r = await request(`${stratus}${path}`, auth);
      if (r.status !== 200) throw new Error(`GET ${path} returned ${r.status}: ${r.body}`);
      replies.set(path, r);
    }
    const started = await startRaw(replies);
    raw = started.server;
    for (const [path, want] of replies) {
      const got = await request(`${started.base}${path}`, auth);
      if (got.status !== want.status || !got.body.equals(want.body) || got.headers['content-type'] !== want.headers['content-type'])
        throw new Error(`raw server does not replay ${path} faithfully`);
    }

    // 4. Load each URL on each server, one run at a time, after a warm-up that is not reported.
    const rows: Row[] = [];
    for (const path of paths) {
      for (const [name, base] of [
        ['stratus', stratus],
        ['raw', started.base],
      ] as const) {
        await load(`${base}${path}`, auth, WARMUP_SECONDS);
        const r = await load(`${base}${path}`, auth, duration);
        rows.push({
          url: path,
          server: name,
          reqPerSec: r.requests.mean,
          p50Ms: r.latency.p50,
          p99Ms: r.latency.p99,
          non2xx: r.non2xx,
          errors: r.errors + r.timeouts,
        });
      }
    }

    // 5. Report.
    const ratios = paths.map((url) => {
      const s = rows.find((r) => r.url === url && r.server === 'stratus')!;
      const w = rows.find((r) => r.url === url && r.server === 'raw')!;
      return { url, stratusOverRaw: w.reqPerSec ? s.reqPerSec / w.reqPerSec : 0 };
    });
    const urlWidth = Math.max(...paths.map((p) => p.length));
    const line = (cols: string[]) => cols.map((c, i) => (i < 2 ? c.padEnd(i === 0 ? urlWidth : 8) : c.padStart(10))).join('  ');
    const out = [
      `Stratus vs raw node:http — ${CONNECTIONS} connections, ${duration}s per run (after ${WARMUP_SECONDS}s warm-up); latency in whole ms (autocannon's resolution)`,
      '',
      line(['url', 'server', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors']),
      ...rows.map((r) => line([r.url, r.server, r.reqPerSec.toFixed(0), String(r.p50Ms), String(r.p99Ms), String(r.non2xx), String(r.errors)])),
      '',
      ...ratios.map((r) => `${r.url.padEnd(urlWidth)}  stratus/raw req/s = ${r.stratusOverRaw.toFixed(3)}`),
      '',
      `BENCH_JSON ${JSON.stringify({ connections: CONNECTIONS, durationSeconds: duration, rows, ratios })}`,
    ];
    process.stdout.write(out.join('\n') + '\n');

    const bad = rows.filter((r) => r.non2xx > 0 || r.errors > 0);
    if (bad.length) {
      process.stderr.write(`bench: measured runs had non-2xx responses or errors (${bad.map((r) => `${r.server} ${r.url}`).join(', ')})\n`);
      process.exitCode = 1;
    }
  } finally {
    // 6. Close everything so the process exits by itself.
    if (raw) {
      raw.closeAllConnections();
      await new Promise<void>((resolve) => raw!.close(() => resolve()));
    }
    await app.close();
    await store.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = 1;
});
