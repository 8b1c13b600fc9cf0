/**
 * An upload survives `kill -9`: a real `stratus serve` process takes a resumable upload (resumable.js, chunks in
 * parallel and out of order) and is killed with SIGKILL while chunks are arriving. After a restart on the same
 * database every chunk that was answered 2xx is there (the resume check answers 200 for it), the drive is still
 * `uploading` (resumable, not corrupt), and a resumed client that sends only the missing chunks ends with the
 * drive holding the image byte for byte (sha256).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engine, freshDatabase } from '../helpers/db.js';
import { Client, connectionLost } from '../helpers/client.js';
import { serveProcess, stratus, type Running } from '../helpers/process.js';

let dir: string;
let db: { url: string; drop: () => Promise<void> };
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-upload-kill9-'));
  db = engine === 'sqlite' ? { url: join(dir, 'stratus.db'), drop: async () => {} } : await freshDatabase();
});
after(async () => {
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

const CHUNK = 256 * 1024;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function multipart(fields: Record<string, string>, file: Buffer): { body: Buffer; type: string } {
  const boundary = `----k9${randomBytes(8).toString('hex')}`;
  const head = Object.entries(fields).map(([k, v]) => `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`);
  return {
    body: Buffer.concat([
      Buffer.from(head.join('') + `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f"\r\n\r\n`),
      file,
      Buffer.from(`\r\n--${boundary}--\r\n`),
    ]),
    type: `multipart/form-data; boundary=${boundary}`,
  };
}

test(`answered chunks of an upload survive kill -9 (${engine})`, async () => {
  const email = `upload-kill9-${Date.now()}@example.com`;
  const password = 'upload-kill9-secret';
  assert.equal(stratus(['migrate', '--db', db.url]).status, 0);
  const add = stratus(['users', 'add', email, '--password', password, '--db', db.url]);
  assert.equal(add.status, 0, add.stderr);
  const args = ['--db', db.url, '--rate-limits', 'off', '--log-level', 'error'];
  let current: Running = await serveProcess(args);
  const client = () => new Client(current.base, { email, password });

  const data = randomBytes(40 * CHUNK + 777);
  const init = await client().post('initupload/', { name: 'k9', size: data.length, media: 'disk' });
  assert.equal(init.status, 201, init.text);
  const uuid = init.json.objects[0].uuid as string;
  const count = Math.floor(data.length / CHUNK);
  const fieldsOf = (n: number) => ({
    resumableChunkNumber: String(n),
    resumableChunkSize: String(CHUNK),
    resumableTotalSize: String(data.length),
    resumableIdentifier: 'k9',
    resumableFilename: 'k9',
  });
  const bytesOf = (n: number) => data.subarray((n - 1) * CHUNK, n === count ? data.length : n * CHUNK);
  const post = (n: number) => {
    const { body, type } = multipart(fieldsOf(n), bytesOf(n));
    return client().request('POST', `drives/${uuid}/upload/`, { raw: body, headers: { 'content-type': type } });
  };

  // Four clients send the chunks in a shuffled order; the process is killed once a third are answered.
  const order = Array.from({ length: count }, (_, i) => i + 1).sort(() => Math.random() - 0.5);
  const answered = new Set<number>();
  let killed = false;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let n = order.shift(); n !== undefined && !killed; n = order.shift()) {
        try {
          const res = await post(n);
          if (res.status === 200) answered.add(n);
          else assert.ok(res.status >= 500, `chunk ${n}: ${res.status} ${res.text}`);
        } catch (e) {
          if (!connectionLost(e)) throw e;
        }
        if (!killed && answered.size >= count / 3) {
          killed = true;
          current.child.kill('SIGKILL');
        }
      }
    }),
  );
  assert.ok(killed, 'the process was killed mid-upload');
  await current.exited;

  current = await serveProcess(args);
  try {
    assert.equal((await client().get(`drives/${uuid}/`)).json.status, 'uploading');
    let resent = 0;
    for (let n = 1; n <= count; n++) {
      const probe = await client().get(`drives/${uuid}/upload/?${new URLSearchParams(fieldsOf(n))}`);
      if (answered.has(n)) assert.equal(probe.status, 200, `answered chunk ${n} lost`);
      if (probe.status === 200) continue;
      assert.equal(probe.status, 404);
      assert.equal((await post(n)).status, 200);
      resent++;
    }
    assert.ok(resent <= count - answered.size, `${resent} resent, ${answered.size} of ${count} were answered`);
    assert.equal((await client().get(`drives/${uuid}/`)).json.status, 'unmounted');
    assert.equal(sha((await client().get(`drives/${uuid}/download/`)).raw), sha(data));
  } finally {
    current.child.kill('SIGKILL');
    await current.exited;
  }
});
