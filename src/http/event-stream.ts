import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Services } from '../core/context.js';
import { ApiError } from '../core/errors.js';
import { LiveAudience, type LiveCredential, type LiveOutlet } from '../notify/live.js';
import type { Change } from '../store/changes.js';
import { readCookie } from './auth/cookies.js';
import { allowedOrigin } from './auth/origin.js';
import { ASYNC_AUTH_COOKIE, type AsyncAuthCookie, type StreamCredential } from './auth/async-auth.js';
import { hostMissing, rawErrorAnswer } from './edges.js';
import { onUpgrade, refuseSocket, releaseSocket } from './raw-socket.js';

export const WEBSOCKET_PATH = '/websocket';

/** Bytes a slow client may have queued before it is dropped (it reconnects and re-reads what it needs). */
const MAX_BUFFERED = 1024 * 1024;

/** The close code of a socket whose credential ended (RFC 6455 "policy violation": reconnecting needs a new one). */
export const CLOSE_SESSION_ENDED = 1008;

const ENDED = 'session ended: authenticate again';

/** Idle time before TCP keep-alive probes ask whether an open socket's peer is still there. */
const KEEPALIVE_MS = 30_000;

/**
 * The real-time event stream of the real service (reference §4.3, §19): after
 * `POST /accounts/action/?do=authenticate_asynchronous` a client holding the `async_auth` cookie opens
 * a websocket at `/websocket` and gets one JSON frame `{resource_type, resource_uri, uuid}` for every
 * committed change of its own objects (drives, servers, snapshots, ... and `balance`). The cookie opens a
 * socket within 120 s of its issue (http/auth/async-auth.ts); the socket then lives as long as it is kept
 * open, and a later reconnect needs a fresh cookie. Changes come
 * from the store's change feed (store/changes.ts): on PostgreSQL through LISTEN/NOTIFY, so a change
 * made through another API process reaches this one's clients too; on SQLite an operator command's changes
 * come through the table it relays them in. A client that does not read is
 * closed once its buffer passes MAX_BUFFERED; shutdown closes every socket with 1001 (going away).
 *
 * A socket lives only as long as the credentials it was opened with. A logout that carries its cookie,
 * a new password or a reset comes down the same feed as SESSION_ENDED, from whichever process did it,
 * and closes its sockets (the logout's cookie's; every socket of the account for the others) with
 * CLOSE_SESSION_ENDED. A new password also voids the cookies issued before it (async-auth.ts).
 *
 * The credential is a cookie, which a browser also attaches to a websocket a page of another site opens
 * (same-site pages even under SameSite=Lax): an upgrade with an `Origin` of another host is refused
 * (http/auth/origin.ts). Clients outside browsers send no `Origin`.
 */
export class EventStream {
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: 4096 });
  /** Which socket sees which change, and which a credential's end closes (notify/live.ts). */
  private readonly audience: LiveAudience<WebSocket>;
  private readonly outlet: LiveOutlet<WebSocket> = {
    send(ws, frame) {
      if (ws.bufferedAmount > MAX_BUFFERED) return false;
      ws.send(frame);
      return true;
    },
    close(ws, why) {
      if (why === 'ended') ws.close(CLOSE_SESSION_ENDED, ENDED);
      else ws.close(1013, 'too slow: reconnect');
    },
  };
  private unlisten: (() => Promise<void>) | null = null;
  private unsubscribe: (() => void) | null = null;

  constructor(
    private readonly s: Services,
    private readonly cookies: AsyncAuthCookie,
    private readonly log?: FastifyBaseLogger,
  ) {
    s.store.changes.enabled = true;
    this.audience = new LiveAudience(s.clock);
  }

  /** Wires the upgrade path into the app's HTTP server and the store's feed; undone when the app closes. */
  async attach(app: FastifyInstance): Promise<void> {
    const deliver = (changes: readonly Change[]) => this.audience.route(changes, this.outlet);
    // Other processes' changes (PostgreSQL: every process's, this one's included; SQLite: operator commands').
    this.unlisten = await this.s.store.listenChanges(deliver, (err) => this.log?.error({ err }, 'change feed listener failed'));
    if (this.s.store.dialect === 'sqlite') this.unsubscribe = this.s.store.changes.subscribe(deliver);
    // The socket is held (an error handler, a deadline) before the credential is checked (http/raw-socket.ts).
    onUpgrade(app.server, (req, socket, head) => this.upgrade(req, socket, head));
    app.addHook('preClose', async () => this.close());
  }

  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const refuse = (e: ApiError): void => refuseSocket(socket, rawErrorAnswer(null, e));
    const path = (req.url ?? '').split('?')[0].replace(/\/+$/, '');
    if (path !== WEBSOCKET_PATH) return refuse(new ApiError('notexist', `No resource at ${path}`));
    const noHost = hostMissing(req);
    if (noHost) return refuse(noHost);
    if (!allowedOrigin(req.headers.origin, req.headers.host, this.s.config.publicUrl))
      return refuse(new ApiError('permission', 'The event stream answers pages of this service only (the Origin is another host)'));
    let opened: StreamCredential | null = null;
    try {
      const cookie = readCookie(req.headers.cookie, ASYNC_AUTH_COOKIE);
      opened = cookie ? await this.cookies.open(cookie) : null;
    } catch (err) {
      this.log?.error({ err }, 'websocket authentication failed');
    }
    if (!opened) return refuse(new ApiError('auth', 'The event stream needs a fresh async_auth cookie (do=authenticate_asynchronous, good for 120 s)'));
    const owner = opened.caller.uuid;
    const credential: LiveCredential = { credential: opened.credential, issuedMs: opened.issuedMs };
    // Closed while its credential was checked: nothing to upgrade.
    if (socket.destroyed) return;
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      releaseSocket(socket);
      // A peer that vanished without a reset is found by TCP keep-alive probes, not kept forever.
      (socket as Partial<Socket>).setKeepAlive?.(true, KEEPALIVE_MS);
      if (!this.audience.join(owner, credential, ws)) return ws.close(CLOSE_SESSION_ENDED, ENDED);
      ws.on('close', () => this.audience.leave(owner, ws));
      ws.on('error', () => ws.terminate());
      // Clients only listen: anything they send is ignored.
      ws.on('message', () => undefined);
    });
  }

  /** Number of open sockets (tests, metrics). */
  get connections(): number {
    return this.audience.size;
  }

  async close(): Promise<void> {
    this.unsubscribe?.();
    await this.unlisten?.();
    for (const ws of this.audience.drain()) ws.close(1001, 'server shutting down');
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }
}
