import http from 'node:http';
import https from 'node:https';
import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import { ApiError } from '../core/errors.js';
import { clientErrorHandler, rawErrorAnswer } from './edges.js';
import { onUpgrade, refuseSocket } from './raw-socket.js';

/**
 * Several locations in one process (`--locations zrh,sjc`): each location is a whole app of its own (its
 * services: store, scheduler, simulator, notifications, caches), built by `buildApp` without a listening
 * server, and one front server picks the app for each request by its host, before anything else runs:
 *
 * - `{loc}.cloudsigma.com` and `direct.{loc}.cloudsigma.com`: the real names (a hosts-file entry, `curl
 *   --resolve`, or a client's DNS override point them here);
 * - `{loc}.localhost` and `direct.{loc}.localhost`: the local names (browsers and curl resolve any
 *   `*.localhost` to loopback; most other resolvers do not);
 * - any other host (`127.0.0.1:8080`, `localhost`): the default location, or the one a path prefix names
 *   (`http://127.0.0.1:8080/sjc/api/2.0/`), for a client that can only be given a base URL.
 *
 * A name of `cloudsigma.com` or `localhost` that names no served location gets a 404 in the API's error
 * format from the default location's app (its conventions: format, request id), never another location's
 * data; a websocket upgrade the same, on the socket. One app per location keeps the locations apart by
 * construction: no code below the front needs to know that there are several.
 */
export type Choice = { code: string; url?: string } | ApiError;

/** The location a request is for (`url`: the request's URL without its location prefix, when it had one). */
export function chooseLocation(hostHeader: string | undefined, url: string, served: readonly string[], fallback: string): Choice {
  const host = (hostHeader ?? '').trim().toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');
  const named = /^(?:direct\.)?([a-z0-9-]+)\.(cloudsigma\.com|localhost)$/.exec(host);
  if (named) {
    if (served.includes(named[1])) return { code: named[1] };
    return new ApiError(
      'notexist',
      `No location ${named[1]} here: this service serves ${served.join(', ')} (${served.map((l) => `${l}.${named[2]}`).join(', ')})`,
    );
  }
  const prefix = /^\/([a-z0-9]{2,16})(\/.*|\?.*)?$/.exec(url);
  if (prefix && served.includes(prefix[1])) return { code: prefix[1], url: prefix[2]?.startsWith('/') ? prefix[2] : `/${prefix[2] ?? ''}` };
  return { code: fallback };
}

/** A request refused before it reached any location: its default app answers with the error (onRequest). */
const refusals = new WeakMap<http.IncomingMessage, ApiError>();
export const locationRefusal = (req: http.IncomingMessage): ApiError | undefined => refusals.get(req);

/** The request target as the client sent it, where the front server took a location prefix off it. */
const sentTargets = new WeakMap<http.IncomingMessage, string>();
/** What the client signed (Digest's `uri` names the target it sent, prefix and all: RFC 7616 §3.4). */
export const sentTarget = (req: http.IncomingMessage): string | undefined => sentTargets.get(req);

/** The node:http options every API server shares (slow-client protection; app.ts explains each). */
export function serverOptions(config: Pick<Config, 'requestTimeoutMs' | 'keepAliveTimeoutMs'>): http.ServerOptions {
  return {
    requestTimeout: config.requestTimeoutMs,
    headersTimeout: config.requestTimeoutMs,
    keepAliveTimeout: config.keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.max(100, Math.min(1000, config.requestTimeoutMs / 2)),
    requireHostHeader: false,
  };
}

/**
 * The front server: it listens, and hands each request (and websocket upgrade) to its location's app server,
 * which never listens itself. `apps` by location code; `fallback` is the location of hosts that name none.
 */
export function frontServer(
  config: Pick<Config, 'requestTimeoutMs' | 'keepAliveTimeoutMs'>,
  apps: ReadonlyMap<string, FastifyInstance>,
  fallback: string,
  tls: { key: string; cert: string } | null,
): http.Server {
  const served = [...apps.keys()];
  const options = serverOptions(config);
  const server = tls ? (https.createServer({ ...options, key: tls.key, cert: tls.cert }) as unknown as http.Server) : http.createServer(options);
  const pick = (req: http.IncomingMessage): { app: FastifyInstance; refused?: ApiError } => {
    const choice = chooseLocation(req.headers.host, req.url ?? '/', served, fallback);
    if (choice instanceof ApiError) return { app: apps.get(fallback)!, refused: choice };
    if (choice.url !== undefined) {
      sentTargets.set(req, req.url ?? '/');
      req.url = choice.url;
    }
    return { app: apps.get(choice.code)! };
  };
  server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const { app, refused } = pick(req);
    if (refused) refusals.set(req, refused);
    app.server.emit('request', req, res);
  });
  onUpgrade(server, (req, socket, head) => {
    const { app, refused } = pick(req);
    if (refused) return refuseSocket(socket, rawErrorAnswer(null, refused));
    app.server.emit('upgrade', req, socket, head);
  });
  server.on('clientError', clientErrorHandler);
  return server;
}
