/**
 * One measured run: a warm-up that is not reported, then autocannon for the run's duration against a
 * server process, until that process is idle again. autocannon runs in this process's event loop: the
 * servers are other processes, so it competes with them only for the machine's cores.
 *
 * req/s is what the server answered from the start of the run until it was idle again, over that time:
 * autocannon alone would miss the requests still queued when it stops (at 100k servers a list can take
 * most of a second, so a 3 s run sees only a handful of answers). Latency is autocannon's, of the answers
 * it saw. Statements per request come from the server's store counter over the same span; the RSS is
 * sampled from /proc meanwhile.
 */
import autocannon from 'autocannon';
import type { Child } from './children.js';

export interface Load {
  /** Path with query, e.g. `/api/2.0/servers/?limit=20`. */
  path: string;
  headers: Record<string, string>;
  method?: 'GET' | 'POST' | 'PUT';
  body?: unknown;
  /** Varies each request (a new name per POST, the next server per PUT). */
  vary?: () => { path?: string; body?: unknown };
}

export interface Run {
  path: string;
  method: string;
  /** Answered by the server per second (see above). */
  reqPerSec: number;
  /** autocannon's own mean of its per-second counts (only the answers it saw). */
  clientReqPerSec: number;
  /** NaN (null in JSON) when autocannon saw no answer during the run. */
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  /** Answered by the server over the run and its tail. */
  requests: number;
  seconds: number;
  non2xx: number;
  errors: number;
  /** Responses autocannon saw, by status code. */
  statuses: Record<string, number>;
  /** Non-2xx responses, errors and timeouts of the warm-up (it is not reported, but must be clean too). */
  warmupBad: number;
  statementsPerRequest: number | null;
  /** Statements waited for per request (PostgreSQL sends some ahead: store/pg-client.ts). */
  roundTripsPerRequest: number | null;
  /** Highest VmRSS seen during the run and its tail, MiB. */
  peakRssMiB: number;
}

export interface RunSettings {
  durationS: number;
  warmupS: number;
  connections: number;
}

function cannon(base: string, load: Load, duration: number, connections: number): Promise<autocannon.Result> {
  const method = load.method ?? 'GET';
  const headers = load.body === undefined && !load.vary ? load.headers : { ...load.headers, 'content-type': 'application/json' };
  const request: autocannon.Request = { method, path: load.path, headers };
  if (load.body !== undefined) request.body = JSON.stringify(load.body);
  // Only when set: autocannon calls a present-but-undefined setupRequest.
  if (load.vary)
    request.setupRequest = (req) => {
      const v = load.vary!();
      return { ...req, path: v.path ?? req.path, body: v.body === undefined ? req.body : JSON.stringify(v.body) };
    };
  // A 60 s timeout (autocannon's default is 10 s): a slow answer is a figure, not an error.
  return autocannon({ url: base, connections, pipelining: 1, duration, timeout: 60, requests: [request] });
}

export async function measure(target: Child, load: Load, s: RunSettings): Promise<Run> {
  const warm = await cannon(target.base, load, s.warmupS, s.connections);
  await target.drain();
  const before = await target.stats();
  const t0 = performance.now();
  let peak = target.memory().rssMiB;
  const sampler = setInterval(() => (peak = Math.max(peak, target.memory().rssMiB)), 100);
  let r: autocannon.Result;
  try {
    r = await cannon(target.base, load, s.durationS, s.connections);
    await target.drain();
  } finally {
    clearInterval(sampler);
  }
  const seconds = (performance.now() - t0) / 1000;
  const after = await target.stats();
  const answered = after.answered - before.answered;
  return {
    path: load.path,
    method: load.method ?? 'GET',
    reqPerSec: answered / seconds,
    clientReqPerSec: r.requests.mean,
    // No answer seen (a 100k-server list under 10 connections can take longer than the run): no latency.
    meanMs: r.requests.total ? r.latency.mean : NaN,
    p50Ms: r.requests.total ? r.latency.p50 : NaN,
    p99Ms: r.requests.total ? r.latency.p99 : NaN,
    requests: answered,
    seconds,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    statuses: Object.fromEntries(Object.entries(r.statusCodeStats ?? {}).map(([code, v]) => [code, v.count ?? 0])),
    warmupBad: warm.non2xx + warm.errors + warm.timeouts,
    statementsPerRequest: before.statements === null || after.statements === null || !answered ? null : (after.statements - before.statements) / answered,
    roundTripsPerRequest: before.roundTrips === null || after.roundTrips === null || !answered ? null : (after.roundTrips - before.roundTrips) / answered,
    peakRssMiB: Math.max(peak, target.memory().rssMiB),
  };
}
