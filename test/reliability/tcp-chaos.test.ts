/**
 * TCP-level chaos: clients that reset (RST) or half-close (FIN) their connection at every phase of a request,
 * trickle their headers byte by byte, pipeline and reset, or send oversized headers, against every kind of
 * endpoint (API read and write, early answers, websocket upgrades accepted and refused, the three upload
 * protocols, download, the console's files, the admin plane, the location prefix and host, TLS), on one
 * process, one process over TLS, `--workers 2` and `--locations zrh,sjc` over TLS.
 *
 * After every case the server (every worker of it) is the same process as before, answers its health request
 * and a normal API request within HEALTHY_MS; after each deployment's cases its memory is back within
 * RSS_BOUND_MIB of where it started. The HTTP fuzz sends whole requests; this suite is about what a
 * connection can do around them. It prints what it tried and how many.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engine, freshDatabase } from '../helpers/db.js';
import { serveProcess, type Running } from '../helpers/process.js';

const EMAIL = 'chaos@example.com';
const PASSWORD = 'chaos-secret-1';
const BASIC = `Basic ${Buffer.from(`${EMAIL}:${PASSWORD}`).toString('base64')}`;
const TOKEN = 'chaos-admin-token-0123456789abcdef';
/** How long a healthy server may take for its health request and a normal request (generous for a loaded CI). */
const HEALTHY_MS = 5000;
/** How much a deployment's resident memory may grow over all its cases. */
const RSS_BOUND_MIB = 96;
/** How long the server may take to exit after SIGTERM, its connections drained. */
const STOP_MS = 15_000;
/** A case's own bound: a connection the server keeps past it is the server's to time out, not the case's. */
const CASE_MS = 3000;

interface Deployment {
  name: string;
  args: string[];
  tls: boolean;
  /** Several locations: the prefix and host targets run too. */
  locations: boolean;
  workers: boolean;
}

const DEPLOYMENTS: Deployment[] = [
  { name: 'one process', args: [], tls: false, locations: false, workers: false },
  { name: 'one process over TLS', args: ['--tls'], tls: true, locations: false, workers: false },
  { name: '--workers 2', args: ['--workers', '2'], tls: false, locations: false, workers: true },
  { name: '--locations zrh,sjc over TLS', args: ['--locations', 'zrh,sjc', '--tls'], tls: true, locations: true, workers: false },
];

/** A connection as a client holds it: the TCP socket (what a reset acts on) and the stream the request goes over. */
interface Conn {
  tcp: net.Socket;
  io: net.Socket;
  received: () => Buffer;
  /** Resolves when the first byte of an answer arrives (or the connection ends). */
  firstByte: Promise<void>;
  /** Resolves when the connection is gone, whoever closed it. */
  closed: Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const within = <T>(p: Promise<T>, ms: number): Promise<T | 'timeout'> =>
  Promise.race([p, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), ms).unref())]);

async function connect(port: number, secure: boolean, servername = 'localhost'): Promise<Conn> {
  const tcp = net.connect(port, '127.0.0.1');
  tcp.setNoDelay(true);
  tcp.on('error', () => undefined);
  const connected = await within(
    new Promise<void>((resolve, reject) => {
      tcp.once('connect', resolve);
      tcp.once('error', reject);
    }),
    CASE_MS,
  );
  if (connected === 'timeout') throw new Error(`no connection within ${CASE_MS} ms`);
  let io: net.Socket = tcp;
  if (secure) {
    const t = tls.connect({ socket: tcp, rejectUnauthorized: false, servername });
    t.on('error', () => undefined);
    const secured = await within(
      new Promise<void>((resolve, reject) => {
        t.once('secureConnect', resolve);
        t.once('error', reject);
      }),
      CASE_MS,
    );
    if (secured === 'timeout') throw new Error(`no TLS handshake within ${CASE_MS} ms`);
    io = t;
  }
  const chunks: Buffer[] = [];
  let gotFirst!: () => void;
  const firstByte = new Promise<void>((r) => (gotFirst = r));
  io.on('data', (d: Buffer) => {
    chunks.push(d);
    gotFirst();
  });
  const closed = new Promise<void>((r) => tcp.once('close', () => r()));
  void closed.then(gotFirst);
  return { tcp, io, received: () => Buffer.concat(chunks), firstByte, closed };
}

