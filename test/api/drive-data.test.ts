import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { needs } from '../helpers/skips.js';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';

/**
 * The drive data protocols over HTTP (pycloudsigma's upload clients and its upload/download test): plain
 * upload, chunked upload (`initupload` + `upload_chunk` links), resumable.js, download with Range; each
 * image ~10 MiB with a random tail, chunks sent in parallel and out of order, compared by sha256.
 */
type User = Client & { uuid: string; email: string };
let srv: TestServer;
let alice: User, bob: User;

before(async () => {
  srv = await startServer();
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

const MiB = 1024 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** ~10 MiB: a repeated 4 KiB pattern (as pycloudsigma's test writes) and a random tail of up to 1 KiB. */
function image(size = 10 * MiB + Math.floor(Math.random() * 1024)): Buffer {
  const out = Buffer.alloc(size);
  const pattern = randomBytes(4096);
  for (let at = 0; at + 4096 <= size; at += 4096) pattern.copy(out, at);
  randomBytes(size % 4096).copy(out, size - (size % 4096));
  // Some distinct blocks too, so the content-addressing has more than one block to store.
  randomBytes(200_000).copy(out, 3 * MiB);
  return out;
}

/** pycloudsigma's chunking: floor(size / chunk) chunks, the last one taking the rest. */
function chunksOf(size: number, chunk: number): { index: number; offset: number; size: number }[] {
  const n = Math.max(1, Math.floor(size / chunk));
  return Array.from({ length: n }, (_, index) => ({ index, offset: index * chunk, size: index === n - 1 ? size - index * chunk : chunk }));
}

function shuffled<T>(list: T[]): T[] {
  const out = [...list];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** Runs `fn` over `items`, `width` at a time. */
async function parallel<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: width }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
    }),
  );
}

const download = (c: Client, uuid: string, range?: string) => c.request('GET', `drives/${uuid}/download/`, { headers: range ? { range } : {} });

