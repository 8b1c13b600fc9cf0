/**
 * `npm run bench`: issue 11's figures, each a ratio or multiple of figures measured in the same run.
 *
 * For each store (SQLite always, PostgreSQL when BENCH_PG_URL is set; see bench/options.ts):
 *   1. a throw-away database (bench/database.ts), three users, and Stratus started as its own process
 *      over it (bench/serve-child.ts): the load generator runs here, so it neither shares Stratus's event
 *      loop nor counts in its memory;
 *   2. the measured account seeded to the smallest size (bench/seed.ts), then "fast" (bench/fast.ts: vs a
 *      raw server replaying the same bytes) and the reference "flat" row (bench/flat.ts);
 *   3. the account grown to each further size, "flat" again, with the process's RSS (the memory goal);
 *   4. "writes" (bench/writes.ts) on the largest database.
 * Then drive data, start-up, and the web console's size and first paint (bench/console.ts, headless Chromium);
 * then the tables, the goals met and missed, and one BENCH_JSON line (bench/report.ts).
 *
 * Exits non-zero when a measured run saw a non-2xx status, an error or a timeout; missed goals are
 * printed, not failures.
 */
import { startChild, type Child } from './children.js';
import { postgresDatabase, sqliteDatabase } from './database.js';
import { fastSection, type FastRow } from './fast.js';
import { flatAt, type FlatRow, type MemoryRow } from './flat.js';
import type { Run } from './measure.js';
import { optionsFromEnv, type Options } from './options.js';
import { measureStartup } from './startup.js';
import { canMeasureConsole, consoleBlock, judgeConsole, measureConsole, type ConsoleReport } from './console.js';
import { dataBlock, dataSection, type DataRow } from './data.js';
import { judge, judgeStartup, startupBlock, storeBlock, summaryBlock, type StartupRow, type StoreReport } from './report.js';
import { makeAccounts, seedStart, servicesOf } from './seed.js';
import { writeSection } from './writes.js';
import { mixedBlock, mixedSection, type MixedReport } from './mixed.js';
import { sql } from 'kysely';
import { Store } from '../src/store/db.js';

const progress = (msg: string) => process.stderr.write(`bench: ${msg}\n`);

async function runStore(spec: Options['stores'][number], opts: Options): Promise<StoreReport> {
  const t0 = performance.now();
  const db = spec.engine === 'sqlite' ? await sqliteDatabase() : await postgresDatabase(spec.url);
  let store: Store | undefined;
  let stratus: Child | undefined;
  let uncached: Child | undefined;
  try {
    store = await Store.open(db.url, { poolSize: 4 });
    const accounts = await makeAccounts(servicesOf(store, db.url));
    const pg = store;
    const dbBusy = store.dialect === 'postgres' ? () => postgresBusy(pg) : undefined;
    stratus = await startChild({ mode: 'stratus', db: db.url, dbBusy });
    // A second process keeping no answers makes every answer afresh: flat measures it (making an answer
    // must not cost more in a big account), fast prints both.
    uncached = await startChild({ mode: 'stratus', db: db.url, answerCacheMiB: 0, dbBusy });
    const seeded = await seedStart(store, `${stratus.base}/api/2.0/`, accounts);
    const setupSeconds = (performance.now() - t0) / 1000;

    let fast: FastRow[] = [];
    const flat: FlatRow[] = [];
    const memory: MemoryRow[] = [];
    for (const [i, size] of opts.sizes.entries()) {
      progress(`${spec.engine}: ${size} servers`);
      // Fast runs first, on the smallest account: its minute of load also settles the fresh process and
      // database (JIT, caches, PostgreSQL's writes after the bulk load) before the reference row is taken.
      const at = await flatAt(store, uncached, seeded, accounts, size, opts, async () => {
        if (i > 0) return;
        progress(`${spec.engine}: fast (vs raw replay)`);
        fast = await fastSection(stratus!, uncached!, seeded, accounts, opts);
      });
      flat.push(...at.rows);
      memory.push(at.memory);
    }
    progress(`${spec.engine}: writes`);
    const writes = await writeSection(store, stratus, accounts.writer, opts);
    return { engine: spec.engine, database: db.label, setupSeconds, fast, flat, memory, writes };
  } finally {
    await uncached?.close();
    await stratus?.close();
    await store?.close();
    await db.drop();
  }
}

/**
 * Whether another client backend of the bench database is running a query or sits in a transaction: a
 * request whose client left can still hold a pooled connection for seconds (a 100k-row list), and the
 * next run would queue behind it. This process's own connections are idle while it asks.
 */
