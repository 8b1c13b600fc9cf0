/**
 * `BENCH_PG_URL=… npx tsx bench/write-waits.ts`: what PostgreSQL writes wait on. Runs a fixed number of
 * `POST /servers/` and then of `PUT /servers/<uuid>/` (WAITS_COUNT, default 400 each) from WAITS_CONCURRENCY
 * clients (default 10) of one account against a Stratus process, and prints per write:
 * - statements and round trips (the store's counters), commits (the group commit's, when it has one);
 * - WAL records, bytes, writes and syncs (pg_stat_wal, PostgreSQL 15: cluster-wide, so the commits of other
 *   databases in the same window are printed beside it: they should be ~0);
 * - server and backend CPU µs (from /proc: load-independent enough to compare A/B in alternation);
 * - what the server's backends were doing, sampled every ~2 ms from pg_stat_activity: state and
 *   wait_event_type/wait_event (Lock: row or transaction locks, IO WALSync: the commit's flush, Client: a
 *   round trip to Stratus), as shares of the samples of backends in a transaction or running.
 * WAITS_REPEAT=<n> repeats both runs n times on the same server process.
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { cpuMsOf, startChild, type Child } from './children.js';
import { postgresDatabase } from './database.js';
import { request } from './http.js';
import { makeAccounts, servicesOf, type Account } from './seed.js';
import { change, newServer } from './writes.js';
import { Store } from '../src/store/db.js';

const COUNT = Number(process.env.WAITS_COUNT ?? 400);
const CONCURRENCY = Number(process.env.WAITS_CONCURRENCY ?? 10);

/** utime+stime of `pids`, µs. */
const cpuUs = (pids: number[]) => cpuMsOf(pids) * 1000;

interface Counters {
  wal: { records: number; bytes: number; writes: number; syncs: number };
  otherCommits: number;
}

async function counters(c: pg.Client): Promise<Counters> {
  const w = (await c.query(`select wal_records::float8 r, wal_bytes::float8 b, wal_write::float8 w, wal_sync::float8 s from pg_stat_wal`)).rows[0];
  // Statistics are reported by backends when idle; reading them in a fresh snapshot.
  await c.query('select pg_stat_clear_snapshot()');
  const o = (await c.query(`select coalesce(sum(xact_commit), 0)::float8 n from pg_stat_database where datname <> current_database()`)).rows[0];
  return { wal: { records: w.r, bytes: w.b, writes: w.w, syncs: w.s }, otherCommits: o.n };
}

async function run(label: string, stratus: Child, send: (i: number) => Promise<void>, admin: pg.Client, pids: number[]): Promise<void> {
  const waits = new Map<string, number>();
  let samples = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const { rows } = await admin.query<{ k: string }>(
        `select coalesce(wait_event_type || ':' || wait_event, 'CPU') || ' (' || state || ')'
           || case when wait_event_type = 'Lock' then ' ' || regexp_replace(left(regexp_replace(query, '\\s+', ' ', 'g'), 70), '^/\\* shape ([^ ]*) \\*/.*$', 'shape \\1') else '' end as k from pg_stat_activity
         where pid = any($1::int[]) and state in ('active', 'idle in transaction', 'idle in transaction (aborted)')`,
        [pids],
      );
      samples++;
      for (const r of rows) waits.set(r.k, (waits.get(r.k) ?? 0) + 1);
      await new Promise((r) => setTimeout(r, 2));
    }
  })();
  const s0 = await stratus.stats();
  const k0 = await counters(admin);
  const cpu0 = [cpuUs([stratus.pid]), cpuUs(pids)];
  const t0 = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < COUNT) await send(next++);
    }),
  );
  const ms = Date.now() - t0;
  await stratus.drain();
  const cpu1 = [cpuUs([stratus.pid]), cpuUs(pids)];
  sampling = false;
  await sampler;
  // pg_stat_wal is updated by backends when they go idle; give them a moment.
  await new Promise((r) => setTimeout(r, 600));
  const k1 = await counters(admin);
  const s1 = await stratus.stats();
  const per = (a: number | null, b: number | null) => (a === null || b === null ? 'n/a' : ((b - a) / COUNT).toFixed(2));
  const busy = [...waits.values()].reduce((a, b) => a + b, 0);
  process.stdout.write(
    `${label}: ${COUNT} writes, ${CONCURRENCY} at a time, ${((COUNT * 1000) / ms).toFixed(0)} writes/s (load: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')})\n` +
      `  per write: statements ${per(s0.statements, s1.statements)}, round trips ${per(s0.roundTrips, s1.roundTrips)}, commits ${per(s0.commits, s1.commits)}\n` +
      `  per write: WAL records ${per(k0.wal.records, k1.wal.records)}, bytes ${per(k0.wal.bytes, k1.wal.bytes)}, writes ${per(k0.wal.writes, k1.wal.writes)}, syncs ${per(k0.wal.syncs, k1.wal.syncs)}` +
      ` (other databases' commits meanwhile: ${k1.otherCommits - k0.otherCommits})\n` +
      `  per write: CPU server ${((cpu1[0] - cpu0[0]) / COUNT).toFixed(0)} µs, backends ${((cpu1[1] - cpu0[1]) / COUNT).toFixed(0)} µs\n` +
      `  backends busy (in a transaction or running), mean ${(busy / samples).toFixed(2)} of ${pids.length}; of those samples:\n` +
      [...waits.entries()]
        .sort((a, b) => b[1] - a[1])
        .map(([k, n]) => `    ${((100 * n) / busy).toFixed(1).padStart(5)}%  ${k}\n`)
        .join(''),
  );
}

async function main(): Promise<void> {
  const base = process.env.BENCH_PG_URL;
  if (!base) throw new Error('BENCH_PG_URL is required');
  const db = await postgresDatabase(base);
  const store = await Store.open(db.url, { poolSize: 2 });
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    const accounts = await makeAccounts(servicesOf(store, db.url));
    const writer: Account = accounts.writer;
    const stratus = await startChild({ mode: 'stratus', db: db.url });
    try {
      const api = `${stratus.base}/api/2.0/servers/`;
      // Warm the pool: every connection opened before the backends are listed.
      await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => request(api, writer.headers, 'POST', newServer(-1 - i))));
      await stratus.drain();
      const pids = (
        await admin.query<{ pid: number }>(
          `select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()`,
        )
      ).rows.map((r) => r.pid);
      const ok = (status: number, want: number, what: string) => {
        if (status !== want) throw new Error(`${what} answered ${status}`);
      };
      for (let rep = 0; rep < Number(process.env.WAITS_REPEAT ?? 1); rep++) {
        const made: string[] = [];
        await run(
          'POST /servers/',
          stratus,
          async (i) => {
            const r = await request(api, writer.headers, 'POST', newServer(i));
            ok(r.status, 201, 'POST');
            made.push((JSON.parse(r.body.toString('utf8')) as { objects: { uuid: string }[] }).objects[0].uuid);
          },
          admin,
          pids,
        );
        await run(
          'PUT /servers/<uuid>/',
          stratus,
          async (i) => {
            const r = await request(`${api}${made[i % made.length]}/`, writer.headers, 'PUT', change(i));
            ok(r.status, 200, 'PUT');
          },
          admin,
          pids,
        );
      }
    } finally {
      await stratus.close();
    }
  } finally {
    await admin.end();
    await store.close();
    await db.drop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`write-waits: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = 1;
});