function multipart(fields: Record<string, string>, file: Buffer): { body: Buffer; type: string } {
  const boundary = `----stratus${randomBytes(8).toString('hex')}`;
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(fields)) parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="file"\r\nContent-Type: application/octet-stream\r\n\r\n`));
  parts.push(file, Buffer.from(`\r\n--${boundary}--\r\n`));
  return { body: Buffer.concat(parts), type: `multipart/form-data; boundary=${boundary}` };
}

async function initUpload(c: Client, size: number, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await c.post('initupload/', { name: 'image', size, media: 'disk', ...extra });
  assert.equal(res.status, 201, res.text);
  const d = res.json.objects[0];
  assert.equal(d.size, size);
  assert.equal(d.status, 'uploading');
  return d.uuid;
}

const resumableFields = (n: number, chunk: number, total: number) => ({
  resumableChunkNumber: String(n),
  resumableChunkSize: String(chunk),
  resumableTotalSize: String(total),
  resumableIdentifier: 'image.raw',
  resumableFilename: 'image.raw',
});

/** resumable.js as pycloudsigma speaks it: GET the chunk's test, POST it as multipart when absent. Answers whether it sent it. */
async function resumableChunk(c: Client, uuid: string, data: Buffer, chunk: number, part: { index: number; offset: number; size: number }): Promise<boolean> {
  const fields = resumableFields(part.index + 1, chunk, data.length);
  const probe = await c.get(`drives/${uuid}/upload/?${new URLSearchParams(fields)}`);
  if (probe.status === 200) return false;
  assert.equal(probe.status, 404, probe.text);
  const { body, type } = multipart(fields, data.subarray(part.offset, part.offset + part.size));
  const res = await c.request('POST', `drives/${uuid}/upload/`, { raw: body, headers: { 'content-type': type } });
  assert.equal(res.status, 200, res.text);
  return true;
}

async function status(c: Client, uuid: string): Promise<string> {
  return (await c.get(`drives/${uuid}/`)).json.status;
}

describe('plain upload and download', () => {
  test('POST drives/upload/ makes a drive of the image size holding its bytes; download gives them back, with Range', async () => {
    const data = image();
    const res = await alice.request('POST', 'drives/upload/', { raw: data, headers: { 'content-type': 'application/octet-stream' } });
    assert.equal(res.status, 201, res.text);
    const uuid = res.text.trim();
    assert.match(uuid, /^[0-9a-f-]{36}$/);
    const drive = (await alice.get(`drives/${uuid}/`)).json;
    assert.equal(drive.size, data.length);
    assert.equal(drive.status, 'unmounted');
    assert.equal(drive.media, 'disk');

    const whole = await download(alice, uuid);
    assert.equal(whole.status, 200);
    assert.equal(whole.headers['content-type'], 'application/octet-stream');
    assert.equal(Number(whole.headers['content-length']), data.length);
    assert.equal(sha(whole.raw), sha(data));

    // curl -r 0-N, as the acceptance test downloads.
    const part = await download(alice, uuid, `bytes=0-${data.length - 1}`);
    assert.equal(part.status, 206);
    assert.equal(part.headers['content-range'], `bytes 0-${data.length - 1}/${data.length}`);
    assert.equal(sha(part.raw), sha(data));
    const mid = await download(alice, uuid, 'bytes=65530-200000');
    assert.deepEqual(mid.raw, data.subarray(65530, 200001));
    const tail = await download(alice, uuid, 'bytes=-100');
    assert.deepEqual(tail.raw, data.subarray(data.length - 100));

    const outside = await download(alice, uuid, `bytes=${data.length}-`);
    assert.equal(outside.status, 416);
    assert.equal(outside.headers['content-range'], `bytes */${data.length}`);
    assert.equal(outside.json[0].error_point, 'Range');

    // The upload is in the audit log.
    const logs = await srv.services.store.db.selectFrom('audit_log').select('action').where('uuid', '=', uuid).orderBy('seq').execute();
    assert.deepEqual(
      logs.map((l) => l.action),
      ['create', 'init_upload', 'update'],
    );
  });

  test('Range: the unit is case-insensitive; another unit, an unparseable range or several are ignored (200, whole); outside is 416', async () => {
    const data = randomBytes(100_000);
    const res = await alice.request('POST', 'drives/upload/', { raw: data, headers: { 'content-type': 'application/octet-stream' } });
    assert.equal(res.status, 201, res.text);
    const uuid = res.text.trim();
    for (const range of ['BYTES=0-9', 'Bytes=0-9', 'bytes=0-9']) {
      const part = await download(alice, uuid, range);
      assert.equal(part.status, 206, range);
      assert.equal(part.headers['content-range'], `bytes 0-9/${data.length}`, range);
      assert.deepEqual(part.raw, data.subarray(0, 10), range);
    }
    for (const range of ['items=0-5', 'bytes=abc', 'bytes=-', 'bytes=1-2-3', 'bytes 0-9', 'bytes=0-9, 20-29', '=0-9']) {
      const whole = await download(alice, uuid, range);
      assert.equal(whole.status, 200, `${range}: ${whole.text.slice(0, 200)}`);
      assert.equal(whole.headers['content-range'], undefined, range);
      assert.equal(sha(whole.raw), sha(data), range);
    }
    for (const range of [`bytes=${data.length}-`, 'bytes=-0', 'bytes=50-40', `BYTES=${data.length + 5}-${data.length + 9}`]) {
      const refused = await download(alice, uuid, range);
      assert.equal(refused.status, 416, range);
      assert.equal(refused.headers['content-range'], `bytes */${data.length}`, range);
      assert.equal(refused.json[0].error_point, 'Range', range);
    }
  });

  test('a drive nobody wrote reads as zeroes; another user sees no drive (404)', async () => {
    const made = await alice.post('drives/', { name: 'blank', size: 1024 ** 3, media: 'disk' });
    const uuid = made.json.objects[0].uuid;
    await srv.advance(60_000);
    const res = await download(alice, uuid, 'bytes=1000000-1065535');
    assert.equal(res.status, 206);
    assert.deepEqual(res.raw, Buffer.alloc(65536));
    assert.equal((await download(bob, uuid)).status, 404);
    assert.equal(
      (await bob.request('POST', `drives/${uuid}/upload/`, { raw: 'x', headers: { 'content-type': 'multipart/form-data; boundary=x' } })).status,
      404,
    );
  });

  test('a plain upload needs a body and its length; an image over the upload limit is 413 before any work', async () => {
    const empty = await alice.request('POST', 'drives/upload/', { raw: Buffer.alloc(0), headers: { 'content-type': 'application/octet-stream' } });
    assert.equal(empty.status, 400);
    const small = await startServer({ 'upload-limit': String(MiB) });
    try {
      const carol = await small.user();
      const before = (await carol.get('drives/')).json.meta.total_count;
      const big = await carol.request('POST', 'drives/upload/', { raw: Buffer.alloc(MiB + 1, 1), headers: { 'content-type': 'application/octet-stream' } });
      assert.equal(big.status, 413, big.text);
      assert.equal(big.json[0].error_type, 'validation');
      assert.equal((await carol.get('drives/')).json.meta.total_count, before);
      const init = await carol.post('initupload/', { name: 'x', size: MiB + 1, media: 'disk' });
      assert.equal(init.status, 413);
    } finally {
      await small.close();
    }
  });
});

describe('chunked upload (upload_client.py)', () => {
  test('initupload, then per chunk a link (416 once it arrived) and the bytes to it, in parallel and out of order', async () => {
    const data = image();
    const uuid = await initUpload(alice, data.length);
    const chunk = MiB;
    const parts = chunksOf(data.length, chunk);
    assert.ok(parts.at(-1)!.size > chunk, 'the last chunk is bigger');
    const anon = srv.anon();
    await parallel(shuffled(parts), 4, async (p) => {
      const link = await alice.post(`drives/${uuid}/action/?do=upload_chunk`, { chunk_number: p.index, chunk_size: chunk });
      assert.equal(link.status, 200, link.text);
      assert.match(link.json.link, new RegExp(`^/api/2.0/drives/${uuid}/`));
      // The link is its own credential.
      const sent = await anon.request('POST', link.json.link, {
        raw: data.subarray(p.offset, p.offset + p.size),
        headers: { 'content-type': 'application/octet-stream' },
      });
      assert.equal(sent.status, 200, sent.text);
      const again = await alice.post(`drives/${uuid}/action/?do=upload_chunk`, { chunk_number: p.index, chunk_size: chunk });
      assert.equal(again.status, 416);
      assert.match(again.json[0].error_message, new RegExp(`${p.index}.*already uploaded`));
    });
    assert.equal(await status(alice, uuid), 'unmounted');
    assert.equal(sha((await download(alice, uuid)).raw), sha(data));
  });

  test('initupload takes its object bare or in the {objects: [...]} envelope (as pycloudsigma sends it); several objects are a 400', async () => {
    const decl = { name: 'enveloped', size: 3 * MiB + 5, media: 'cdrom' };
    for (const body of [{ objects: [decl] }, [decl]]) {
      const res = await alice.post('initupload/', body);
      assert.equal(res.status, 201, `${JSON.stringify(body)}: ${res.text}`);
      const d = res.json.objects[0];
      assert.deepEqual([d.name, d.size, d.media, d.status], ['enveloped', decl.size, 'cdrom', 'uploading']);
      assert.equal(res.headers.location, `${srv.base}/api/2.0/drives/${d.uuid}/`);
    }
    const count = async () => (await alice.get('drives/?limit=0')).json.meta.total_count as number;
    const before = await count();
    for (const body of [{ objects: [decl, decl] }, { objects: [] }, { objects: ['x'] }]) {
      const res = await alice.post('initupload/', body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.json[0].error_point, 'objects');
    }
    assert.equal(await count(), before, 'a refused initupload makes no drive');
  });

  test('a link is checked: forged or for a chunk past the size (400), a wrong length (400); the drive stays uploading', async () => {
    const uuid = await initUpload(alice, 3 * MiB);
    const past = await alice.post(`drives/${uuid}/action/?do=upload_chunk`, { chunk_number: 3, chunk_size: MiB });
    assert.equal(past.status, 400);
    assert.equal(past.json[0].error_point, 'chunk_number');
    const link = (await alice.post(`drives/${uuid}/action/?do=upload_chunk`, { chunk_number: 0, chunk_size: MiB })).json.link as string;
    // One character of the signature changed (to another character: a fixed one matched 1 time in 16).
    const forged = link.replace(/signature=(.)/, (_, c: string) => `signature=${c === '0' ? '1' : '0'}`);
    const headers = { 'content-type': 'application/octet-stream' };
    assert.equal((await srv.anon().request('POST', forged, { raw: Buffer.alloc(MiB, 1), headers })).status, 403);
    assert.equal((await srv.anon().request('POST', link, { raw: Buffer.alloc(MiB - 1, 1), headers })).status, 400);
    assert.equal(await status(alice, uuid), 'uploading');
    // Busy while uploading: no clone.
    assert.equal((await alice.post(`drives/${uuid}/action/?do=clone`, {})).status, 403);
  });
});

describe('chunk numbers and used links', () => {
  test('chunk_number and chunk_size are integers or strings of decimal digits; anything else is a 400 that changes nothing', async () => {
    const uuid = await initUpload(alice, 3 * MiB);
    const bad: [string, unknown, unknown][] = [
      ['chunk_number', [0], MiB],
      ['chunk_number', '0x1', MiB],
      ['chunk_number', '1e0', MiB],
      ['chunk_number', ' 1', MiB],
      ['chunk_number', '+1', MiB],
      ['chunk_number', 1.5, MiB],
      ['chunk_number', -1, MiB],
      ['chunk_number', true, MiB],
      ['chunk_number', { n: 0 }, MiB],
      ['chunk_size', 0, '0x100000'],
      ['chunk_size', 0, '1e6'],
      ['chunk_size', 0, [MiB]],
    ];
    for (const [point, chunk_number, chunk_size] of bad) {
      const res = await alice.post(`drives/${uuid}/action/?do=upload_chunk`, { chunk_number, chunk_size });
      assert.equal(res.status, 400, `${JSON.stringify({ chunk_number, chunk_size })}: ${res.status} ${res.text}`);
      assert.equal(res.json[0].error_type, 'validation');
      assert.equal(res.json[0].error_point, point, JSON.stringify({ chunk_number, chunk_size }));
    }
    // Decimal strings and JSON integers both name chunk 1.
    for (const chunk_number of ['1', 1]) {
      const res = await alice.post(`drives/${uuid}/action/?do=upload_chunk`, { chunk_number, chunk_size: String(MiB) });
      assert.equal(res.status, 200, res.text);
      assert.match(res.json.link, /chunk_number=1&chunk_size=1048576&/);
    }
    assert.equal(await status(alice, uuid), 'uploading');
  });

  test('a link writes its chunk once: after the chunk arrived, a POST to it is 416 as upload_chunk answers, and the bytes stay', async () => {
    const uuid = await initUpload(alice, 2 * MiB);
    const link = (await alice.post(`drives/${uuid}/action/?do=upload_chunk`, { chunk_number: 0, chunk_size: MiB })).json.link as string;
    const headers = { 'content-type': 'application/octet-stream' };
    const first = randomBytes(MiB);
    assert.equal((await srv.anon().request('POST', link, { raw: first, headers })).status, 200);
    const again = await srv.anon().request('POST', link, { raw: randomBytes(MiB), headers });
    assert.equal(again.status, 416, again.text);
    assert.equal(again.json[0].error_type, 'validation');
    assert.match(again.json[0].error_message, /Chunk 0 is already uploaded/);
    assert.deepEqual((await download(alice, uuid, `bytes=0-${MiB - 1}`)).raw, first);
    assert.equal((await alice.post(`drives/${uuid}/action/?do=upload_chunk`, { chunk_number: 0, chunk_size: MiB })).status, 416);
  });
});

describe('resumable upload (resumable_upload.py)', () => {
  test('chunks in parallel and out of order; a resumed client sends only the missing chunks', async () => {
    const data = image();
    const uuid = await initUpload(alice, data.length);
    const chunk = 2 * MiB;
    const parts = chunksOf(data.length, chunk);
    // The first client dies after half the chunks.
    const first = shuffled(parts).slice(0, Math.floor(parts.length / 2));
    await parallel(first, 3, async (p) => {
      assert.equal(await resumableChunk(alice, uuid, data, chunk, p), true);
    });
    assert.equal(await status(alice, uuid), 'uploading');
    // The resumed client asks for every chunk and sends only what is missing.
    let sent = 0;
    await parallel(shuffled(parts), 3, async (p) => {
      if (await resumableChunk(alice, uuid, data, chunk, p)) sent++;
    });
    assert.equal(sent, parts.length - first.length);
    assert.equal(await status(alice, uuid), 'unmounted');
    assert.equal(sha((await download(alice, uuid)).raw), sha(data));
  });

  test('bad chunks are 4xx in the API format and change nothing: wrong total size, past the size, wrong length, broken multipart', async () => {
    const total = 3 * MiB;
    const uuid = await initUpload(alice, total);
    const post = (fields: Record<string, string>, file: Buffer) => {
      const { body, type } = multipart(fields, file);
      return alice.request('POST', `drives/${uuid}/upload/`, { raw: body, headers: { 'content-type': type } });
    };
    const wrongTotal = await post(resumableFields(1, MiB, total + 1), Buffer.alloc(MiB, 1));
    assert.equal(wrongTotal.status, 400);
    assert.equal(wrongTotal.json[0].error_point, 'resumableTotalSize');
    const past = await post(resumableFields(4, MiB, total), Buffer.alloc(MiB, 1));
    assert.equal(past.status, 400);
    const short = await post(resumableFields(1, MiB, total), Buffer.alloc(10, 1));
    assert.equal(short.status, 400);
    assert.equal(short.json[0].error_point, 'file');
    const broken = await alice.request('POST', `drives/${uuid}/upload/`, { raw: 'garbage', headers: { 'content-type': 'multipart/form-data; boundary=zzz' } });
    assert.equal(broken.status, 400);
    assert.match(broken.json[0].error_message, /multipart/);
    const probe = await alice.get(`drives/${uuid}/upload/?${new URLSearchParams(resumableFields(1, MiB, total))}`);
    assert.equal(probe.status, 404);
    assert.deepEqual((await download(alice, uuid, 'bytes=0-9')).raw, Buffer.alloc(10));
  });
});

describe('resumable chunks are read as they arrive', () => {
  const total = 2 * MiB;
  const boundary = 'stream-boundary';
  const field = (k: string, v: string) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
  const fileHead = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n`;
  const fieldsOf = (n: number) => Object.entries(resumableFields(n, MiB, total)).map(([k, v]) => field(k, v));
  const post = (uuid: string, parts: (string | Buffer)[], query = '') =>
    alice.request('POST', `drives/${uuid}/upload/${query}`, {
      raw: Buffer.concat(parts.map((p) => Buffer.from(p))),
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
  const arrived = async (uuid: string, n: number) => (await alice.get(`drives/${uuid}/upload/?${new URLSearchParams(resumableFields(n, MiB, total))}`)).status;

  test('fields in the query or before the file place the chunk; after it they must agree; it counts only with the closing boundary', async () => {
    const uuid = await initUpload(alice, total);
    const bytes = randomBytes(MiB);
    // The file part first and no fields in the query: the chunk cannot be placed as its bytes begin.
    const late = await post(uuid, [fileHead, bytes, '\r\n', ...fieldsOf(1), `--${boundary}--\r\n`]);
    assert.equal(late.status, 400, late.text);
    assert.match(late.json[0].error_message, /before the file part/);
    // A placing field after the file that says otherwise.
    const contradicts = await post(uuid, [...fieldsOf(1), fileHead, bytes, '\r\n', field('resumableChunkNumber', '2'), `--${boundary}--\r\n`]);
    assert.equal(contradicts.status, 400, contradicts.text);
    assert.equal(contradicts.json[0].error_point, 'resumableChunkNumber');
    // The body ends without its closing boundary.
    const unclosed = await post(uuid, [...fieldsOf(1), fileHead, bytes, '\r\n']);
    assert.equal(unclosed.status, 400, unclosed.text);
    assert.match(unclosed.json[0].error_message, /multipart/);
    // Two file parts.
    const twice = await post(uuid, [...fieldsOf(1), fileHead, bytes, '\r\n', fileHead, 'x\r\n', `--${boundary}--\r\n`]);
    assert.equal(twice.status, 400, twice.text);
    assert.equal(twice.json[0].error_point, 'file');
    assert.equal(await arrived(uuid, 1), 404, 'no refused chunk counts as arrived');

    // The fields in the query, the file alone in the body (and an agreeing field after it): accepted.
    const query = `?${new URLSearchParams(resumableFields(1, MiB, total))}`;
    const ok = await post(uuid, [fileHead, bytes, '\r\n', field('resumableChunkNumber', '1'), `--${boundary}--\r\n`], query);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(await arrived(uuid, 1), 200);
    assert.deepEqual((await download(alice, uuid, `bytes=0-${MiB - 1}`)).raw, bytes);
  });
});