async function postgresBusy(store: Store): Promise<boolean> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from pg_stat_activity
    where datname = current_database() and backend_type = 'client backend' and state <> 'idle' and pid <> pg_backend_pid()`.execute(store.db);
  return rows[0].n > 0;
}

/** Every measured run of a store's report, named for the error message. */
function runsOf(r: StoreReport): [string, Run][] {
  return [
    ...r.fast.flatMap((f): [string, Run][] => [
      [`${r.engine} fast stratus ${f.label}`, f.stratus],
      [`${r.engine} fast raw ${f.label}`, f.raw],
    ]),
    ...r.flat.map((f): [string, Run] => [`${r.engine} flat ${f.size} ${f.who} ${f.label}`, f.run]),
    ...r.writes.flatMap((w): [string, Run][] => [
      [`${r.engine} writes stratus ${w.label}`, w.stratus],
      [`${r.engine} writes raw ${w.label}`, w.raw],
    ]),
  ];
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const opts = optionsFromEnv();
  const reports: StoreReport[] = [];
  for (const spec of opts.stores) {
    const r = await runStore(spec, opts);
    reports.push(r);
    process.stdout.write(storeBlock(r, opts).join('\n') + '\n');
  }
  // Drive data: upload and download throughput against a raw node:http, RSS during the upload (BENCH_DATA=0: not).
  const data: DataRow[] = [];
  if (process.env.BENCH_DATA !== '0')
    for (const spec of opts.stores) {
      progress(`${spec.engine}: drive data (upload, download)`);
      const db = spec.engine === 'sqlite' ? await sqliteDatabase() : await postgresDatabase(spec.url);
      try {
        data.push(await dataSection(db, Number(process.env.BENCH_DATA_MIB ?? 1024)));
      } finally {
        await db.drop();
      }
    }
  if (data.length) process.stdout.write(dataBlock(data).join('\n') + '\n');
  // The mixed load, 1 and 2 workers (bench/mixed.ts; BENCH_MIXED=0 leaves it out).
  const mixed: MixedReport[] = [];
  if (process.env.BENCH_MIXED !== '0')
    for (const spec of opts.stores) {
      const m = await mixedSection(process.env.BENCH_QUICK === '1', spec);
      process.stdout.write(mixedBlock(m).join('\n') + '\n');
      mixed.push(m);
    }
  // Start-up last, on a machine no longer busy with the load runs (BENCH_STARTUP=0 leaves it out).
  progress('start-up (spawn to first answer, idle RSS, operator commands)');
  const startup: StartupRow[] | null = process.env.BENCH_STARTUP === '0' ? null : await measureStartup({ pgUrl: process.env.BENCH_PG_URL });
  // The console: its assets' gzip size and first paint in headless Chromium (BENCH_CONSOLE=0 leaves it out).
  const consoleWhy = process.env.BENCH_CONSOLE === '0' ? 'BENCH_CONSOLE=0' : canMeasureConsole() ? null : 'no /usr/bin/chromium';
  if (!consoleWhy) progress('console (size, first paint)');
  const consoleReport: ConsoleReport | null = consoleWhy ? null : await measureConsole();
  const goals = [
    ...reports.flatMap(judge),
    ...mixed.flatMap((m) => m.goals),
    ...judgeStartup(startup ?? []),
    ...(consoleReport ? judgeConsole(consoleReport) : []),
  ];
  const runtimeSeconds = (performance.now() - t0) / 1000;
  const settings = { durationS: opts.durationS, warmupS: opts.warmupS, connections: opts.connections, sizes: opts.sizes };
  process.stdout.write(
    [
      ...startupBlock(startup),
      ...consoleBlock(consoleReport, consoleWhy ?? undefined),
      ...summaryBlock(goals, runtimeSeconds),
      '',
      `BENCH_JSON ${JSON.stringify({ settings, runtimeSeconds, stores: reports, data, startup, console: consoleReport, goals })}`,
    ].join('\n') + '\n',
  );

  const bad = reports.flatMap(runsOf).filter(([, run]) => run.non2xx > 0 || run.errors > 0 || run.warmupBad > 0);
  if (bad.length) {
    const what = bad.map(([name, r]) => `${name} (${r.non2xx} non-2xx ${JSON.stringify(r.statuses)}, ${r.errors} errors, ${r.warmupBad} bad in warm-up)`);
    process.stderr.write(`bench: runs had non-2xx responses or errors: ${what.join('; ')}\n`);
    process.exitCode = 1;
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = 1;
});
