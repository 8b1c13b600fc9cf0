import { deflateSync, gzipSync } from 'node:zlib';
import negotiate from '@fastify/accept-negotiator';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * How answers are compressed (spec: gzip whenever asked): @fastify/compress compresses every answer with
 * these settings (app.ts), and the answer cache (answer-cache.ts) keeps its answers compressed the same way,
 * choosing the encoding as the plugin does (same negotiator, same aliases), so a reused answer is the same
 * bytes a fresh one would be. Level 1: ~1.5x faster than the default for 50 KB of JSON.
 */
export const ENCODINGS = ['gzip', 'deflate'] as const;
export type Encoding = (typeof ENCODINGS)[number];
export const ZLIB_OPTIONS = { level: 1 };

/** `*` (no preference) and `x-gzip` count as gzip, as in the plugin. */
const GZIP_ALIAS = /\*|x-gzip/gu;

/** The encoding the compression plugin would choose for this request, or null for none. */
export function acceptedEncoding(headers: IncomingHttpHeaders): Encoding | null {
  const header = headers['accept-encoding'];
  if (header === undefined || headers['x-no-compression'] !== undefined) return null;
  return negotiate(header.toLowerCase().replace(GZIP_ALIAS, 'gzip'), [...ENCODINGS]);
}

export function compress(encoding: Encoding, payload: string): Buffer {
  return encoding === 'gzip' ? gzipSync(payload, ZLIB_OPTIONS) : deflateSync(payload, ZLIB_OPTIONS);
}