describe('clones and snapshots of uploaded data', () => {
  test('a clone shares the blocks and gives back the bytes; a snapshot starts at 0 bytes', async () => {
    const data = image(2 * MiB + 123);
    const uuid = (await alice.request('POST', 'drives/upload/x.img', { raw: data, headers: { 'content-type': 'application/octet-stream' } })).text;
    assert.equal((await alice.get(`drives/${uuid}/`)).json.name, 'x.img');
    const stored = await srv.services.sim.storage.storedData(srv.services.store.db);
    const clone = await alice.post(`drives/${uuid}/action/?do=clone`, {});
    assert.equal(clone.status, 202, clone.text);
    const copy = clone.json.objects[0].uuid;
    assert.deepEqual(await srv.services.sim.storage.storedData(srv.services.store.db), stored);
    await srv.advance(600_000);
    assert.equal(sha((await download(alice, copy)).raw), sha(data));
    const snap = await alice.post('snapshots/', { drive: uuid, name: 'before' });
    assert.equal(snap.status, 201, snap.text);
    await srv.advance(60_000);
    assert.equal((await alice.get(`snapshots/${snap.json.objects[0].uuid}/`)).json.allocated_size, 0);
    // Deleting the source and the clone frees what only they held.
    assert.equal((await alice.delete(`drives/${uuid}/`)).status, 204);
    assert.equal((await alice.delete(`drives/${copy}/`)).status, 204);
    const after = await srv.services.sim.storage.storedData(srv.services.store.db);
    assert.ok(after.blocks < stored.blocks, `${after.blocks} < ${stored.blocks}`);
  });
});

