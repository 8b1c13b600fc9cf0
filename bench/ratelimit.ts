/**
 * `npx tsx bench/ratelimit.ts [sqlite-file|postgres-url]`: what the rate limiter costs per request, for
 * each counter store, measured on the limiter's own request path (RateLimiter.guard with a stub
 * authenticator, so scrypt, HTTP and routing are not part of the number).
 *
 * Each run is N sequential authenticated GETs by one user whose limit is high enough never to refuse, so
 * every request does the full work: window arithmetic, the cached override lookup and one counter `take`.
 * Printed: µs per request for the in-memory counters and for the `rate_counters` table.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { loadConfig } from '../src/config.js';
import { systemClock } from '../src/core/clock.js';
import type { Caller, Services } from '../src/core/context.js';
import { randomIds } from '../src/core/ids.js';
import { MemoryCounters, TableCounters, type CounterStore } from '../src/store/limits/counters.js';
import { RateLimiter } from '../src/http/ratelimit/limiter.js';
import { Store } from '../src/store/db.js';
import { createUser } from '../src/resources/users/users.js';
import { withSimulator } from '../src/sim/index.js';

const N = Number(process.env.N ?? 20_000);

async function measure(services: Services, counters: CounterStore, caller: Caller): Promise<number> {
  const limiter = new RateLimiter(services, [{ method: 'GET', path: null, count: 1e9, per: 'min' }], counters);
  const req = { url: '/api/2.0/tags/', method: 'GET', ip: '127.0.0.1' } as unknown as FastifyRequest;
  const reply = { header: () => reply } as unknown as FastifyReply;
  const auth = async () => caller;
  for (let i = 0; i < 2000; i++) await limiter.guard(req, reply, auth); // warm-up
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await limiter.guard(req, reply, auth);
  return Number(process.hrtime.bigint() - t0) / 1000 / N;
}

async function baseline(caller: Caller): Promise<number> {
  const auth = async () => caller;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await auth();
  return Number(process.hrtime.bigint() - t0) / 1000 / N;
}

const dir = mkdtempSync(join(tmpdir(), 'stratus-rl-'));
const target = process.argv[2] ?? join(dir, 'bench.db');
try {
  const config = loadConfig({ db: target, 'log-level': 'warn' }, {});
  const store = await Store.open(target);
  const services: Services = withSimulator({ store, clock: systemClock, ids: randomIds, config });
  const user = await createUser(services, { email: `rl-${Date.now()}@bench.local`, password: 'x' });
  const caller: Caller = { uuid: user.uuid, email: user.email, state: user.state };
  const base = await baseline(caller);
  const mem = await measure(services, new MemoryCounters(), caller);
  const table = await measure(services, new TableCounters(store.db), caller);
  const tuned = store.dialect === 'postgres' ? TableCounters.postgres(store) : null;
  const tableTuned = tuned ? await measure(services, tuned, caller) : null;
  process.stdout.write(
    `rate limiter cost per request on ${store.dialect} (${store.location}), ${N} requests, sequential:\n` +
      `  bare authenticator call   ${base.toFixed(2)} µs\n` +
      `  memory counters           ${(mem - base).toFixed(2)} µs\n` +
      `  rate_counters table       ${(table - base).toFixed(2)} µs (the store's own connections)\n` +
      (tableTuned === null ? '' : `  rate_counters table       ${(tableTuned - base).toFixed(2)} µs (prepared, no WAL flush wait)\n`),
  );
  await store.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
