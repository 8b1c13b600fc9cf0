/**
 * How one of several workers stops serving (src/serve.ts, told by src/serve-workers.ts): it stops accepting
 * at once (the other workers take new connections), finishes what it has, and ends within a bound.
 *
 * A rolling restart (`keepIdle`) must drop no request. Node's `server.close()` and Fastify's close (its default
 * `forceCloseConnections: 'idle'`) end every idle keep-alive connection at once, and a client may be sending
 * its next request on one at that very moment: it gets a reset. So here idle connections stay open; a request
 * arriving on one is answered with `Connection: close` (app.ts), and one that stays idle ends when the server's
 * keep-alive timeout runs out, the timeout each answer announced (`Keep-Alive: timeout=N`): a client that
 * honours it (node's Agent, browsers, most libraries) has stopped reusing the connection by then.
 * A full stop (`keepIdle` false) ends idle connections at once, as a single process does: nobody else will
 * answer them anyway.
 *
 * Either way the drain is bounded (`limitMs`): what is still open then is closed.
 */
import type { FastifyInstance } from 'fastify';

export interface Drain {
  /** Resolves once the server no longer accepts connections. */
  stopped: Promise<void>;
  /** Resolves once every connection has ended and the app is closed. */
  closed: Promise<void>;
  /** A restart's drain turned into a stop's (the whole service stops): idle connections end now. */
  hurry: () => void;
}

export function drain(app: FastifyInstance, opts: { keepIdle: boolean; limitMs: number }): Drain {
  const server = app.server;
  const closeIdle = server.closeIdleConnections.bind(server);
  if (opts.keepIdle) server.closeIdleConnections = () => {};
  // Fastify closes the listener once its preClose hooks are done (event streams closed first): the moment it does is
  // the moment this worker stops taking connections.
  const stopped = new Promise<void>((resolve) => {
    const close = server.close.bind(server);
    server.close = ((cb?: (err?: Error) => void) => {
      close(cb);
      resolve();
      return server;
    }) as typeof server.close;
  });
  const limit = setTimeout(() => server.closeAllConnections(), opts.limitMs);
  const closed = app.close().finally(() => clearTimeout(limit));
  return {
    stopped,
    closed,
    hurry: () => {
      server.closeIdleConnections = closeIdle;
      if (!server.listening) closeIdle();
    },
  };
}