describe('who may upload and download', () => {
  async function shared(rules: string[]): Promise<string> {
    const uuid = await initUpload(alice, MiB);
    const tag = (await alice.post('tags/', { name: 'data', resources: [uuid] })).json.objects[0];
    const acl = await alice.post('acls/', {
      name: 'data',
      grantees: [{ uuid: bob.uuid }],
      rules: rules.map((permission) => ({ permission })),
      tags: [{ uuid: tag.uuid }],
    });
    assert.equal(acl.status, 201, acl.text);
    return uuid;
  }

  test('a grantee with EDIT uploads (resumable) and with CLONE downloads; LIST alone is 403 for both', async () => {
    const data = randomBytes(MiB);
    const listOnly = await shared(['LIST']);
    assert.equal((await bob.get(`drives/${listOnly}/upload/?${new URLSearchParams(resumableFields(1, MiB, MiB))}`)).status, 403);
    assert.equal((await download(bob, listOnly)).status, 403);
    assert.equal((await bob.post(`drives/${listOnly}/action/?do=upload_chunk`, { chunk_number: 0, chunk_size: MiB })).status, 403);

    const uuid = await shared(['LIST', 'EDIT', 'CLONE']);
    assert.equal(await resumableChunk(bob, uuid, data, MiB, { index: 0, offset: 0, size: MiB }), true);
    assert.equal(await status(alice, uuid), 'unmounted');
    assert.equal(sha((await download(bob, uuid)).raw), sha(data));
  });

  test('no upload to a drive mounted on a running server (403), and nothing changes', async () => {
    const uuid = await initUpload(alice, MiB);
    const data = randomBytes(MiB);
    assert.equal(await resumableChunk(alice, uuid, data, MiB, { index: 0, offset: 0, size: MiB }), true);
    const server = await alice.post('servers/', {
      name: 'runner',
      cpu: 1000,
      mem: 1024 ** 3,
      vnc_password: 'secret',
      drives: [{ drive: uuid, dev_channel: '0:0', device: 'virtio', boot_order: 1 }],
    });
    assert.equal(server.status, 201, server.text);
    const started = await alice.post(`servers/${server.json.objects[0].uuid}/action/?do=start`, {});
    assert.equal(started.status, 202, started.text);
    await srv.advance(600_000);
    const fields = resumableFields(1, MiB, MiB);
    const { body, type } = multipart(fields, randomBytes(MiB));
    const refused = await alice.request('POST', `drives/${uuid}/upload/`, { raw: body, headers: { 'content-type': type } });
    assert.equal(refused.status, 403, refused.text);
    assert.match(refused.json[0].error_message, /running server/);
    assert.equal(sha((await download(alice, uuid)).raw), sha(data));
  });
});

