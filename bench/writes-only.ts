/**
 * `npx tsx bench/writes-only.ts`: the bench's "writes" rows alone (bench/writes.ts: POST and PUT of servers
 * and their ratio to a raw replay), on a fresh database, without the read sections before them. The same
 * knobs as `npm run bench` (BENCH_DURATION, BENCH_PG_URL, BENCH_SQLITE=0); BENCH_REPEAT=<n> runs it n times.
 */
import { startChild } from './children.js';
import { postgresDatabase, sqliteDatabase } from './database.js';
import { optionsFromEnv } from './options.js';
import { makeAccounts, servicesOf } from './seed.js';
import { writeSection } from './writes.js';
import { Store } from '../src/store/db.js';

async function main(): Promise<void> {
  const opts = optionsFromEnv();
  const repeat = Number(process.env.BENCH_REPEAT ?? 1);
  for (const spec of opts.stores) {
    const db = spec.engine === 'sqlite' ? await sqliteDatabase() : await postgresDatabase(spec.url);
    const store = await Store.open(db.url, { poolSize: 4 });
    try {
      const accounts = await makeAccounts(servicesOf(store, db.url));
      const stratus = await startChild({ mode: 'stratus', db: db.url });
      try {
        for (let i = 0; i < repeat; i++)
          for (const row of await writeSection(store, stratus, accounts.writer, opts))
            process.stdout.write(
              `${spec.engine} ${row.label.padEnd(22)} ${row.stratus.reqPerSec.toFixed(0).padStart(6)} req/s (raw ${row.raw.reqPerSec.toFixed(0)})  ratio ${row.ratio.toFixed(3)}  ${row.stratus.statementsPerRequest?.toFixed(2)} stmts/req  ${row.stratus.roundTripsPerRequest?.toFixed(2)} trips/req  p99 ${row.stratus.p99Ms} ms\n`,
            );
      } finally {
        await stratus.close();
      }
    } finally {
      await store.close();
      await db.drop();
    }
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`writes-only: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = 1;
});
