/**
 * The mixed bench's load generator (bench/mixed.ts), a process of its own so it does not share the server's
 * cores' event loops with it: `connections` clients on keep-alive sockets (one node:http Agent), each acting
 * for one account as CI and consoles do, plus websocket subscribers of the event stream. Told what to do by
 * one IPC message (MixedPlan); answers with one MixedResult.
 */
import http from 'node:http';
import WebSocket from 'ws';

export interface MixedAccount {
  email: string;
  password: string;
  servers: string[];
  tags: string[];
}

export interface MixedPlan {
  base: string;
  accounts: MixedAccount[];
  connections: number;
  subscribers: number;
  warmupS: number;
  durationS: number;
  /**
   * Open loop: requests started at this fixed rate (req/s, spread evenly over time, each for the next
   * account in turn) whatever the answers' speed, instead of `connections` clients each waiting for its
   * answer (closed loop). Latency counts from when a request was due, so a stall shows in every request
   * it delayed (no coordinated omission). `connections` still caps the sockets: beyond, requests queue.
   */
  rate?: number;
}

export interface MixedResult {
  seconds: number;
  requests: number;
  /** Network errors and 5xx answers. */
  errors: number;
  /** 4xx answers (a start of a server already starting, ...): expected now and then, not errors. */
  refused: number;
  byType: Record<string, { n: number; p50: number; p99: number }>;
  p50: number;
  p99: number;
  frames: number;
  /** Open loop: the rate asked for, and requests not started because 2000 were already waiting. */
  rate?: number;
  skipped?: number;
}

/** What the clients do, and how often (weights out of 100: 80 reads, 20 writes). */
export const MIX: [string, number][] = [
  ['GET /servers/<uuid>/', 34],
  ['GET /servers/detail/?limit=20', 16],
  ['GET /servers/?limit=50', 10],
  ['GET /tags/<uuid>/', 8],
  ['GET /tags/?limit=20', 6],
  ['GET /balance/', 6],
  ['PUT /servers/<uuid>/', 8],
  ['POST start/stop', 5],
  ['POST /servers/', 4],
  ['DELETE /servers/<uuid>/', 3],
];