describe("curl, as pycloudsigma's acceptance test runs it", { skip: needs('curl') }, () => {
  test('curl -X POST -T uploads (the file name names the drive), curl -L -r 0-N downloads the same bytes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-curl-'));
    try {
      const data = image(3 * MiB + 517);
      writeFileSync(join(dir, 'image.raw'), data);
      const creds = `${alice.email}:${(alice as User & { password: string }).password}`;
      const curl = (args: string[]) => promisify(execFile)('curl', ['-fsS', ...args], { encoding: 'utf8' });
      const { stdout } = await curl([
        '-X',
        'POST',
        '-u',
        creds,
        '-H',
        'Content-Type: application/octet-stream',
        '-T',
        join(dir, 'image.raw'),
        `${srv.base}/api/2.0/drives/upload/`,
      ]);
      const uuid = stdout.trim();
      const drive = (await alice.get(`drives/${uuid}/`)).json;
      assert.deepEqual([drive.name, drive.size, drive.status], ['image.raw', data.length, 'unmounted']);
      const code = await curl([
        '-L',
        '-u',
        creds,
        '-o',
        join(dir, 'back.raw'),
        '-w',
        '%{http_code}',
        '-r',
        `0-${data.length - 1}`,
        `${srv.base}/api/2.0/drives/${uuid}/download/`,
      ]);
      assert.equal(code.stdout, '206');
      assert.equal(sha(readFileSync(join(dir, 'back.raw'))), sha(data));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
