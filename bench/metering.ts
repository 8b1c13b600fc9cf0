/**
 * `npm run bench:metering`: one billing poll (src/billing/engine.ts) over many running servers, as a
 * ratio to one poll of 100 servers in the same run (issue 14: linear, and under 1 s for 10,000 servers
 * across 1,000 accounts). Each account also holds a drive (with an install licence), so a poll meters
 * servers, storage and licences, and every server has a public NIC sending traffic, so it also reads every
 * traffic counter and writes back the readings it billed (tx is charged by growth). The poll runs in one
 * transaction, as the scheduler runs it; the first poll of each size is a warm-up. Half the servers are Intel
 * and the licence is an older one, so the catalogue is the one that prices both (prices-intel.json; the default,
 * the recorded zrh one, prices neither).
 * SQLite always; PostgreSQL too when BENCH_PG_URL is set.
 */
import { randomUUID } from 'node:crypto';
import { assetPath } from '../src/assets.js';
import { billCycle } from '../src/billing/engine.js';
import { nextBoundary } from '../src/billing/cycle.js';
import { createUser } from '../src/resources/users/users.js';
import { metersOf } from '../src/registry.js';
import { Store } from '../src/store/db.js';
import { postgresDatabase, sqliteDatabase, type BenchDatabase } from './database.js';
import { servicesOf } from './seed.js';

const FLAGS = { pricing: assetPath('billing/prices-intel.json') };

const SIZES = [
  { servers: 100, accounts: 10 },
  { servers: 1_000, accounts: 100 },
  { servers: 10_000, accounts: 1_000 },
];

async function seed(store: Store, db: BenchDatabase, servers: number, accounts: number): Promise<void> {
  const s = servicesOf(store, db.url, FLAGS);
  const owners: string[] = [];
  for (let i = 0; i < accounts; i++) owners.push((await createUser(s, { email: `meter-${servers}-${i}@bench.local` })).uuid);
  const now = new Date();
  const since = now.getTime() - 3_600_000;
  await store.transaction(async (tx) => {
    const rows = [];
    for (let i = 0; i < servers; i++) {
      const owner = owners[i % accounts]!;
      rows.push({
        kind: 'servers',
        uuid: randomUUID(),
        owner,
        body: { name: `s${i}`, cpu: 2000, mem: 2 ** 31, cpu_type: i % 2 ? 'intel' : 'amd', status: 'running' },
      });
    }
    for (const owner of owners)
      rows.push({
        kind: 'drives',
        uuid: randomUUID(),
        owner,
        body: {
          name: 'd',
          size: 10 * 2 ** 30,
          storage_type: 'dssd',
          status: 'unmounted',
          licenses: [{ amount: 1, license: { name: 'msft_lwa_00135', type: 'install', user_metric: '' }, user: null }],
        },
      });
    await store.resources.insertMany(tx, now, rows);
    const states = rows
      .filter((r) => r.kind === 'servers')
      .flatMap((r) => [
        { kind: 'servers', uuid: r.uuid, state: JSON.stringify({ active_since: since }) },
        // One public NIC sending since the power-on (sim/traffic.ts).
        { kind: 'traffic', uuid: r.uuid, state: JSON.stringify({ segs: [[since, 0, 1]] }) },
      ]);
    for (let i = 0; i < states.length; i += 500)
      await tx
        .insertInto('sim_state')
        .values(states.slice(i, i + 500))
        .execute();
  });
}

async function pollMs(store: Store, db: BenchDatabase, at: Date): Promise<{ ms: number; entries: number }> {
  const s = servicesOf(store, db.url, FLAGS);
  const t0 = performance.now();
  const out = await store.transaction((tx) => billCycle(s, tx, metersOf(), at));
  return { ms: performance.now() - t0, entries: out.entries };
}

async function runStore(db: BenchDatabase): Promise<void> {
  const store = await Store.open(db.url, { poolSize: 2 });
  try {
    let poll = nextBoundary(new Date());
    let base = 0;
    for (const size of SIZES) {
      // Each size is a fresh set on top of the last: the poll meters everything in the database.
      const total = SIZES.filter((x) => x.servers <= size.servers).reduce((n, x) => n + x.servers, 0);
      await seed(store, db, size.servers, size.accounts);
      await pollMs(store, db, poll); // warm-up: statements compiled, pages cached
      poll = new Date(poll.getTime() + 300_000);
      const best = [];
      for (let i = 0; i < 3; i++) {
        best.push(await pollMs(store, db, poll));
        poll = new Date(poll.getTime() + 300_000);
      }
      const ms = Math.min(...best.map((b) => b.ms));
      if (!base) base = ms / total;
      console.log(
        `${db.engine.padEnd(8)} ${String(total).padStart(6)} running servers: poll ${ms.toFixed(1).padStart(8)} ms, ${best[0]!.entries} ledger entries; per server ${((ms / total) * 1000).toFixed(1)} µs = ${(ms / total / base).toFixed(2)}× the 100-server poll's`,
      );
    }
  } finally {
    await store.close();
    await db.drop();
  }
}

await runStore(await sqliteDatabase());
if (process.env.BENCH_PG_URL) await runStore(await postgresDatabase(process.env.BENCH_PG_URL));
