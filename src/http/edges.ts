/**
 * The edges of the HTTP layer: what happens before a request reaches a route, or around the body a route
 * never reads. Each failure still answers in the API's error format (`[{error_type, error_point,
 * error_message}]` with an `X-REQUEST-ID`), and a connection is never left holding unread bytes that
 * would stall the next request on it.
 *
 * - `clientErrorHandler`: node:http could not parse a request at all (garbage, a header block over
 *   Node's limit, a client too slow to finish): a raw answer in JSON (headers only for HEAD), then
 *   the connection is closed, lingering (below): the peer may still be sending.
 * - `hostMissing`: an HTTP/1.1 request without `Host`, which node:http would refuse with an empty 400.
 * - `frameworkErrors`: the router refused the URL (a malformed %-escape, a path segment over
 *   `maxParamLength`) before any hook ran: answered here in the negotiated format.
 * - `guardUnusedBodies`: a body the service does not read (GET, HEAD, DELETE without a content type)
 *   is left to node:http, which discards it after the answer; but @fastify/compress would pipe a
 *   `Content-Encoding: gzip` body into an inflater that nobody reads, which stalls the request
 *   stream and with it every later request on the connection. Such requests lose their
 *   `Content-Encoding` so the body stays untouched, and any answer sent while request bytes are
 *   still unread and will not be discarded cheaply (already half read, of unknown length, or over
 *   the body limit) says `Connection: close`.
 * - Lingering close: whenever a connection is closed under a client still sending (a raw error above,
 *   an answer with `Connection: close` before the request was complete), the socket is ended after
 *   the answer but keeps reading and dropping input until the client is done (http/raw-socket.ts).
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../core/errors.js';
import { sortedJson } from './json.js';
import { negotiate, type Format } from './negotiate.js';
import { closeAfterLinger, discardInput, linger } from './raw-socket.js';
import { send } from './respond.js';

/**
 * An answer with `Connection: close` sent while the request is still arriving: node:http ends and destroys
 * the socket once the answer is written (`destroySoon`); instead, end it and linger.
 */
function lingerAfterAnswer(socket: Socket | null): void {
  if (!socket) return;
  (socket as Socket & { destroySoon(): void }).destroySoon = function (this: Socket) {
    linger(this);
    this.end();
  };
}

/**
 * The method of the request node:http failed to parse, when the failing packet shows it: the last request
 * line before the error (the packet may start with the tail of an earlier request's body).
 */
function failedMethod(err: NodeJS.ErrnoException & { rawPacket?: Buffer; bytesParsed?: number }): string | undefined {
  const pkt = err.rawPacket;
  if (!pkt) return undefined;
  const end = Math.min(pkt.length, (err.bytesParsed ?? pkt.length) + 1);
  const text = pkt.toString('latin1', 0, end);
  let method: string | undefined;
  for (const m of text.matchAll(/(?:^|[^A-Z])(GET|HEAD|POST|PUT|DELETE|PATCH|OPTIONS|TRACE|CONNECT) /g)) method = m[1];
  return method;
}

/**
 * A whole HTTP/1.1 answer with `e` as the error array (JSON) that closes the connection, for a socket no
 * route will answer (a request node:http could not parse, a refused websocket upgrade). `status` defaults
 * to the error's own.
 */
export function rawErrorAnswer(status: number | null, e: ApiError, head = false): string {
  const code = status ?? e.status;
  const body = sortedJson([e.toWire()]);
  return (
    `HTTP/1.1 ${code} ${STATUS_CODES[code] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nX-REQUEST-ID: ${randomUUID()}\r\nConnection: close\r\n\r\n${head ? '' : body}`
  );
}

/** node:http `clientError`: answer with the error array (JSON: the request was never parsed), then close. */
export function clientErrorHandler(err: NodeJS.ErrnoException, socket: Socket): void {
  if (!socket.writable || err.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const [status, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'Request timed out before it was complete']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'Request line and headers are too large']
        : [400, 'Malformed HTTP request'];
  // A HEAD request gets the headers of the answer and no body (the client would take the body for garbage).
  const answer = rawErrorAnswer(status, new ApiError('validation', message), failedMethod(err) === 'HEAD');
  // Nothing after the bad request is parsed any more.
  discardInput(socket);
  const respond = (): void => {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    closeAfterLinger(socket);
    socket.end(answer);
  };
  const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (!inFlight || inFlight.writableFinished) {
    respond();
    return;
  }
  // The failure is in the request being answered (its body timed out or is malformed): too late for
  // another answer once its own has begun, else this one replaces it.
  if (!inFlight.req?.complete) {
    if (inFlight.headersSent) socket.destroy();
    else respond();
    return;
  }
  // A complete, pipelined request before the bad one is still being answered: its answer goes first.
  inFlight.once('finish', respond);
  inFlight.once('close', () => (inFlight.writableFinished ? undefined : socket.destroy()));
}

