import { ApiError } from '../core/errors.js';

/**
 * A `multipart/form-data` body (RFC 7578), as resumable.js sends each chunk: a few text fields, then one
 * `file` part of up to 256 MiB. The body is read as it arrives: parts come one at a time, each with its bytes
 * as a stream, so a chunk is written in batches while it is received and never held whole. What is held is
 * one piece of the body plus a boundary's length (a part's headers and text fields are bounded). Anything
 * malformed is a 400.
 */
export interface Part {
  name: string;
  filename?: string;
  /** The part's bytes; read them (or leave them: they are skipped) before asking for the next part. */
  data: AsyncIterable<Buffer>;
}

/** Bounds on what is held whole: the bytes before the first boundary, a part's headers, a text field. */
const PREAMBLE_MAX = 16 * 1024;
const HEADERS_MAX = 16 * 1024;
const FIELD_MAX = 64 * 1024;

const CRLF = Buffer.from('\r\n');
const HEADERS_END = Buffer.from('\r\n\r\n');

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

/** A body read forward: what is buffered is the unread rest of the last piece (plus a marker's length). */
class Cursor {
  private buf: Buffer;
  private readonly it: AsyncIterator<Buffer>;

  constructor(body: AsyncIterable<Buffer>, start: Buffer) {
    this.it = body[Symbol.asyncIterator]();
    this.buf = start;
  }

  /** One more piece of the body (false at its end). */
  private async more(): Promise<boolean> {
    const next = await this.it.next();
    if (next.done) return false;
    this.buf = this.buf.length ? Buffer.concat([this.buf, next.value]) : next.value;
    return true;
  }

  /** The next `n` bytes. */
  async take(n: number, what: string): Promise<Buffer> {
    while (this.buf.length < n) if (!(await this.more())) throw malformed(`the body ends in ${what}`);
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** The bytes up to `marker` (at most `max` of them), the marker consumed. */
  async until(marker: Buffer, max: number, what: string): Promise<Buffer> {
    for (;;) {
      const at = this.buf.indexOf(marker);
      if (at >= 0 && at <= max) {
        const out = this.buf.subarray(0, at);
        this.buf = this.buf.subarray(at + marker.length);
        return out;
      }
      if (this.buf.length > max + marker.length) throw malformed(`${what} is longer than ${max} bytes`);
      if (!(await this.more())) throw malformed(`the body ends in ${what}`);
    }
  }

  /** The bytes up to `marker`, as they arrive (a marker split across pieces is kept back until it is whole). */
  async *stream(marker: Buffer): AsyncGenerator<Buffer> {
    for (;;) {
      const at = this.buf.indexOf(marker);
      if (at >= 0) {
        const out = this.buf.subarray(0, at);
        this.buf = this.buf.subarray(at + marker.length);
        if (out.length) yield out;
        return;
      }
      const keep = marker.length - 1;
      if (this.buf.length > keep) {
        const out = this.buf.subarray(0, this.buf.length - keep);
        this.buf = this.buf.subarray(this.buf.length - keep);
        yield out;
      }
      if (!(await this.more())) throw malformed('a part has no closing boundary');
    }
  }

  /** Reads the rest of the body and forgets it (the epilogue after the closing boundary). */
  async drain(): Promise<void> {
    this.buf = Buffer.alloc(0);
    while (await this.more()) this.buf = Buffer.alloc(0);
  }
}

/** The parts of a multipart body, in order, each read as it arrives. */
export async function* multipartParts(body: AsyncIterable<Buffer>, boundary: string): AsyncGenerator<Part> {
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  // The first boundary usually opens the body, without the line break before it: one is put in front.
  const cursor = new Cursor(body, CRLF);
  await cursor.until(delimiter, PREAMBLE_MAX, 'the preamble (no boundary)');
  for (;;) {
    const after = (await cursor.take(2, 'a boundary')).toString('latin1');
    if (after === '--') return await cursor.drain();
    if (after !== '\r\n') throw malformed('a boundary is not followed by a line break');
    const headers = (await cursor.until(HEADERS_END, HEADERS_MAX, "a part's headers")).toString('latin1').split('\r\n');
    const disposition = headers.find((h) => h.toLowerCase().startsWith('content-disposition:'));
    const name = disposition && /;\s*name="([^"]*)"/i.exec(disposition)?.[1];
    if (!name) throw malformed('a part has no name');
    const filename = disposition && /;\s*filename="([^"]*)"/i.exec(disposition)?.[1];
    let read = false;
    const data = (async function* () {
      yield* cursor.stream(delimiter);
      read = true;
    })();
    yield { name, ...(filename !== undefined ? { filename } : {}), data };
    if (!read) for await (const skipped of cursor.stream(delimiter)) void skipped;
  }
}

/** A text part's value (400 past FIELD_MAX bytes). */
export async function partText(part: Part): Promise<string> {
  const pieces: Buffer[] = [];
  let n = 0;
  for await (const piece of part.data) {
    n += piece.length;
    if (n > FIELD_MAX) throw malformed(`the field ${part.name} is longer than ${FIELD_MAX} bytes`);
    pieces.push(piece);
  }
  return Buffer.concat(pieces).toString('utf8');
}
