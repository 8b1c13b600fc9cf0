import { ApiError } from '../core/errors.js';

/**
 * A `multipart/form-data` body (RFC 7578), as resumable.js sends each chunk: a few text fields and one
 * `file` part. The body is one chunk, read with a bound the route sets from the chunk's declared size, so
 * it is parsed whole; the parts are views into it (no copies). Anything malformed is a 400.
 */
export interface Part {
  name: string;
  filename?: string;
  data: Buffer;
}

const malformed = (why: string) => new ApiError('validation', `Malformed multipart body: ${why}`);

/** The boundary a `Content-Type` names (400 when it is no multipart/form-data). */
export function boundaryOf(contentType: string | undefined): string {
  const [media, ...params] = (contentType ?? '').split(';');
  if (media.trim().toLowerCase() !== 'multipart/form-data') throw new ApiError('validation', 'Content-Type must be multipart/form-data', 'Content-Type');
  for (const p of params) {
    const [k, ...v] = p.split('=');
    if (k.trim().toLowerCase() === 'boundary') {
      const b = v
        .join('=')
        .trim()
        .replace(/^"(.*)"$/, '$1');
      if (b && b.length <= 200) return b;
    }
  }
  throw malformed('no boundary in Content-Type');
}

export function parseMultipart(body: Buffer, boundary: string): Part[] {
  const delimiter = Buffer.from(`--${boundary}`);
  let at = body.indexOf(delimiter);
  if (at < 0) throw malformed('no boundary in the body');
  const parts: Part[] = [];
  for (;;) {
    at += delimiter.length;
    if (body.subarray(at, at + 2).toString() === '--') return parts;
    if (body.subarray(at, at + 2).toString() !== '\r\n') throw malformed('a boundary is not followed by a line break');
    at += 2;
    const headerEnd = body.indexOf('\r\n\r\n', at);
    if (headerEnd < 0) throw malformed('a part has no end of headers');
    const headers = body.subarray(at, headerEnd).toString('latin1').split('\r\n');
    const next = body.indexOf(Buffer.from(`\r\n--${boundary}`), headerEnd + 4);
    if (next < 0) throw malformed('a part has no closing boundary');
    const disposition = headers.find((h) => h.toLowerCase().startsWith('content-disposition:'));
    const name = disposition && /;\s*name="([^"]*)"/i.exec(disposition)?.[1];
    if (!name) throw malformed('a part has no name');
    const filename = disposition && /;\s*filename="([^"]*)"/i.exec(disposition)?.[1];
    parts.push({ name, ...(filename !== undefined ? { filename } : {}), data: body.subarray(headerEnd + 4, next) });
    at = next + 2;
  }
}
