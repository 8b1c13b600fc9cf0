/**
 * `npx tsx bench/pages.ts`: what one write costs SQLite's disk, page by page. A bench server process on a
 * fresh SQLite file takes the bench's writes (bench/writes.ts: `POST /servers/` with a DHCP NIC, `PUT
 * /servers/<uuid>/` with a new name and meta) one at a time; before each the WAL is checkpointed empty,
 * after it its frames are read back and each page is named by the table or index it belongs to (the
 * `dbstat` table). A commit writes every page it changed to the WAL and syncs it once, so pages per write
 * is what a write costs the disk (and the checkpoint that later copies them into the database file).
 *
 * Then the server's CPU per write (user + system from /proc, as bench/profile.ts): PAGES_CPU_WRITES more of
 * each, without checkpoints between them (a figure that other load on the machine changes less than req/s).
 *
 * Each figure is taken at every concurrency of PAGES_CONCURRENCY (default 1,32): that many writes sent at
 * once on as many connections, the next batch when all are answered. Writes that arrive together share a
 * commit on SQLite (store/group-commit.ts): the pages they change in common are written once; the commits
 * the server made and the writes per commit are printed.
 *
 *   PAGES_WRITES=<n>         writes of each kind measured for pages (default 32 per concurrency; figures are per write)
 *   PAGES_CPU_WRITES=<n>     writes of each kind measured for CPU (default 512)
 *   PAGES_CONCURRENCY=1,32   writes sent at once
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import Database from 'better-sqlite3';
import { cpuMs, startChild } from './children.js';
import { sqliteDatabase } from './database.js';
import { request } from './http.js';
import { makeAccounts, servicesOf } from './seed.js';
import { change, newServer } from './writes.js';
import { Store } from '../src/store/db.js';

/** The page numbers of the WAL's frames (header 32 bytes; each frame a 24-byte header, then the page). */
function walPages(wal: string, pageSize: number): number[] {
  const size = statSync(wal, { throwIfNoEntry: false })?.size ?? 0;
  const pages: number[] = [];
  if (size <= 32) return pages;
  const fd = openSync(wal, 'r');
  try {
    const header = Buffer.alloc(24);
    for (let at = 32; at + 24 + pageSize <= size; at += 24 + pageSize) {
      readSync(fd, header, 0, 24, at);
      pages.push(header.readUInt32BE(0));
    }
  } finally {
    closeSync(fd);
  }
  return pages;
}

async function main(): Promise<void> {
  const writes = Number(process.env.PAGES_WRITES ?? 32);
  const concurrencies = (process.env.PAGES_CONCURRENCY ?? '1,32').split(',').map(Number);
  const db = await sqliteDatabase();
  const store = await Store.open(db.url, { poolSize: 1 });
  const look = new Database(db.url);
  try {
    const accounts = await makeAccounts(servicesOf(store, db.url));
    await store.close();
    const child = await startChild({ mode: 'stratus', db: db.url });
    const json = { ...accounts.writer.headers, 'content-type': 'application/json' };
    const pageSize = look.pragma('page_size', { simple: true }) as number;
    const owners = () => new Map((look.prepare('select pageno, name from dbstat').all() as { pageno: number; name: string }[]).map((r) => [r.pageno, r.name]));
    let n = 0;
    const uuids: string[] = [];
    const post = async () => {
      const r = await request(`${child.base}/api/2.0/servers/`, json, 'POST', newServer(++n));
      if (r.status !== 201) throw new Error(`POST: ${r.status} ${r.body.toString()}`);
      uuids.push((JSON.parse(r.body.toString()) as { objects: { uuid: string }[] }).objects[0].uuid);
    };
    const put = async () => {
      const r = await request(`${child.base}/api/2.0/servers/${uuids[n % uuids.length]}/`, json, 'PUT', change(++n));
      if (r.status !== 200) throw new Error(`PUT: ${r.status} ${r.body.toString()}`);
    };
    const batch = (write: () => Promise<void>, c: number) => Promise.all(Array.from({ length: c }, () => write()));
    const commits = async () => {
      const s = await child.stats();
      return { commits: s.commits ?? 0, grouped: s.grouped ?? 0 };
    };
    const perCommit = (a: { commits: number; grouped: number }, b: { commits: number; grouped: number }) =>
      b.commits > a.commits ? `, ${((b.grouped - a.grouped) / (b.commits - a.commits)).toFixed(1)} writes/commit` : '';
    // Warm: statements compiled, the owner's first rows and counters made.
    for (let i = 0; i < 3; i++) await post();
    await put();
    try {
      for (const c of concurrencies)
        for (const [label, write] of [
          ['POST /servers/', post],
          ['PUT /servers/<uuid>/', put],
        ] as const) {
          const byName = new Map<string, number>();
          let frames = 0;
          let done = 0;
          const g0 = await commits();
          for (; done < writes; done += c) {
            look.pragma('wal_checkpoint(TRUNCATE)');
            await batch(write, c);
            const pages = walPages(`${db.url}-wal`, pageSize);
            frames += pages.length;
            const names = owners();
            for (const p of new Set(pages)) byName.set(names.get(p) ?? `page ${p}`, (byName.get(names.get(p) ?? `page ${p}`) ?? 0) + 1);
          }
          const pages = [...byName.values()].reduce((a, b) => a + b, 0);
          process.stdout.write(
            `${label} (${c} at once): ${(pages / done).toFixed(2)} pages/write (${(frames / done).toFixed(2)} WAL frames${perCommit(g0, await commits())})\n`,
          );
          for (const [name, k] of [...byName.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])))
            process.stdout.write(`  ${(k / done).toFixed(2).padStart(5)}  ${name}\n`);
        }
      const cpuWrites = Number(process.env.PAGES_CPU_WRITES ?? 512);
      for (const c of concurrencies)
        for (const [label, write] of [
          ['POST /servers/', post],
          ['PUT /servers/<uuid>/', put],
        ] as const) {
          const g0 = await commits();
          const c0 = cpuMs(child.pid);
          let done = 0;
          for (; done < cpuWrites; done += c) await batch(write, c);
          const cpu = cpuMs(child.pid) - c0;
          process.stdout.write(
            `${label} (${c} at once): ${((cpu / done) * 1000).toFixed(0)} µs server CPU/write (${done} writes${perCommit(g0, await commits())})\n`,
          );
        }
    } finally {
      await child.close();
    }
  } finally {
    look.close();
    await db.drop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`pages: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = 1;
});
