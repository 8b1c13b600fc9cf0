/**
 * Drive data throughput (issue 27): a plain upload (`POST drives/upload/`, the image as the body) and its
 * download (`GET drives/<uuid>/download/`) through Stratus, against a raw `node:http` process that writes the
 * same bytes to a file and reads them back; and the resident memory of the Stratus process while the upload
 * runs (sampled from /proc), which must stay bounded whatever the image size.
 *
 * The image is BENCH_DATA_MIB MiB (default 1024) of distinct 64 KiB blocks (a random buffer with a counter
 * in each block), streamed from memory by the client, so no block is deduplicated away. Alone:
 * `npx tsx bench/data.ts`; `npm run bench` runs it per store after the load sections (BENCH_DATA=0: not).
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../src/store/db.js';
import { startChild } from './children.js';
import { sqliteDatabase, postgresDatabase, type BenchDatabase } from './database.js';
import { makeAccounts, servicesOf } from './seed.js';

const MiB = 1024 * 1024;
const BLOCK = 64 * 1024;

export interface DataRow {
  engine: string;
  mib: number;
  uploadMiBs: number;
  downloadMiBs: number;
  rawUploadMiBs: number;
  rawDownloadMiBs: number;
  /** Stratus's RSS before the upload and its peak while it ran (MiB). */
  rssBeforeMiB: number;
  rssPeakMiB: number;
}

/** `mib` MiB of distinct blocks, produced piece by piece (the client holds one 4 MiB piece at a time). */
function* image(mib: number): Generator<Buffer> {
  const base = randomBytes(4 * MiB);
  let block = 0;
  for (let sent = 0; sent < mib * MiB; sent += base.length) {
    const piece = Buffer.from(base);
    for (let at = 0; at < piece.length; at += BLOCK) piece.writeUInt32BE(block++, at);
    yield piece;
  }
}

function upload(url: string, headers: Record<string, string>, mib: number): Promise<{ status: number; text: string; seconds: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'POST', headers: { ...headers, 'content-type': 'application/octet-stream', 'content-length': String(mib * MiB) } },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(parts).toString(), seconds: (performance.now() - t0) / 1000 }));
      },
    );
    req.on('error', reject);
    const pieces = image(mib);
    const pump = () => {
      for (let p = pieces.next(); !p.done; p = pieces.next()) if (!req.write(p.value)) return void req.once('drain', pump);
      req.end();
    };
    pump();
  });
}

function download(url: string, headers: Record<string, string>): Promise<{ status: number; bytes: number; seconds: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => resolve({ status: res.statusCode!, bytes, seconds: (performance.now() - t0) / 1000 }));
      })
      .on('error', reject);
  });
}

/** Resident memory of a process now (MiB, from /proc; 0 elsewhere). */
function rssMiB(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** The baseline: a bare node:http process writing a POST's body to a file and answering GET with it. */
const RAW = `
const http = require('node:http'), fs = require('node:fs'), path = require('node:path');
const file = path.join(process.argv[1], 'image.raw');
const server = http.createServer((req, res) => {
  if (req.method === 'POST') { const out = fs.createWriteStream(file); req.pipe(out); out.on('finish', () => res.end('ok')); return; }
  const size = fs.statSync(file).size;
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
  fs.createReadStream(file).pipe(res);
});
server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
process.on('disconnect', () => process.exit(0));
`;

async function rawBaseline(mib: number): Promise<{ up: number; down: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-raw-'));
  const proc = spawn(process.execPath, ['-e', RAW, dir], { stdio: ['ignore', 2, 2, 'ipc'] });
  try {
    const { port } = await new Promise<{ port: number }>((resolve) => proc.once('message', (m) => resolve(m as { port: number })));
    const up = await upload(`http://127.0.0.1:${port}/`, {}, mib);
    const down = await download(`http://127.0.0.1:${port}/`, {});
    return { up: mib / up.seconds, down: mib / down.seconds };
  } finally {
    proc.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function dataSection(db: BenchDatabase, mib: number): Promise<DataRow> {
  const store = await Store.open(db.url, { poolSize: 2 });
  const accounts = await makeAccounts(servicesOf(store, db.url));
  await store.close();
  const stratus = await startChild({ mode: 'stratus', db: db.url });
  try {
    const headers = accounts.solo.headers;
    const rssBeforeMiB = rssMiB(stratus.pid);
    let peak = rssBeforeMiB;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(stratus.pid))), 50);
    const up = await upload(`${stratus.base}/api/2.0/drives/upload/`, headers, mib);
    clearInterval(sampler);
    if (up.status !== 201) throw new Error(`upload answered ${up.status}: ${up.text}`);
    const down = await download(`${stratus.base}/api/2.0/drives/${up.text.trim()}/download/`, headers);
    if (down.status !== 200 || down.bytes !== mib * MiB) throw new Error(`download answered ${down.status} with ${down.bytes} bytes`);
    const raw = await rawBaseline(mib);
    return {
      engine: db.engine,
      mib,
      uploadMiBs: mib / up.seconds,
      downloadMiBs: mib / down.seconds,
      rawUploadMiBs: raw.up,
      rawDownloadMiBs: raw.down,
      rssBeforeMiB,
      rssPeakMiB: peak,
    };
  } finally {
    await stratus.close();
  }
}

export function dataBlock(rows: DataRow[]): string[] {
  const f = (n: number) => n.toFixed(1);
  return [
    '',
    'Drive data: plain upload and download of one image, MiB/s (raw: node:http writing the bytes to a file), Stratus RSS during the upload',
    ...rows.map(
      (r) =>
        `  ${r.engine.padEnd(8)} ${r.mib} MiB  upload ${f(r.uploadMiBs)} (raw ${f(r.rawUploadMiBs)}, ${f((100 * r.uploadMiBs) / r.rawUploadMiBs)}%)  ` +
        `download ${f(r.downloadMiBs)} (raw ${f(r.rawDownloadMiBs)}, ${f((100 * r.downloadMiBs) / r.rawDownloadMiBs)}%)  RSS ${f(r.rssBeforeMiB)} -> peak ${f(r.rssPeakMiB)} MiB`,
    ),
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const mib = Number(process.env.BENCH_DATA_MIB ?? 1024);
  const rows: DataRow[] = [];
  for (const make of [() => sqliteDatabase(), ...(process.env.BENCH_PG_URL ? [() => postgresDatabase(process.env.BENCH_PG_URL!)] : [])]) {
    const db = await make();
    try {
      rows.push(await dataSection(db, mib));
    } finally {
      await db.drop();
    }
  }
  process.stdout.write(dataBlock(rows).join('\n') + '\n');
}