const pick = <T>(xs: T[]): T => xs[Math.floor(Math.random() * xs.length)];

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export async function runLoad(plan: MixedPlan): Promise<MixedResult> {
  const url = new URL(plan.base);
  const agent = new http.Agent({ keepAlive: true, maxSockets: plan.connections });
  const send = (method: string, path: string, auth: string, body?: unknown): Promise<number> =>
    new Promise((resolve) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          method,
          path,
          agent,
          headers: { authorization: auth, ...(data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}) },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', () => resolve(0));
      req.end(data);
    });

  const lat = new Map<string, number[]>(MIX.map(([k]) => [k, []]));
  let measuring = false;
  let stop = false;
  let errors = 0;
  let refused = 0;
  const total = MIX.reduce((a, [, w]) => a + w, 0);
  const created = new Map<string, string[]>();

  const one = async (acct: MixedAccount, due: number) => {
    const auth = `Basic ${Buffer.from(`${acct.email}:${acct.password}`).toString('base64')}`;
    {
      let r = Math.random() * total;
      let kind = MIX[0][0];
      for (const [k, w] of MIX)
        if ((r -= w) < 0) {
          kind = k;
          break;
        }
      const t0 = due;
      let status: number;
      const api = '/api/2.0/';
      switch (kind) {
        case 'GET /servers/<uuid>/':
          status = await send('GET', `${api}servers/${pick(acct.servers)}/`, auth);
          break;
        case 'GET /servers/detail/?limit=20':
          status = await send('GET', `${api}servers/detail/?limit=20`, auth);
          break;
        case 'GET /servers/?limit=50':
          status = await send('GET', `${api}servers/?limit=50`, auth);
          break;
        case 'GET /tags/<uuid>/':
          status = await send('GET', `${api}tags/${pick(acct.tags)}/`, auth);
          break;
        case 'GET /tags/?limit=20':
          status = await send('GET', `${api}tags/?limit=20`, auth);
          break;
        case 'GET /balance/':
          status = await send('GET', `${api}balance/`, auth);
          break;
        case 'PUT /servers/<uuid>/':
          status = await send('PUT', `${api}servers/${pick(acct.servers)}/`, auth, { name: `renamed-${Math.floor(Math.random() * 1e6)}` });
          break;
        case 'POST start/stop':
          status = await send('POST', `${api}servers/${pick(acct.servers)}/action/?do=${Math.random() < 0.5 ? 'start' : 'stop'}`, auth);
          break;
        case 'POST /servers/': {
          status = await send('POST', `${api}servers/`, auth, {
            name: `made-${Math.floor(Math.random() * 1e9)}`,
            cpu: 1000,
            mem: 536870912,
            vnc_password: 'mixedpass',
          });
          break;
        }
        default: {
          // Deletes what this account's clients made (a made server is known by listing: cheap enough here).
          const uuid = created.get(acct.email)?.pop();
          if (!uuid) {
            status = await send('GET', `${api}servers/?limit=1&name__startswith=made-`, auth);
            break;
          }
          status = await send('DELETE', `${api}servers/${uuid}/`, auth);
        }
      }
      const ms = performance.now() - t0;
      if (!measuring) return;
      lat.get(kind)!.push(ms);
      if (status === 0 || status >= 500) errors++;
      else if (status >= 400) refused++;
    }
  };
  const client = async (acct: MixedAccount) => {
    while (!stop) await one(acct, performance.now());
  };
  let skipped = 0;
  /** Open loop: one request due every 1/rate s, started when due (late timers start every overdue one). */
  const paced = async (rate: number) => {
    const outstanding = new Set<Promise<void>>();
    const step = 1000 / rate;
    let due = performance.now();
    for (let i = 0; !stop;) {
      const now = performance.now();
      for (; due <= now; due += step, i++) {
        if (outstanding.size >= 2000) {
          if (measuring) skipped++;
          continue;
        }
        const p = one(plan.accounts[i % plan.accounts.length], due).finally(() => outstanding.delete(p));
        outstanding.add(p);
      }
      await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())));
    }
    await Promise.all(outstanding);
  };

  // Made servers to delete: found by name once a second per account (outside the measured requests).
  const finder = async () => {
    while (!stop) {
      for (const acct of plan.accounts) {
        if (stop) break;
        const auth = `Basic ${Buffer.from(`${acct.email}:${acct.password}`).toString('base64')}`;
        const list = await new Promise<string[]>((resolve) => {
          const req = http.request(
            { host: url.hostname, port: url.port, path: '/api/2.0/servers/?limit=20&name__startswith=made-', agent, headers: { authorization: auth } },
            (res) => {
              let t = '';
              res.on('data', (d) => (t += d));
              res.on('end', () => {
                try {
                  resolve((JSON.parse(t) as { objects: { uuid: string }[] }).objects.map((o) => o.uuid));
                } catch {
                  resolve([]);
                }
              });
            },
          );
          req.on('error', () => resolve([]));
          req.end();
        });
        created.set(acct.email, list);
      }
      await new Promise((r) => setTimeout(r, 1000));
    }
  };

  // Event-stream subscribers, each for one account.
  let frames = 0;
  const sockets: WebSocket[] = [];
  for (let i = 0; i < plan.subscribers; i++) {
    const acct = plan.accounts[i % plan.accounts.length];
    const auth = `Basic ${Buffer.from(`${acct.email}:${acct.password}`).toString('base64')}`;
    const cookie = await new Promise<string>((resolve) => {
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          method: 'POST',
          path: '/api/2.0/accounts/action/?do=authenticate_asynchronous',
          headers: { authorization: auth },
        },
        (res) => {
          res.resume();
          resolve(String(res.headers['set-cookie'] ?? '').split(';')[0]);
        },
      );
      req.on('error', () => resolve(''));
      req.end();
    });
    if (!cookie) continue;
    const ws = new WebSocket(`ws://${url.host}/websocket`, { headers: { cookie } });
    ws.on('message', () => measuring && frames++);
    ws.on('error', () => {});
    sockets.push(ws);
  }

  const clients = plan.rate ? [paced(plan.rate)] : Array.from({ length: plan.connections }, (_, i) => client(plan.accounts[i % plan.accounts.length]));
  const find = finder();
  await new Promise((r) => setTimeout(r, plan.warmupS * 1000));
  measuring = true;
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, plan.durationS * 1000));
  measuring = false;
  const seconds = (performance.now() - t0) / 1000;
  stop = true;
  await Promise.all([...clients, find]);
  for (const ws of sockets) ws.close();
  agent.destroy();

  const all: number[] = [];
  const byType: MixedResult['byType'] = {};
  for (const [k, xs] of lat) {
    xs.sort((a, b) => a - b);
    // One at a time: a raw replay answers hundreds of thousands of requests, more than a spread's arguments.
    for (const x of xs) all.push(x);
    byType[k] = { n: xs.length, p50: percentile(xs, 50), p99: percentile(xs, 99) };
  }
  all.sort((a, b) => a - b);
  const open = plan.rate ? { rate: plan.rate, skipped } : {};
  return { seconds, requests: all.length, errors, refused, byType, p50: percentile(all, 50), p99: percentile(all, 99), frames, ...open };
}

// As a child process (bench/mixed.ts forks this file): one plan in, one result out.
if (process.send && process.argv.includes('--mixed-load')) {
  process.once('message', (plan: MixedPlan) => {
    void runLoad(plan).then((r) => {
      process.send!(r, () => process.exit(0));
    });
  });
}
