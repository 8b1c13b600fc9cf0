import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError } from '../core/errors.js';
import { truncateAtNul } from './json.js';
import { fromXml, XmlParseError } from './xml.js';

/**
 * JSON.parse that refuses prototype-poisoning keys, as Fastify's own parser does. A reviver makes a parse
 * 2-3x slower: it runs only when such a key can be there, spelled out or with a `\u` escape.
 */
function parseJson(text: string): unknown {
  if (!text.includes('__proto__') && !text.includes('\\u')) return JSON.parse(text);
  return JSON.parse(text, (key, value) => (key === '__proto__' ? undefined : value));
}

function parse(kind: 'json' | 'xml', text: string): unknown {
  try {
    return truncateAtNul(kind === 'xml' ? fromXml(text) : parseJson(text));
  } catch (e) {
    const detail = e instanceof XmlParseError || e instanceof SyntaxError ? e.message : 'unreadable body';
    throw new ApiError('validation', `Malformed ${kind.toUpperCase()} body: ${detail}`);
  }
}

/** `Content-Type` decides the parser; with no type a body is read as JSON, the API's default format. */
function kindOf(contentType: string | undefined): 'json' | 'xml' | null {
  if (!contentType) return 'json';
  const media = contentType.split(';')[0].trim().toLowerCase();
  if (media === 'application/json' || media.endsWith('+json')) return 'json';
  if (media === 'application/xml' || media === 'text/xml' || media.endsWith('+xml')) return 'xml';
  return null;
}

/**
 * Request bodies: JSON or XML by `Content-Type`, parsed once for every route. An empty body is "no body"
 * (clients send actions with a content type and nothing else); `\0` cuts strings short.
 */
export function registerBodyParsers(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (req: FastifyRequest, body: string | Buffer, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    const kind = kindOf(req.headers['content-type']);
    if (!kind) return done(new ApiError('validation', 'Content-Type must be application/json or application/xml', 'Content-Type'));
    try {
      done(null, parse(kind, text));
    } catch (e) {
      done(e as Error);
    }
  });
}
