import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Caller, Services } from '../core/context.js';
import { readCookie } from '../http/auth/cookies.js';
import { ASYNC_AUTH_COOKIE, type AsyncAuthCookie } from '../http/auth/async-auth.js';
import type { Change } from '../store/changes.js';

export const WEBSOCKET_PATH = '/websocket';

/** Bytes a slow client may have queued before it is dropped (it reconnects and re-reads what it needs). */
const MAX_BUFFERED = 1024 * 1024;

/** User-level facts rather than stored objects (billing notes a balance change with every ledger entry): kind -> URI. */
const FACTS: Record<string, string> = { balance: '/api/2.0/balance/' };

/** The frame a client gets for one change (pycloudsigma's `Websocket` matches on these keys). */
export function frameOf(c: Change): Record<string, unknown> {
  const uri = FACTS[c.kind] ?? `/api/2.0/${c.kind}/${c.uuid}/`;
  return { resource_type: c.kind, resource_uri: uri, uuid: c.uuid ?? undefined };
}

/**
 * The real-time event stream of the real service (reference §4.3, §19): after
 * `POST /accounts/action/?do=authenticate_asynchronous` a client holding the `async_auth` cookie opens
 * a websocket at `/websocket` and gets one JSON frame `{resource_type, resource_uri, uuid}` for every
 * committed change of its own objects (drives, servers, snapshots, ... and `balance`). The cookie opens a
 * socket within 120 s of its issue (http/auth/async-auth.ts); the socket then lives as long as it is kept
 * open, and a later reconnect needs a fresh cookie. Changes come
 * from the store's change feed (store/changes.ts): on PostgreSQL through LISTEN/NOTIFY, so a change
 * made through another API process reaches this one's clients too. A client that does not read is
 * closed once its buffer passes MAX_BUFFERED; shutdown closes every socket with 1001 (going away).
 */
export class EventStream {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 4096 });
  private readonly byOwner = new Map<string, Set<WebSocket>>();
  private unlisten: (() => Promise<void>) | null = null;
  private unsubscribe: (() => void) | null = null;

  constructor(
    private readonly s: Services,
    private readonly cookies: AsyncAuthCookie,
    private readonly log?: FastifyBaseLogger,
  ) {
    s.store.changes.enabled = true;
  }

  /** Wires the upgrade path into the app's HTTP server and the store's feed; undone when the app closes. */
  async attach(app: FastifyInstance): Promise<void> {
    const deliver = (changes: readonly Change[]) => this.deliver(changes);
    if (this.s.store.dialect === 'postgres')
      this.unlisten = await this.s.store.listenChanges(deliver, (err) => this.log?.error({ err }, 'change feed listener failed'));
    else this.unsubscribe = this.s.store.changes.subscribe(deliver);
    app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.upgrade(req, socket, head));
    app.addHook('preClose', async () => this.close());
  }

  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const path = (req.url ?? '').split('?')[0].replace(/\/+$/, '');
    if (path !== WEBSOCKET_PATH) {
      socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    let caller: Caller | null = null;
    try {
      const cookie = readCookie(req.headers.cookie, ASYNC_AUTH_COOKIE);
      caller = cookie ? await this.cookies.caller(cookie) : null;
    } catch (err) {
      this.log?.error({ err }, 'websocket authentication failed');
    }
    if (!caller) {
      socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n[]');
      return;
    }
    const owner = caller.uuid;
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      let set = this.byOwner.get(owner);
      if (!set) this.byOwner.set(owner, (set = new Set()));
      set.add(ws);
      ws.on('close', () => {
        set.delete(ws);
        if (!set.size) this.byOwner.delete(owner);
      });
      ws.on('error', () => ws.terminate());
      // Clients only listen: anything they send is ignored.
      ws.on('message', () => undefined);
    });
  }

  private deliver(changes: readonly Change[]): void {
    for (const c of changes) {
      const sockets = this.byOwner.get(c.owner);
      if (!sockets) continue;
      const frame = JSON.stringify(frameOf(c));
      for (const ws of sockets) {
        if (ws.bufferedAmount > MAX_BUFFERED) {
          ws.close(1013, 'too slow: reconnect');
          continue;
        }
        ws.send(frame);
      }
    }
  }

  /** Number of open sockets (tests, metrics). */
  get connections(): number {
    let n = 0;
    for (const set of this.byOwner.values()) n += set.size;
    return n;
  }

  async close(): Promise<void> {
    this.unsubscribe?.();
    await this.unlisten?.();
    for (const set of this.byOwner.values()) for (const ws of set) ws.close(1001, 'server shutting down');
    this.byOwner.clear();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}
