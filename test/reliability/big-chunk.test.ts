/**
 * A resumable.js chunk of 256 MiB (the largest the route takes) does not stall the service or keep its memory:
 * a real `stratus serve` process (its RSS is the server's alone) takes the chunk as one multipart body, sent
 * as a stream, while a second client reads (`GET drives/<uuid>/`) in a loop. The reads are answered within
 * 100 ms more than the longest the same reader waited alone in the 2 s before and after (a shared host's own
 * noise), but for at most 5% of them (SQLite's checkpoints, a loaded host), which still take less than 500 ms more (before the chunk was streamed,
 * reads waited 1.7–4.6 s); the server's RSS (VmRSS, sampled every 20 ms) grows by less than 100 MiB; and the
 * chunk arrives whole (the drive rests, its last block reads back).
 *
 * @runs-alone: its checks are waits, so test/run.ts runs it after the other files, by itself.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { engine, freshDatabase } from '../helpers/db.js';
import { Client } from '../helpers/client.js';
import { serveProcess, stratusAsync, type Running } from '../helpers/process.js';

const MiB = 1024 * 1024;
const SIZE = 256 * MiB;
const BLOCK = 64 * 1024;
const MAX_WAIT_MS = 100;
/**
 * A rare read may wait up to this: on SQLite a commit that passes the WAL's checkpoint size copies the log into
 * the database file and syncs it in that call (tens to a couple of hundred ms on a loaded disk). At most
 * RARE_SHARE of the reads: on a quiet host none pass MAX_WAIT_MS, on a host at load 15 a few percent do. A chunk
 * handled in one piece holds every read for seconds, which RARE_WAIT_MS refuses whatever the share.
 */
const RARE_WAIT_MS = 500;
const RARE_SHARE = 0.05;
const MAX_GROWTH = 100 * MiB;

let dir: string;
let server: Running;
let email: string;
const password = 'big-chunk-secret';
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-big-chunk-'));
  const db = engine === 'sqlite' ? join(dir, 'stratus.db') : (await freshDatabase()).url;
  email = `big-chunk-${process.pid}@example.com`;
  for (const cmd of [
    ['migrate', '--db', db],
    ['users', 'add', email, '--password', password, '--db', db],
  ]) {
    const res = await stratusAsync(cmd);
    assert.equal(res.status, 0, `${cmd.join(' ')}: ${res.stdout}${res.stderr}`);
  }
  server = await serveProcess(['--db', db, '--rate-limits', 'off', '--log-level', 'error']);
});
after(async () => {
  server?.child.kill('SIGKILL');
  await server?.exited;
  rmSync(dir, { recursive: true, force: true });
});

function rss(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(kb?.[1] ?? 0) * 1024;
}

/** Block `i` of the image: one random block with `i` in its first bytes (every block distinct, made as it is sent). */
const base = randomBytes(BLOCK);
function blockOf(i: number): Buffer {
  const b = Buffer.from(base);
  b.writeUInt32BE(i, 0);
  return b;
}

/** The chunk as resumable.js POSTs it (fields, then the file part), streamed block by block. */
function sendChunk(c: Client, uuid: string): Promise<{ status: number; text: string }> {
  const boundary = `----big${randomBytes(8).toString('hex')}`;
  const fields = {
    resumableChunkNumber: '1',
    resumableChunkSize: String(SIZE),
    resumableTotalSize: String(SIZE),
    resumableIdentifier: 'big',
    resumableFilename: 'big',
  };
  const head = Buffer.from(
    Object.entries(fields)
      .map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`)
      .join('') + `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big"\r\nContent-Type: application/octet-stream\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  async function* body() {
    yield head;
    for (let i = 0; i < SIZE / BLOCK; i++) yield blockOf(i);
    yield tail;
  }
  const url = new URL(`/api/2.0/drives/${uuid}/upload/`, c.base);
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: 'POST',
      agent: false,
      headers: { ...c.authHeader(), 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(head.length + SIZE + tail.length) },
    });
    req.on('response', (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, text }));
    });
    req.on('error', reject);
    pipeline(Readable.from(body()), req).catch(reject);
  });
}

test(`a 256 MiB resumable chunk leaves readers answered within ${MAX_WAIT_MS} ms and RSS within +${MAX_GROWTH / MiB} MiB (${engine})`, async () => {
  const c = new Client(server.base, { email, password });
  const init = await c.post('initupload/', { name: 'big', size: SIZE, media: 'disk' });
  assert.equal(init.status, 201, init.text);
  const uuid = init.json.objects[0].uuid as string;
  // Warm: the reader's path is loaded before the baseline. The reader alone, 2 s before the upload and 2 s after
  // it, gives the machine's own noise (other processes on a shared host, other test files in a run): the upload
  // may add MAX_WAIT_MS to it, no more.
  let noise = 0;
  const alone = async () => {
    for (const started = performance.now(); performance.now() - started < 2000;) {
      const t = performance.now();
      assert.equal((await c.get(`drives/${uuid}/`)).status, 200);
      noise = Math.max(noise, performance.now() - t);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  await alone();
  const pid = server.child.pid!;
  const baseline = rss(pid);

  let done = false;
  let peak = baseline;
  const sampler = (async () => {
    while (!done) {
      peak = Math.max(peak, rss(pid));
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const waits: number[] = [];
  const reader = (async () => {
    while (!done) {
      const started = performance.now();
      const res = await c.get(`drives/${uuid}/`);
      waits.push(performance.now() - started);
      assert.equal(res.status, 200, res.text);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();

  const started = performance.now();
  const sent = await sendChunk(c, uuid).finally(() => (done = true));
  const seconds = (performance.now() - started) / 1000;
  await Promise.all([reader, sampler]);
  await alone();
  peak = Math.max(peak, rss(pid));

  const maxWait = Math.max(...waits);
  const sorted = [...waits].sort((a, b) => a - b);
  const over = waits.filter((w) => w >= MAX_WAIT_MS + noise);
  console.log(
    `report: ${engine}: 256 MiB chunk in ${seconds.toFixed(1)} s; ${waits.length} reads, median ${sorted[sorted.length >> 1].toFixed(1)} ms, max ${maxWait.toFixed(1)} ms, ${over.length} over ${(MAX_WAIT_MS + noise).toFixed(0)} ms (alone: max ${noise.toFixed(1)} ms); ` +
      `RSS ${(baseline / MiB).toFixed(0)} -> peak ${(peak / MiB).toFixed(0)} MiB (+${((peak - baseline) / MiB).toFixed(0)})`,
  );
  assert.equal(sent.status, 200, sent.text);
  assert.ok(waits.length >= 10, `the reader ran (${waits.length} reads)`);
  assert.ok(
    over.length <= waits.length * RARE_SHARE,
    `${over.length} of ${waits.length} reads waited ${MAX_WAIT_MS} ms more than alone (${noise.toFixed(1)} ms)`,
  );
  assert.ok(maxWait < RARE_WAIT_MS + noise, `a read waited ${maxWait.toFixed(1)} ms (alone: ${noise.toFixed(1)} ms at most)`);
  assert.ok(peak - baseline < MAX_GROWTH, `RSS grew by ${((peak - baseline) / MiB).toFixed(0)} MiB`);
  assert.equal((await c.get(`drives/${uuid}/`)).json.status, 'unmounted');
  const last = SIZE / BLOCK - 1;
  const tail = await c.request('GET', `drives/${uuid}/download/`, { headers: { range: `bytes=${last * BLOCK}-` } });
  assert.equal(tail.status, 206);
  assert.deepEqual(tail.raw, blockOf(last));
});
