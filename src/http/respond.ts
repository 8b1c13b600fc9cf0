import type { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { Format } from './negotiate.js';
import { sortedJson } from './json.js';
import { toXml, type XmlRoot } from './xml.js';

/** What a route handler returns; serialisation, status and headers are applied here, once. */
export interface Result {
  status: number;
  body?: unknown;
  /** XML root element: `response` for envelopes, `object` for one object, `objects` for a bare list. */
  root?: XmlRoot;
  /** A list value sends the header once per item (two `Set-Cookie`, two `WWW-Authenticate`). */
  headers?: Record<string, string | string[]>;
  /** An answer that is bytes, not an object (a drive's download, an upload's uuid): sent as it is. */
  raw?: { contentType: string; payload: string | Buffer | Readable };
}

const CONTENT_TYPE: Record<Format, string> = {
  json: 'application/json; charset=utf-8',
  xml: 'application/xml; charset=utf-8',
};

export function send(reply: FastifyReply, format: Format, result: Result): FastifyReply {
  reply.code(result.status);
  if (result.headers) reply.headers(result.headers);
  if (result.raw) return reply.header('content-type', result.raw.contentType).send(result.raw.payload);
  if (result.status === 204 || result.body === undefined) {
    // The real API answers 204 with Django's default content type and nothing else.
    return reply.header('content-type', 'text/html; charset=utf-8').send();
  }
  const answer = serialise(format, result);
  return reply.header('content-type', answer.contentType).send(answer.payload);
}

/** A result's body as the bytes sent and their content type. */
export function serialise(format: Format, result: Result): { contentType: string; payload: string } {
  const root = result.root ?? (Array.isArray(result.body) ? 'objects' : 'response');
  return { contentType: CONTENT_TYPE[format], payload: format === 'xml' ? toXml(result.body, root) : sortedJson(result.body) };
}

/** An answer already serialised (a reused one, see answer-cache.ts). */
export function sendPayload(reply: FastifyReply, status: number, contentType: string, payload: string | Buffer): FastifyReply {
  return reply.code(status).header('content-type', contentType).send(payload);
}
