/**
 * The one rule for sockets Stratus holds outside Fastify's request handling: each gets an error handler and
 * a bounded life here, before anything else touches it.
 *
 * node:http guards a connection while it parses and answers requests (its own `'error'` listener turns a
 * reset into `clientError`). Past that point the socket is ours: after an `'upgrade'` node:http removes its
 * listeners and hands the bare socket over, and a bare socket that meets a reset (a client giving up on a
 * refused websocket handshake) emits `'error'` with nobody listening, which stops the whole process.
 *
 * - `onUpgrade`: the only way to listen for upgrades (a lint rule refuses `'upgrade'` listeners elsewhere);
 *   the socket is held (below) before the handler sees it.
 * - `holdSocket`: an error listener that destroys the socket, and a deadline after which it is destroyed,
 *   until `releaseSocket` says someone else (the websocket library) owns its life now.
 * - `refuseSocket`: a raw answer, then a lingering close (the client may still be sending).
 * - `linger`: read and drop what the client still sends, and destroy the socket when it is done or after
 *   LINGER_MS: a socket destroyed with unread input sends a reset, which can discard the answer before the
 *   client reads it.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/** How long a refused connection keeps reading (and dropping) what the client still sends. */
export const LINGER_MS = 2000;

/** How long an upgrade may take from its request to the handshake's answer (the credential check included). */
export const UPGRADE_MS = 10_000;

const HELD = Symbol('held');
const LINGERING = Symbol('lingering');
type Marked = Duplex & { [HELD]?: NodeJS.Timeout | true; [LINGERING]?: true };

const destroyQuietly = function (this: Duplex): void {
  this.destroy();
};

/** Give the socket an error handler (a reset destroys it) and a life of at most `lifetimeMs`. Idempotent. */
export function holdSocket(socket: Duplex, lifetimeMs: number): void {
  const s = socket as Marked;
  if (s[HELD]) return;
  socket.on('error', destroyQuietly);
  const deadline = setTimeout(() => socket.destroy(), lifetimeMs);
  deadline.unref();
  s[HELD] = deadline;
  socket.once('close', () => clearTimeout(deadline));
}

/** The socket's life is someone else's now (its error listener stays: a late reset must not throw). */
export function releaseSocket(socket: Duplex): void {
  const s = socket as Marked;
  if (s[HELD] && s[HELD] !== true) clearTimeout(s[HELD]);
  s[HELD] = true;
}

/** Whether the socket went through `holdSocket` (tests of the rule). */
export const isHeld = (socket: Duplex): boolean => (socket as Marked)[HELD] !== undefined;

/** Stop parsing what the client sends on this connection; read and drop it. */
export function discardInput(socket: Duplex): void {
  const s = socket as Marked;
  if (s[LINGERING]) return;
  s[LINGERING] = true;
  socket.removeAllListeners('data');
  socket.on('data', () => {});
  socket.on('error', destroyQuietly);
  socket.resume();
}

/** Destroy the socket when the client is done sending, or after LINGER_MS. */
export function closeAfterLinger(socket: Duplex): void {
  socket.once('end', () => socket.destroy());
  setTimeout(() => socket.destroy(), LINGER_MS).unref();
}

/** Read and drop whatever the client still sends; destroy the socket when it is done or after LINGER_MS. */
export function linger(socket: Duplex): void {
  discardInput(socket);
  closeAfterLinger(socket);
}

/** Answer a held socket with a whole raw HTTP answer (one that says `Connection: close`) and close it, lingering. */
export function refuseSocket(socket: Duplex, answer: string): void {
  holdSocket(socket, LINGER_MS);
  linger(socket);
  if (socket.writable) socket.end(answer);
  else socket.destroy();
}

/**
 * Listen for upgrades on `server`: each socket is held (error handler, UPGRADE_MS to complete) before
 * `handler` runs, and whatever the handler throws or rejects with closes that socket, never the process.
 */
export function onUpgrade(server: Server, handler: (req: IncomingMessage, socket: Duplex, head: Buffer) => void | Promise<void>): void {
  // eslint-disable-next-line no-restricted-syntax -- the one place that listens for upgrades (the rule above)
  server.on('upgrade', (req: IncomingMessage, socket: Socket, head: Buffer) => {
    holdSocket(socket, UPGRADE_MS);
    try {
      const done = handler(req, socket, head);
      if (done) done.catch(() => socket.destroy());
    } catch {
      socket.destroy();
    }
  });
}
