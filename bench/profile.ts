/**
 * `npx tsx bench/profile.ts`: where a made-afresh answer's CPU goes. Seeds the bench's accounts on a
 * throw-away database (SQLite, or PostgreSQL with BENCH_PG_URL and BENCH_SQLITE=0), starts Stratus
 * keeping no answers under `node --cpu-prof`, loads one URL set with autocannon, and prints the
 * functions with the most self time (the profile file stays in the printed folder for DevTools).
 *
 *   PROFILE_WHAT=detail|list|single|tags|capabilities|post|put   (default detail)
 *   PROFILE_SECONDS=<s>                                           (default 5)
 *   PROFILE_LIMITED=1   the accounts are counted against limits too high to reach, instead of exempt: the
 *                       rate limiter's counting is part of what is measured (its round trip on PostgreSQL)
 *
 * Per answer it prints server CPU, read/write system calls, statements and round trips (statements waited
 * for: on PostgreSQL those sent ahead or along travel with the next one, store/pg-client.ts).
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuMs, startChild } from './children.js';
import { postgresDatabase, sqliteDatabase } from './database.js';
import { measure, type Load } from './measure.js';
import { optionsFromEnv } from './options.js';
import { makeAccounts, seedStart, servicesOf } from './seed.js';
import { Store } from '../src/store/db.js';
import { setAccountLimits } from '../src/resources/accounts/rate-limits.js';

/** Every rule of the default table, overridden with a count no load reaches (PROFILE_LIMITED). */
const UNREACHABLE_LIMITS = 'GET=1000000000/min,POST=1000000000/min,POST:/servers/=1000000000/day,PUT=1000000000/min,DELETE=1000000000/min';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount: number;
  children?: number[];
}

function top(file: string, n = 40): string[] {
  const prof = JSON.parse(readFileSync(file, 'utf8')) as { nodes: Node[]; samples: number[] };
  const total = prof.samples.length;
  const self = new Map<string, number>();
  for (const node of prof.nodes) {
    const f = node.callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + node.hitCount);
  }
  return [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${((100 * v) / total).toFixed(1).padStart(5)}%  ${k}`);
}

/** Read and write system calls of the process so far (Linux: /proc/<pid>/io): a count that load does not change. */
export function syscalls(pid: number): { reads: number; writes: number } {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)`, 'm').exec(io)?.[1] ?? NaN);
  return { reads: field('syscr'), writes: field('syscw') };
}

async function main(): Promise<void> {
  const opts = optionsFromEnv();
  const spec = opts.stores[0];
  const what = process.env.PROFILE_WHAT ?? 'detail';
  const seconds = Number(process.env.PROFILE_SECONDS ?? 5);
  const db = spec.engine === 'sqlite' ? await sqliteDatabase() : await postgresDatabase(spec.url);
  const store = await Store.open(db.url, { poolSize: 4 });
  const dir = mkdtempSync(join(tmpdir(), 'stratus-prof-'));
  try {
    const accounts = await makeAccounts(servicesOf(store, db.url));
    if (process.env.PROFILE_LIMITED === '1')
      for (const a of Object.values(accounts)) await setAccountLimits(servicesOf(store, db.url), a.email, UNREACHABLE_LIMITS);
    const seeder = await startChild({ mode: 'stratus', db: db.url });
    const seeded = await seedStart(store, `${seeder.base}/api/2.0/`, accounts);
    await seeder.close();
    const h = accounts.solo.headers;
    let n = 0;
    const loads: Record<string, Load> = {
      detail: { path: '/api/2.0/servers/detail/?limit=20', headers: h },
      list: { path: '/api/2.0/servers/?limit=20', headers: h },
      single: { path: `/api/2.0/servers/${seeded.solo.server}/`, headers: h },
      tags: { path: '/api/2.0/tags/?limit=20', headers: h },
      capabilities: { path: '/api/2.0/capabilities/', headers: h },
      shared: { path: '/api/2.0/servers/detail/?limit=20', headers: accounts.caller.headers },
      post: {
        path: '/api/2.0/servers/',
        headers: accounts.writer.headers,
        method: 'POST',
        body: {},
        vary: () => ({ body: { name: `p-${++n}`, cpu: 1000, mem: 1024 ** 3, vnc_password: 'x', nics: [{ ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' }] } }),
      },
      put: {
        path: `/api/2.0/servers/${seeded.server}/`,
        headers: accounts.caller.headers,
        method: 'PUT',
        body: {},
        vary: () => ({ body: { name: `r-${++n}`, meta: { revision: String(n) } } }),
      },
    };
    // PROFILE_WHAT may name several loads (comma-separated): each gets its own server process and profile.
    // PROFILE_KEPT=1: the server keeps whole answers (its default) instead of making each afresh.
    for (const one of what.split(',')) {
      const child = await startChild({
        mode: 'stratus',
        db: db.url,
        ...(process.env.PROFILE_KEPT === '1' ? {} : { answerCacheMiB: 0 }),
        execArgv: process.env.PROFILE_CPU === '0' ? [] : ['--cpu-prof', `--cpu-prof-dir=${dir}/${one}`],
      });
      // CPU time per answer (user + system, from /proc): unlike req/s it holds on a machine busy with other work.
      const [cpu0, io0, n0] = [cpuMs(child.pid), syscalls(child.pid), (await child.stats()).answered];
      const run = await measure(child, loads[one], { durationS: seconds, warmupS: 1, connections: 10 });
      const [cpu1, io1, n1] = [cpuMs(child.pid), syscalls(child.pid), (await child.stats()).answered];
      await child.close();
      process.stdout.write(
        `${one} (${spec.engine}): ${(((cpu1 - cpu0) / (n1 - n0)) * 1000).toFixed(0)} µs CPU/answer, ${((io1.writes - io0.writes) / (n1 - n0)).toFixed(1)} write + ${((io1.reads - io0.reads) / (n1 - n0)).toFixed(1)} read syscalls/answer, ${run.reqPerSec.toFixed(0)} req/s, p99 ${run.p99Ms} ms, ${run.statementsPerRequest?.toFixed(1)} stmts/req, ${run.roundTripsPerRequest?.toFixed(2)} trips/req, non2xx ${run.non2xx}\n`,
      );
      const file = process.env.PROFILE_CPU === '0' ? undefined : readdirSync(join(dir, one)).find((f) => f.endsWith('.cpuprofile'));
      if (file) process.stdout.write(`${join(dir, one, file)}\n${top(join(dir, one, file)).join('\n')}\n`);
    }
  } finally {
    await store.close();
    // PROFILE_KEEP=1: leave the database for a closer look (its place is printed).
    if (process.env.PROFILE_KEEP === '1') process.stdout.write(`kept ${db.url}\n`);
    else await db.drop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`profile: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = 1;
});