/** A request as bytes: its head (request line and headers, with the blank line) and its body. */
interface Request {
  head: string;
  body: Buffer;
  /** An upgrade: its answer is a 101 or a refusal, and an accepted one keeps the connection. */
  upgrade?: boolean;
}

interface Target {
  name: string;
  make: () => Promise<Request>;
}

/** What a client does to a connection, phase by phase. */
type Phase = {
  name: string;
  /** For requests with a body only. */
  needsBody?: boolean;
  run: (c: Conn, r: Request) => Promise<void>;
};

const bytes = (r: Request) => Buffer.concat([Buffer.from(r.head, 'latin1'), r.body]);
const reset = (c: Conn) => void c.tcp.resetAndDestroy();
const halfClose = (c: Conn) => void c.io.end();
/** Writes, waiting until the bytes are handed to the kernel or CASE_MS pass (a server that stops reading is allowed to). */
const write = async (c: Conn, b: Buffer | string): Promise<void> => void (await within(new Promise<void>((r) => c.io.write(b, () => r())), CASE_MS));

const PHASES: Phase[] = [
  {
    name: 'reset during headers',
    run: async (c, r) => {
      await write(c, r.head.slice(0, Math.floor(r.head.length / 2)));
      await sleep(5);
      reset(c);
    },
  },
  {
    name: 'half-close during headers',
    run: async (c, r) => {
      await write(c, r.head.slice(0, Math.floor(r.head.length / 2)));
      halfClose(c);
      await within(c.closed, CASE_MS);
    },
  },
  {
    name: 'reset after headers',
    run: async (c, r) => {
      await write(c, r.head);
      await sleep(10);
      reset(c);
    },
  },
  {
    name: 'half-close after headers',
    run: async (c, r) => {
      await write(c, r.head);
      halfClose(c);
      await within(c.closed, CASE_MS);
    },
  },
  {
    name: 'reset mid-body',
    needsBody: true,
    run: async (c, r) => {
      await write(c, Buffer.concat([Buffer.from(r.head, 'latin1'), r.body.subarray(0, r.body.length >> 1)]));
      await sleep(10);
      reset(c);
    },
  },
  {
    name: 'half-close mid-body',
    needsBody: true,
    run: async (c, r) => {
      await write(c, Buffer.concat([Buffer.from(r.head, 'latin1'), r.body.subarray(0, r.body.length >> 1)]));
      halfClose(c);
      await within(c.closed, CASE_MS);
    },
  },
  {
    // For an upgrade: after its 101 or its 401.
    name: "reset after the answer's first byte",
    run: async (c, r) => {
      await write(c, bytes(r));
      await within(c.firstByte, CASE_MS);
      reset(c);
    },
  },
  {
    name: 'half-close after the request, reading the answer',
    run: async (c, r) => {
      await write(c, bytes(r));
      halfClose(c);
      // An accepted upgrade stays open after a half-close (the stream has no request to finish): reset it then.
      if ((await within(c.closed, r.upgrade ? 300 : CASE_MS)) === 'timeout') reset(c);
    },
  },
  {
    name: 'trickled headers, byte by byte, then the answer',
    run: async (c, r) => {
      for (const ch of r.head) {
        await write(c, ch);
        await sleep(1);
      }
      await write(c, r.body);
      await within(c.firstByte, CASE_MS);
      const status = /^HTTP\/1\.1 (\d{3})/.exec(c.received().toString('latin1'));
      assert.ok(status && Number(status[1]) < 500, `a trickled request is answered, under 500: ${c.received().toString('latin1', 0, 200)}`);
      reset(c);
    },
  },
  {
    name: 'pipelined twice, reset after the first byte',
    run: async (c, r) => {
      await write(c, Buffer.concat([bytes(r), bytes(r)]));
      await within(c.firstByte, CASE_MS);
      reset(c);
    },
  },
];

