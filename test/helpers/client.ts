import http from 'node:http';
import type { Socket } from 'node:net';
import { gunzipSync, inflateSync } from 'node:zlib';
import { contractFor, countChecked } from './contract.js';

export interface Response {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** Header lines as sent (repeated headers stay separate): name, value, name, value, … */
  rawHeaders: string[];
  /** Raw body bytes as received (still compressed if the server compressed). */
  raw: Buffer;
  text: string;
  json: any;
}

/**
 * The request never got an answer because the connection failed (refused, reset, closed mid-answer): what a
 * killed server does. Anything else thrown by a request (a contract mismatch, a bad body) is a real failure.
 */
export function connectionLost(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ECONNABORTED'].includes(code);
}

/**
 * Keep-alive connections, each dropped after IDLE_MS unused. The server closes an idle connection after its
 * keep-alive timeout (72 s by default, and says so: `Keep-Alive: timeout=72`); a client that reuses one at
 * that moment writes into a closing socket and reads ECONNRESET (seen once in the races under load, where a
 * batch reused connections idle since an earlier race). A client must let idle connections go before the
 * server does, as this one does; `timeout` only closes idle sockets (a slower answer is still awaited).
 *
 * The idle timer alone is not enough when the test and its server share one event loop: a long synchronous
 * stretch (SQLite work of `advance` over a month of billing) holds back every timer, and the request after
 * it is written into the idle connection before the overdue timers run — then the server's keep-alive timer
 * fires first and resets the connection under the request (billing-month.test.ts retried on ECONNRESET for
 * that). So a connection idle longer than IDLE_MS by the wall clock is dropped before any request, whether
 * or not its timer has run yet.
 */
export const IDLE_MS = 5_000;
const freedAt = new WeakMap<Socket, number>();
class FreshConnections extends http.Agent {
  // (Node's returns whether the socket is kept: @types/node says void.)
  override keepSocketAlive(socket: Socket): void {
    const kept = super.keepSocketAlive(socket) as unknown as boolean;
    if (kept) freedAt.set(socket, Date.now());
    return kept as unknown as void;
  }
  /** Drops the idle connections whose idle time is up (their timer may be overdue behind a busy loop). */
  dropStale(): void {
    const now = Date.now();
    for (const list of Object.values(this.freeSockets)) {
      if (!list) continue;
      for (let i = list.length - 1; i >= 0; i--) {
        const socket = list[i];
        if (now - (freedAt.get(socket) ?? now) < IDLE_MS) continue;
        list.splice(i, 1); // out of the free list at once (its 'close', which also removes it, comes later)
        socket.destroy();
      }
    }
  }
}
const agent = new FreshConnections({ keepAlive: true, maxSockets: 16, timeout: IDLE_MS });

/**
 * A small HTTP client over node:http, so tests see exactly what went over the wire (no auto-decompression).
 * Every answer is checked against the server's OpenAPI document (test/helpers/contract.ts); a mismatch
 * rejects the request, so the test that made it fails and names it.
 */
export class Client {
  constructor(
    readonly base: string,
    readonly creds?: { email: string; password: string },
  ) {}

  authHeader(): Record<string, string> {
    if (!this.creds) return {};
    return { authorization: 'Basic ' + Buffer.from(`${this.creds.email}:${this.creds.password}`).toString('base64') };
  }

  async request(
    method: string,
    path: string,
    /** `localAddress` sends from another loopback address (127.0.0.2, …): a different client address. */
    opts: { body?: unknown; raw?: string | Buffer; headers?: Record<string, string>; localAddress?: string } = {},
  ): Promise<Response> {
    // Paths are under /api/2.0/ unless they say otherwise (`/api/…`, the service's own `/_stratus/…`).
    const url = new URL(/^\/(api|_stratus)\//.test(path) ? path : `/api/2.0/${path.replace(/^\//, '')}`, this.base);
    const res = await this.exchange(method, url, opts);
    // A body compressed otherwise than gzip is not read here (tests of deflate look at the bytes).
    const encoding = res.headers['content-encoding'];
    if (encoding === undefined || encoding === 'gzip') {
      const contract = await contractFor(this.base, () => this.exchange('GET', new URL('/api/2.0/openapi.json', this.base), { headers: {} }));
      contract.check(method, url, res);
      countChecked();
    }
    return res;
  }

  exchange(
    method: string,
    url: URL,
    opts: { body?: unknown; raw?: string | Buffer; headers?: Record<string, string>; localAddress?: string },
  ): Promise<Response> {
    const headers: Record<string, string> = { ...this.authHeader(), ...opts.headers };
    let payload: Buffer | undefined;
    if (opts.raw !== undefined) payload = Buffer.isBuffer(opts.raw) ? opts.raw : Buffer.from(opts.raw);
    else if (opts.body !== undefined) {
      payload = Buffer.from(JSON.stringify(opts.body));
      headers['content-type'] ??= 'application/json';
    }
    if (payload) headers['content-length'] = String(payload.length);
    agent.dropStale();
    return new Promise((resolve, reject) => {
      const req = http.request(url, { method, headers, agent, ...(opts.localAddress ? { localAddress: opts.localAddress } : {}) }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const raw = Buffer.concat(chunks);
          const encoding = res.headers['content-encoding'];
          const body = encoding === 'gzip' ? gunzipSync(raw) : encoding === 'deflate' ? inflateSync(raw) : raw;
          const text = body.toString('utf8');
          let json: unknown;
          if ((res.headers['content-type'] ?? '').includes('json') && text) json = JSON.parse(text);
          resolve({ status: res.statusCode!, headers: res.headers, rawHeaders: res.rawHeaders, raw, text, json });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      if (payload) req.write(payload);
      req.end();
    });
  }

  get = (path: string, headers?: Record<string, string>) => this.request('GET', path, { headers });
  post = (path: string, body?: unknown, headers?: Record<string, string>) => this.request('POST', path, { body, headers });
  put = (path: string, body?: unknown, headers?: Record<string, string>) => this.request('PUT', path, { body, headers });
  delete = (path: string, headers?: Record<string, string>) => this.request('DELETE', path, { headers });
}
