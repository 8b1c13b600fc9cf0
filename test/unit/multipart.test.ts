import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ApiError } from '../../src/core/errors.js';
import { multipartParts, partText } from '../../src/http/multipart.js';

/**
 * The streamed multipart reader: parts come out the same however the body is cut into pieces (a boundary
 * split across pieces included), a part's bytes are never held whole, and a malformed body is a 400.
 */
const boundary = 'xYz-42';

function body(parts: { name: string; data: Buffer | string; filename?: string }[], { close = true, preamble = '', epilogue = '' } = {}): Buffer {
  const out: Buffer[] = [Buffer.from(preamble)];
  for (const p of parts) {
    const file = p.filename !== undefined ? `; filename="${p.filename}"` : '';
    out.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"${file}\r\n\r\n`), Buffer.from(p.data), Buffer.from('\r\n'));
  }
  if (close) out.push(Buffer.from(`--${boundary}--\r\n${epilogue}`));
  return Buffer.concat(out);
}

/** `bytes` as a stream of pieces of `size` bytes. */
async function* pieces(bytes: Buffer, size: number): AsyncGenerator<Buffer> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

async function read(bytes: Buffer, size: number): Promise<{ name: string; filename?: string; data: Buffer; largest: number }[]> {
  const out = [];
  for await (const part of multipartParts(pieces(bytes, size), boundary)) {
    const got: Buffer[] = [];
    let largest = 0;
    for await (const piece of part.data) {
      got.push(piece);
      largest = Math.max(largest, piece.length);
    }
    out.push({ name: part.name, ...(part.filename !== undefined ? { filename: part.filename } : {}), data: Buffer.concat(got), largest });
  }
  return out;
}

test('parts come out whole whatever the pieces: 1 byte, a boundary split across two, 64 KiB', async () => {
  // A file part holding CRLF, dashes and a near-boundary, as binary data may.
  const file = Buffer.concat([randomBytes(100_000), Buffer.from(`\r\n--${boundary.slice(0, -1)}\r\n--`), randomBytes(50_000)]);
  const bytes = body(
    [
      { name: 'resumableChunkNumber', data: '3' },
      { name: 'file', filename: 'img', data: file },
      { name: 'after', data: '' },
    ],
    { preamble: 'ignored preamble\r\n', epilogue: 'ignored epilogue' },
  );
  for (const size of [1, 7, 4096, 65536, bytes.length]) {
    const parts = await read(bytes, size);
    assert.deepEqual(
      parts.map((p) => p.name),
      ['resumableChunkNumber', 'file', 'after'],
      `pieces of ${size}`,
    );
    assert.equal(parts[0].data.toString(), '3');
    assert.equal(parts[1].filename, 'img');
    assert.ok(parts[1].data.equals(file), `file part intact with pieces of ${size}`);
    assert.equal(parts[2].data.length, 0);
    // Streamed: a piece of the part is at most a piece of the body (plus a boundary's length).
    if (size < bytes.length) assert.ok(parts[1].largest <= size + boundary.length + 4, `pieces of ${size}: ${parts[1].largest}`);
  }
});

test('a part left unread is skipped; partText reads a field', async () => {
  const bytes = body([
    { name: 'file', data: randomBytes(10_000) },
    { name: 'x', data: 'value' },
  ]);
  const names: string[] = [];
  let x = '';
  for await (const part of multipartParts(pieces(bytes, 1000), boundary)) {
    names.push(part.name);
    if (part.name === 'x') x = await partText(part);
  }
  assert.deepEqual(names, ['file', 'x']);
  assert.equal(x, 'value');
});

test('malformed bodies are a 400 naming the fault', async () => {
  const cases: [string, Buffer, RegExp][] = [
    ['no boundary at all', Buffer.from('garbage'), /preamble/],
    ['no closing boundary', body([{ name: 'file', data: 'abc' }], { close: false }), /closing boundary|ends in/],
    ['a part without a name', Buffer.from(`--${boundary}\r\nContent-Type: text/plain\r\n\r\nabc\r\n--${boundary}--\r\n`), /no name/],
    ['headers that never end', Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="a"\r\n${'x'.repeat(20_000)}`), /headers/],
    ['a boundary followed by junk', Buffer.from(`--${boundary}XX`), /line break/],
    ['a field too long', body([{ name: 'f', data: 'y'.repeat(70_000) }]), /longer than/],
  ];
  for (const [what, bytes, message] of cases) {
    await assert.rejects(
      async () => {
        for await (const part of multipartParts(pieces(bytes, 4096), boundary)) await partText(part);
      },
      (e: unknown) => e instanceof ApiError && e.type === 'validation' && message.test(e.message),
      what,
    );
  }
});