/** The resident set of the server's processes (the primary's workers with it), in MiB. */
function rssMiB(pids: number[]): number {
  let kib = 0;
  for (const pid of pids) {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    kib += Number(m?.[1] ?? 0);
  }
  return kib / 1024;
}

/** The processes a primary started (its workers). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // The command can hold spaces and parentheses: the fields after its last ')' are fixed.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out.sort((a, b) => a - b);
}

/** One whole request on a fresh connection, read to its end (`Connection: close`). */
async function exchange(port: number, secure: boolean, req: Request, ms = HEALTHY_MS): Promise<{ status: number; headers: string; body: Buffer }> {
  const c = await connect(port, secure);
  const head = req.head.replace(/\r\n\r\n$/, '\r\nConnection: close\r\n\r\n');
  await write(c, Buffer.concat([Buffer.from(head, 'latin1'), req.body]));
  if ((await within(c.closed, ms)) === 'timeout') {
    reset(c);
    throw new Error(`no whole answer within ${ms} ms to ${req.head.split('\r\n')[0]}`);
  }
  const all = c.received();
  const end = all.indexOf('\r\n\r\n');
  const headers = all.toString('latin1', 0, end);
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(headers)?.[1] ?? 0), headers, body: all.subarray(end + 4) };
}

function request(method: string, host: string, path: string, headers: Record<string, string> = {}, body: Buffer | string = ''): Request {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  const lines = [`${method} ${path} HTTP/1.1`, `Host: ${host}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  if (b.length || method === 'POST' || method === 'PUT') lines.push(`Content-Length: ${b.length}`);
  return { head: `${lines.join('\r\n')}\r\n\r\n`, body: b, upgrade: headers.Upgrade === 'websocket' };
}

function multipart(fields: Record<string, string>, file: Buffer): { body: Buffer; type: string } {
  const boundary = '----stratuschaos0123456789';
  const parts: Buffer[] = Object.entries(fields).map(([k, v]) => Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="file"\r\nContent-Type: application/octet-stream\r\n\r\n`));
  parts.push(file, Buffer.from(`\r\n--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), type: `multipart/form-data; boundary=${boundary}` };
}

const upgradeHeaders = (cookie?: string): Record<string, string> => ({
  Upgrade: 'websocket',
  Connection: 'Upgrade',
  'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==',
  'Sec-WebSocket-Version': '13',
  ...(cookie ? { Cookie: cookie } : {}),
});

for (const d of DEPLOYMENTS) {
  describe(`TCP chaos: ${d.name} (${engine})`, () => {
    let dir: string;
    let db: { url: string; drop: () => Promise<void> };
    let srv: Running;
    let port: number;
    let host: string;
    /** The processes that must survive: the server, or its workers. */
    let survivors: number[];
    let targets: Target[];
    let tally = 0;
    const log: string[] = [];
    let rssLine = 'RSS not measured (the endpoint cases did not finish)';

    const api = (method: string, path: string, body?: unknown, h: string = host) =>
      exchange(
        port,
        d.tls,
        request(
          method,
          h,
          path,
          { Authorization: BASIC, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
          body === undefined ? '' : JSON.stringify(body),
        ),
      );
    const json = async (method: string, path: string, body?: unknown, h?: string) => {
      const res = await api(method, path, body, h);
      assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.body}`);
      return JSON.parse(String(res.body));
    };
    const asyncCookie = async (h: string = host): Promise<string> => {
      const res = await api('POST', '/api/2.0/accounts/action/?do=authenticate_asynchronous', undefined, h);
      const m = /async_auth=[^;\r\n]+/.exec(res.headers);
      assert.ok(m, res.headers);
      return m[0];
    };

    /** The server's processes are those it started with, it answers health and an API request in time. */
    async function assertHealthy(after: string): Promise<void> {
      assert.equal(srv.child.exitCode, null, `the server exited after ${after}: ${srv.stdout()}`);
      if (d.workers) assert.deepEqual(childrenOf(srv.child.pid!), survivors, `a worker died after ${after}: ${srv.stdout()}`);
      const started = Date.now();
      const health = await exchange(port, d.tls, request('GET', host, '/_stratus/health'));
      assert.equal(health.status, 200, `health after ${after}: ${health.status} ${health.body}`);
      const tags = await api('GET', '/api/2.0/tags/?limit=1');
      assert.equal(tags.status, 200, `an API request after ${after}: ${tags.status} ${tags.body}`);
      assert.ok(Date.now() - started < HEALTHY_MS, `health and a request took ${Date.now() - started} ms after ${after}`);
    }

    async function play(target: Target, phase: Phase): Promise<void> {
      const r = await target.make();
      const c = await connect(port, d.tls);
      try {
        await phase.run(c, r);
      } finally {
        c.tcp.destroy();
      }
      tally++;
      await assertHealthy(`${target.name} / ${phase.name}`);
    }

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'stratus-chaos-'));
      db = engine === 'sqlite' ? { url: join(dir, 's.db'), drop: async () => {} } : await freshDatabase();
      srv = await serveProcess(['--db', db.url, '--rate-limits', 'off', '--admin-token', TOKEN, '--demo-login', `${EMAIL}:${PASSWORD}`, ...d.args]);
      const url = new URL(srv.base);
      port = Number(url.port);
      host = `127.0.0.1:${port}`;
      survivors = d.workers ? childrenOf(srv.child.pid!) : [srv.child.pid!];
      if (d.workers) assert.equal(survivors.length, 2, 'two workers');

      // What the targets act on: a drive with bytes (download), an `uploading` drive (resumable.js and links).
      const image = Buffer.alloc(256 * 1024, 7);
      const up = await exchange(
        port,
        d.tls,
        request('POST', host, '/api/2.0/drives/upload/chaos.raw', { Authorization: BASIC, 'Content-Type': 'application/octet-stream' }, image),
      );
      assert.equal(up.status, 201, String(up.body));
      const downloadable = String(up.body).trim();
      const chunk = 64 * 1024;
      const uploading = (await json('POST', '/api/2.0/initupload/', { name: 'chaos-upload', size: 64 * chunk, media: 'disk' })).objects[0].uuid as string;
      const link = (await json('POST', `/api/2.0/drives/${uploading}/action/?do=upload_chunk`, { chunk_number: 1, chunk_size: chunk })).link as string;
      const linkPath = new URL(link, `http://${host}`).pathname + new URL(link, `http://${host}`).search;
      let resumable = 2;
      // A cookie of the clock's past: the admin plane moves the clock past its 120 s.
      const stale = await asyncCookie();
      const moved = await exchange(
        port,
        d.tls,
        request('POST', host, '/_stratus/admin/clock', { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' }, '{"advance": "121s"}'),
      );
      assert.equal(moved.status, 200, String(moved.body));
      // Kept answers are made by the first request: the early-answer target then finds one.
      for (let i = 0; i < 2; i++) assert.equal((await api('GET', '/api/2.0/drives/?limit=5')).status, 200);
      const asset = /src="(\/ui\/[^"]+\.js)"/.exec(String((await exchange(port, d.tls, request('GET', host, '/ui/'))).body))?.[1] ?? '/ui/';

      const get = (name: string, path: string, h = host, extra: Record<string, string> = {}): Target => ({
        name,
        make: async () => request('GET', h, path, { Authorization: BASIC, ...extra }),
      });
      targets = [
        get('API read', '/api/2.0/servers/detail/?limit=5'),
        get('early answer (a kept GET)', '/api/2.0/drives/?limit=5'),
        {
          name: 'API write',
          make: async () => request('POST', host, '/api/2.0/tags/', { Authorization: BASIC, 'Content-Type': 'application/json' }, '{"name": "chaos"}'),
        },
        { name: 'websocket upgrade, accepted', make: async () => request('GET', host, '/websocket', upgradeHeaders(await asyncCookie())) },
        { name: 'websocket upgrade, refused (no cookie)', make: async () => request('GET', host, '/websocket', upgradeHeaders()) },
        { name: 'websocket upgrade, refused (stale cookie)', make: async () => request('GET', host, '/websocket', upgradeHeaders(stale)) },
        {
          name: 'upload (octet-stream body)',
          make: async () =>
            request('POST', host, '/api/2.0/drives/upload/chaos.raw', { Authorization: BASIC, 'Content-Type': 'application/octet-stream' }, image),
        },
        {
          name: 'upload (resumable.js chunk)',
          make: async () => {
            const n = resumable++ > 64 ? 64 : resumable;
            const fields = {
              resumableChunkNumber: String(n),
              resumableChunkSize: String(chunk),
              resumableTotalSize: String(64 * chunk),
              resumableIdentifier: 'chaos.raw',
              resumableFilename: 'chaos.raw',
            };
            const { body, type } = multipart(fields, Buffer.alloc(chunk, n));
            return request('POST', host, `/api/2.0/drives/${uploading}/upload/`, { Authorization: BASIC, 'Content-Type': type }, body);
          },
        },
        {
          name: 'upload (a chunk link)',
          make: async () => request('POST', host, linkPath, { 'Content-Type': 'application/octet-stream' }, Buffer.alloc(chunk, 1)),
        },
        get('download', `/api/2.0/drives/${downloadable}/download/`),
        get('download with a range', `/api/2.0/drives/${downloadable}/download/`, host, { Range: 'bytes=1000-200000' }),
        { name: 'console page', make: async () => request('GET', host, '/ui/') },
        { name: 'console asset', make: async () => request('GET', host, asset) },
        { name: 'admin plane', make: async () => request('GET', host, '/_stratus/admin/users?limit=5', { Authorization: `Bearer ${TOKEN}` }) },
      ];
      if (d.locations) {
        const sjcHost = `sjc.localhost:${port}`;
        const sjcCookie = await asyncCookie(sjcHost);
        targets.push(
          get('location prefix (/sjc/api/2.0/)', '/sjc/api/2.0/drives/?limit=5'),
          get('location host (sjc.localhost)', '/api/2.0/drives/?limit=5', sjcHost),
          get('a host of no location (fra.localhost)', '/api/2.0/drives/?limit=5', `fra.localhost:${port}`),
          {
            name: 'websocket upgrade at another location, accepted',
            make: async () => request('GET', sjcHost, '/websocket', upgradeHeaders(await asyncCookie(sjcHost))),
          },
          // zrh's cookie at sjc: another location's credential.
          { name: "websocket upgrade with another location's cookie", make: async () => request('GET', host, '/websocket', upgradeHeaders(sjcCookie)) },
          { name: 'websocket upgrade at a host of no location', make: async () => request('GET', `fra.localhost:${port}`, '/websocket', upgradeHeaders()) },
        );
      }
      await assertHealthy('start-up');
    });

    after(async () => {
      // A server that ignores SIGTERM is a finding, not a hang of this file.
      let stopped: number | null | 'timeout' = null;
      if (srv && srv.child.exitCode === null) {
        srv.child.kill('SIGTERM');
        stopped = await within(srv.exited, STOP_MS);
        if (stopped === 'timeout') srv.child.kill('SIGKILL');
      }
      await db?.drop();
      if (dir) rmSync(dir, { recursive: true, force: true });
      // One line for the run's summary (test/run.ts shows `report:` lines), the details after it.
      console.log(
        `report: TCP chaos, ${d.name} (${engine}): ${tally} cases, the server alive and answering after each (${targets?.length ?? 0} endpoints); ${rssLine}`,
      );
      console.log(log.map((l) => `#   ${l}`).join('\n'));
      assert.notEqual(stopped, 'timeout', `the server did not exit within ${STOP_MS} ms of SIGTERM: ${srv.stdout()}`);
    });

    test('every endpoint survives a reset or a half-close at every phase, trickled headers and a reset pipeline', { timeout: 600_000 }, async () => {
      const pids = () => (d.workers ? survivors : [srv.child.pid!]);
      const startRss = rssMiB(pids());
      const before = tally;
      for (const target of targets) {
        let n = 0;
        for (const phase of PHASES) {
          const r = await target.make();
          if (phase.needsBody && r.body.length === 0) continue;
          await play(target, phase);
          n++;
        }
        log.push(`${target.name}: ${n} phases`);
      }
      // Memory comes back: whatever the cases held (bodies, sockets, lingering closes) is let go.
      let endRss = rssMiB(pids());
      for (let i = 0; i < 20 && endRss > startRss + RSS_BOUND_MIB; i++) {
        await sleep(250);
        endRss = rssMiB(pids());
      }
      rssLine = `RSS ${startRss.toFixed(0)} → ${endRss.toFixed(0)} MiB`;
      log.push(`${tally - before} cases over ${targets.length} targets × ${PHASES.length} phases; ${rssLine}`);
      assert.ok(endRss <= startRss + RSS_BOUND_MIB, `RSS grew from ${startRss.toFixed(0)} to ${endRss.toFixed(0)} MiB`);
    });

    test('oversized headers are refused with 431, and the server goes on', async () => {
      const big = request('GET', host, '/api/2.0/tags/', { Authorization: BASIC, 'X-Filler': 'x'.repeat(100_000) });
      const c = await connect(port, d.tls);
      await write(c, bytes(big)).catch(() => undefined);
      await within(c.closed, CASE_MS);
      assert.match(c.received().toString('latin1', 0, 40), /^HTTP\/1\.1 431 /);
      c.tcp.destroy();
      tally++;
      await assertHealthy('oversized headers');
      // And reset in the middle of sending them.
      const c2 = await connect(port, d.tls);
      await write(c2, bytes(big).subarray(0, 60_000));
      reset(c2);
      tally++;
      await assertHealthy('oversized headers, reset');
      log.push('oversized headers: answered 431, and reset while sent');
    });

    test('a refused websocket upgrade followed by a reset, with no cookie and with a stale cookie, leaves the server serving', async () => {
      for (const cookie of [undefined, 'async_auth=c3RhbGU=|1|0000000000000000000000000000000000000000']) {
        for (let i = 0; i < 5; i++) {
          const c = await connect(port, d.tls);
          await write(c, bytes(request('GET', host, '/websocket', upgradeHeaders(cookie))));
          await within(c.firstByte, CASE_MS);
          assert.match(c.received().toString('latin1', 0, 20), /^HTTP\/1\.1 401 /);
          reset(c);
          tally++;
        }
        await assertHealthy(`a refused upgrade (${cookie ? 'stale cookie' : 'no cookie'}), reset`);
      }
      log.push('refused upgrades reset after their 401: 10');
    });

    if (d.tls)
      test('a reset during the TLS handshake, and after it before any request', async () => {
        for (let i = 0; i < 5; i++) {
          const raw = net.connect(port, '127.0.0.1');
          raw.on('error', () => undefined);
          await new Promise<void>((r) => raw.once('connect', () => r()));
          // The first bytes of a ClientHello, then a reset.
          raw.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]));
          await sleep(5);
          raw.resetAndDestroy();
          const c = await connect(port, true);
          reset(c);
          tally += 2;
        }
        await assertHealthy('resets around the TLS handshake');
        log.push('TLS: 5 resets mid-handshake, 5 right after it');
      });
  });
}