/**
 * HTTP/1.1 requires `Host` (RFC 9112 §3.2). node:http's own check answers an empty 400, so the server is
 * made without it (`requireHostHeader: false`) and the first hook asks this instead.
 */
export function hostMissing(req: { httpVersion: string; headers: { host?: string } }): ApiError | null {
  if (req.headers.host !== undefined || req.httpVersion !== '1.1') return null;
  return new ApiError('validation', 'An HTTP/1.1 request needs a Host header', null, { Connection: 'close' });
}

/** The response format of a request the router never matched: its `?format=` and `Accept`, else JSON. */
function formatOf(req: FastifyRequest): Format {
  const url = req.raw.url ?? '';
  const q = url.indexOf('?');
  try {
    const formats = q < 0 ? [] : new URLSearchParams(url.slice(q + 1)).getAll('format');
    return negotiate(formats.length ? formats : undefined, req.headers.accept);
  } catch {
    return 'json';
  }
}

/** A path with a %-escape that does not decode (the router's and the path table's answer). */
export const malformedUrl = (path: string): ApiError => new ApiError('validation', `Malformed URL: ${JSON.stringify(path)} has an invalid %-escape`);

/** Fastify's `frameworkErrors`: router failures in the API's error format. */
export function frameworkErrors(bodyLimit: number) {
  return (err: FastifyError, req: FastifyRequest, reply: FastifyReply): void => {
    const path = (req.raw.url ?? '').split('?')[0];
    const e =
      err.code === 'FST_ERR_BAD_URL'
        ? malformedUrl(path)
        : err.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? new ApiError('notexist', `No resource at ${path}`)
          : new ApiError('validation', err.message || 'Bad request');
    reply.header('X-REQUEST-ID', req.id);
    if (leavesStallingBytes(req, bodyLimit)) reply.header('Connection', 'close');
    send(reply, formatOf(req), { status: e.status, body: [e.toWire()], root: 'objects' });
  };
}

/**
 * Whether answering now leaves request bytes on the connection that node:http will not discard cheaply
 * after the answer: a body someone started reading and left (it stays paused), one of unknown length
 * (chunked), or one over the body limit. Small untouched bodies are discarded by node:http (`_dump`).
 */
function leavesStallingBytes(req: FastifyRequest, bodyLimit: number): boolean {
  const raw = req.raw;
  if (raw.complete) return false;
  const te = req.headers['transfer-encoding'];
  const cl = req.headers['content-length'];
  if (te === undefined && cl === undefined) return false; // no body at all
  if (raw.readableDidRead || te !== undefined) return true;
  return !(Number(cl) <= bodyLimit);
}

/** Whether Fastify hands this request's body to a content parser (its own rule in `handleRequest`). */
function bodyIsParsed(req: FastifyRequest): boolean {
  const m = req.raw.method;
  if (m === 'GET' || m === 'HEAD') return false;
  if (m === 'DELETE' || m === 'OPTIONS')
    return req.headers['content-type'] !== undefined && (req.headers['transfer-encoding'] !== undefined || req.headers['content-length'] !== undefined);
  return true;
}

export function guardUnusedBodies(app: FastifyInstance, bodyLimit: number): void {
  // Global hooks run before @fastify/compress's route-level preParsing decompression. Both run on every
  // request: the callback form, no promise each.
  app.addHook('preParsing', (req, _reply, payload, done) => {
    if (req.raw.headers['content-encoding'] !== undefined && !bodyIsParsed(req)) delete req.raw.headers['content-encoding'];
    done(null, payload);
  });
  app.addHook('onSend', (req, reply, payload, done) => {
    if (!req.raw.complete) {
      if (!reply.hasHeader('connection') && leavesStallingBytes(req, bodyLimit)) reply.header('Connection', 'close');
      if (/close/i.test(String(reply.getHeader('connection') ?? ''))) lingerAfterAnswer(req.raw.socket);
    }
    done(null, payload);
  });
}
