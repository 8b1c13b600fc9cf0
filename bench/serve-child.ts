/**
 * A process the bench loads: `stratus` mode runs Stratus as `stratus serve` does (buildApp, the scheduler,
 * rate limits on) over an existing database; `raw` mode is a bare node:http server replaying recorded
 * replies. Every measured server is its own process so the load generator (autocannon in the parent) does
 * not share its event loop, CPU time or memory: the RSS the parent reads from /proc is Stratus's alone.
 *
 * Started with `fork()`. Messages in: `{ type: 'replies' }` (raw mode, first), `{ type: 'stats' }`,
 * `{ type: 'close' }`. Out: `{ type: 'ready', base }` once listening, `{ type: 'stats', ... }` (Stats).
 *
 * Why the counters: when a run ends autocannon drops its connections, but requests it sent are still
 * queued in the server's sockets (a slow synchronous SQLite query leaves them unread for seconds), and
 * the server answers them all. The bench waits until no request is in flight and no socket is open before
 * the next run, and counts what the server answered, not only what autocannon saw.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildApp } from '../src/app.js';
import { openServices } from '../src/cli/index.js';
import { loadConfig } from '../src/config.js';
import { timerHandlers } from '../src/registry.js';
import { Scheduler } from '../src/core/scheduler.js';

export interface RawReply {
  path: string;
  status: number;
  contentType: string;
  /** base64, so the bytes survive the JSON of the IPC channel. */
  body: string;
}

/**
 * `answered`: requests done so far; `connections`: open sockets; `statements`: SQL run (null: raw);
 * `roundTrips`: statements waited for (PostgreSQL sends some ahead, store/pg-client.ts; SQLite: = statements);
 * `commits`: SQLite's group commits so far (store/group-commit.ts; null: PostgreSQL or raw), `grouped` the writes they carried.
 */
export interface Stats {
  statements: number | null;
  roundTrips: number | null;
  commits: number | null;
  grouped: number | null;
  inflight: number;
  connections: number;
  answered: number;
}

export type ChildMessage = { type: 'ready'; base: string } | ({ type: 'stats' } & Stats);
export type ParentMessage = { type: 'stats' } | { type: 'close' } | { type: 'replies'; replies: RawReply[] };

const send = (m: ChildMessage) => process.send!(m);

/**
 * Count requests begun and done. Done is the response's `close`: after it is sent, or when its client has
 * left (Fastify then never sends, and a handler may still be finishing: drain() also waits for the
 * statement count to settle).
 */
function counted(
  server: http.Server,
  statements: () => number | null,
  roundTrips: () => number | null,
  close: () => Promise<void>,
  group: () => { commits: number; writes: number } | null = () => null,
): void {
  let inflight = 0;
  let answered = 0;
  server.on('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
    inflight++;
    res.once('close', () => {
      inflight--;
      answered++;
    });
  });
  process.on('message', (m: ParentMessage) => {
    if (m.type === 'stats')
      server.getConnections((_err, connections) =>
        send({
          type: 'stats',
          statements: statements(),
          roundTrips: roundTrips(),
          commits: group()?.commits ?? null,
          grouped: group()?.writes ?? null,
          inflight,
          connections: connections ?? 0,
          answered,
        }),
      );
    if (m.type === 'close') void close().then(() => process.exit(0));
  });
}

async function stratus(db: string, answerCacheMiB: string | undefined): Promise<void> {
  // As production would run it; only the simulated drive creation is instant, so the template drive the
  // bench makes through the API is usable without waiting (no request path depends on it).
  const config = loadConfig(
    {
      db,
      host: '127.0.0.1',
      port: '0',
      'log-level': 'warn',
      delays: 'drive.create=0',
      // The drive data section uploads a 1 GiB image as one request.
      'request-timeout': '600000',
      ...(answerCacheMiB === undefined ? {} : { 'answer-cache-mib': answerCacheMiB }),
    },
    {},
  );
  const services = await openServices(config, 'migrate');
  const app = await buildApp(services);
  const scheduler = new Scheduler(services, timerHandlers(), app.log);
  const base = await app.listen({ host: config.host, port: config.port });
  scheduler.start();
  counted(
    app.server,
    () => services.store.statements,
    () => services.store.roundTrips,
    async () => {
      await app.close();
      await scheduler.stop();
      await services.store.close();
    },
    () => services.store.group,
  );
  send({ type: 'ready', base });
}

/** Answers each recorded path (with its query) with the recorded status, content type and bytes; 404 otherwise. */
function raw(replies: RawReply[]): void {
  const byPath = new Map(replies.map((r) => [r.path, { ...r, bytes: Buffer.from(r.body, 'base64') }]));
  const server = http.createServer((req, res) => {
    const r = byPath.get(req.url ?? '');
    if (!r) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(r.status, { 'content-type': r.contentType, 'content-length': r.bytes.length });
    res.end(r.bytes);
  });
  // Same keep-alive as Stratus's default: autocannon's connections stay open for the whole run.
  server.keepAliveTimeout = 72_000;
  counted(
    server,
    () => null,
    () => null,
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  server.listen(0, '127.0.0.1', () => send({ type: 'ready', base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
}

// The bench process is gone (killed, crashed): do not outlive it.
process.on('disconnect', () => process.exit(0));

const [mode, arg, answerCacheMiB] = process.argv.slice(2);
if (mode === 'stratus') await stratus(arg, answerCacheMiB);
// The replies come over IPC (they can be larger than a command-line argument may be).
else if (mode === 'raw') process.once('message', (m: ParentMessage) => m.type === 'replies' && raw(m.replies));
else throw new Error(`serve-child: unknown mode ${mode}`);
