import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { loadConfig } from '../../src/config.js';
import { AdjustableClock } from '../../src/core/clock.js';
import type { Caller, Services } from '../../src/core/context.js';
import { ApiError } from '../../src/core/errors.js';
import { randomIds } from '../../src/core/ids.js';
import { CompiledQuery, sql } from 'kysely';
import { MemoryCounters, PostgresCounters, TableCounters, type CounterStore } from '../../src/store/limits/counters.js';
import { RateLimiter } from '../../src/http/ratelimit/limiter.js';
import { setAccountLimits } from '../../src/resources/accounts/rate-limits.js';
import { parseRuleList, type Rule } from '../../src/core/rate-rules.js';
import { createUser } from '../../src/resources/users/users.js';
import { Store } from '../../src/store/db.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { withSimulator } from '../../src/sim/index.js';
import { onlyOn } from '../helpers/skips.js';
import { FUTURE_YEAR } from '../helpers/clock.js';

/** The limiter and its counter stores without HTTP: counting semantics, atomicity, pruning, the pre-auth refusal. */
let db: { url: string; drop: () => Promise<void> };
let services: Services;
let clock: AdjustableClock;

before(async () => {
  db = await freshDatabase();
  clock = new AdjustableClock();
  clock.set(new Date(Date.UTC(FUTURE_YEAR, 0, 1, 12, 0, 0)));
  const config = loadConfig({ db: db.url, 'log-level': 'silent' }, {});
  services = withSimulator({ store: await Store.open(db.url, { poolSize: 4 }), clock, ids: randomIds, config });
});
after(async () => {
  await services.store.close();
  await db.drop();
});

/** Every counter store this engine can use: memory always, the table on this engine, and on PostgreSQL the tuned one. */
function stores(): [string, () => CounterStore][] {
  const list: [string, () => CounterStore][] = [
    ['memory', () => new MemoryCounters()],
    ['table (store connections)', () => new TableCounters(services.store.db)],
  ];
  if (engine === 'postgres') list.push(['table (PostgreSQL, counts sent along)', () => TableCounters.postgres(services.store)]);
  return list;
}

let seq = 0;
const key = (name: string) => `${name}-${++seq}|GET|0`;

describe('counter stores', () => {
  for (const [name, make] of stores()) {
    test(`${name}: counts up to the limit, refuses without incrementing, gives back, prunes ended windows`, async () => {
      const c = make();
      try {
        const a = { key: key('a'), limit: 3, expiresAt: 1_000 };
        const b = { key: key('b'), limit: 1, expiresAt: 2_000 };
        assert.deepEqual(await c.take([a, b]), [1, 1]);
        assert.deepEqual(await c.take([a, b]), [2, null]);
        assert.deepEqual(await c.take([a]), [3]);
        assert.deepEqual(await c.take([a]), [null]);
        await c.giveBack([a.key]);
        assert.deepEqual(await c.take([a]), [3]);
        // A raised limit applies at once to the same window.
        assert.deepEqual(await c.take([{ ...a, limit: 5 }]), [4]);
        // a's window ended, b's not yet (earlier tests' rows in the shared table may go too).
        assert.ok((await c.prune(1_000)) >= 1);
        assert.deepEqual(await c.take([a]), [1]);
        assert.deepEqual(await c.take([b]), [null]);
      } finally {
        await c.close();
      }
    });

    test(`${name}: concurrent takes never overdraw a budget`, async () => {
      const c = make();
      try {
        const a = { key: key('race'), limit: 10, expiresAt: Date.now() + 60_000 };
        const b = { key: key('race2'), limit: 25, expiresAt: Date.now() + 60_000 };
        const results = await Promise.all(Array.from({ length: 40 }, (_, i) => c.take(i % 2 ? [a, b] : [b, a])));
        const granted = (k: string) =>
          results.flatMap((r, i) => [(i % 2 ? [a, b] : [b, a]).findIndex((x) => x.key === k)].map((j) => r[j])).filter((n) => n !== null);
        assert.equal(granted(a.key).length, 10);
        assert.deepEqual(
          [...granted(a.key)].sort((x, y) => x! - y!),
          [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        );
        assert.equal(granted(b.key).length, 25);
      } finally {
        await c.close();
      }
    });
  }

  test('memory: a bounded number of windows; past it the oldest is forgotten', async () => {
    const c = new MemoryCounters(3);
    for (const k of ['w1', 'w2', 'w3', 'w4']) await c.take([{ key: k, limit: 1, expiresAt: 10 }]);
    assert.equal(c.size, 3);
    assert.deepEqual(await c.take([{ key: 'w4', limit: 1, expiresAt: 10 }]), [null]);
    assert.deepEqual(await c.take([{ key: 'w1', limit: 1, expiresAt: 10 }]), [1], 'w1 was evicted');
  });

  test("a count's own transaction does not wait for its WAL flush; the store's sessions still do", { skip: onlyOn('postgres') }, async () => {
    const inside = await services.store.db.transaction().execute(async (tx) => {
      await tx.executeQuery(CompiledQuery.raw(PostgresCounters.TAKE, [[key('flush')], [5], [1_000]]));
      return (await sql<{ s: string }>`select current_setting('synchronous_commit') as s`.execute(tx)).rows[0].s;
    });
    assert.equal(inside, 'off');
    // One connection: the one every count went through keeps waiting for the flushes of other writes.
    const one = await Store.open(db.url, { poolSize: 1 });
    try {
      const c = TableCounters.postgres(one);
      for (let i = 0; i < 3; i++) assert.deepEqual(await c.take([{ key: key('session'), limit: 5, expiresAt: 1_000 }]), [1]);
      assert.equal((await sql<{ s: string }>`select current_setting('synchronous_commit') as s`.execute(one.db)).rows[0].s, 'on');
    } finally {
      await one.close();
    }
  });

  test('a count sent along travels with the next statement: one round trip for both', { skip: onlyOn('postgres') }, async () => {
    const c = TableCounters.postgres(services.store);
    const store = services.store;
    const b = { key: key('along'), limit: 2, expiresAt: 1_000 };
    const trips = store.roundTrips;
    const counts = c.takeAlong([b]);
    await store.db.selectFrom('users').select('uuid').limit(1).execute();
    assert.deepEqual(await counts(), [1]);
    assert.equal(store.roundTrips - trips, 1, 'the read carried the count');
    // Nothing to carry it: asking for the counts sends it alone.
    const alone = store.roundTrips;
    assert.deepEqual(await c.takeAlong([b])(), [2]);
    assert.deepEqual(await c.takeAlong([b])(), [null]);
    assert.equal(store.roundTrips - alone, 2);
  });

  test('a count is never carried inside a transaction (a rollback would undo it)', { skip: onlyOn('postgres') }, async () => {
    const c = TableCounters.postgres(services.store);
    const b = { key: key('tx'), limit: 5, expiresAt: 1_000 };
    let counts: (() => Promise<(number | null)[]>) | undefined;
    await assert.rejects(
      services.store.db.transaction().execute(async (tx) => {
        counts = c.takeAlong([b]);
        await tx.selectFrom('users').select('uuid').limit(1).execute();
        throw new Error('rolled back');
      }),
      /rolled back/,
    );
    assert.deepEqual(await counts!(), [1]);
    assert.deepEqual(await c.take([b]), [2], 'the first count survived the rollback');
  });
});

const fakeReq = (method: string, url: string, ip = '10.0.0.1') => ({ method, url, ip }) as unknown as FastifyRequest;
function fakeReply() {
  const headers: Record<string, string> = {};
  const reply = { header: (k: string, v: string) => ((headers[k] = v), reply) } as unknown as FastifyReply;
  return { reply, headers };
}
const status = async (p: Promise<unknown>) => {
  try {
    await p;
    return 200;
  } catch (e) {
    return (e as ApiError).status;
  }
};

describe('RateLimiter', () => {
  const rules = parseRuleList('GET=3/min,POST=2/min,POST:/servers/=3/day') as Rule[];

  test('an address over its budget is refused before authentication runs (no scrypt for a flood)', async () => {
    const limiter = new RateLimiter(services, rules, new MemoryCounters());
    let calls = 0;
    const failing = async (): Promise<Caller> => {
      calls++;
      throw new ApiError('auth', 'bad password');
    };
    const codes = [];
    for (let i = 0; i < 6; i++) codes.push(await status(limiter.guard(fakeReq('GET', '/api/2.0/tags/'), fakeReply().reply, failing)));
    assert.deepEqual(codes, [401, 401, 401, 429, 429, 429]);
    assert.equal(calls, 4, 'the fourth failure finds the budget spent; the fifth and sixth never reach the authenticator');
    // Another address is unaffected; the same address is again admitted in the next window.
    assert.equal(await status(limiter.guard(fakeReq('GET', '/api/2.0/tags/', '10.0.0.2'), fakeReply().reply, failing)), 401);
    clock.advance(60_000);
    assert.equal(await status(limiter.guard(fakeReq('GET', '/api/2.0/tags/'), fakeReply().reply, failing)), 401);
  });

  test('public routes count against the address; success headers show the tightest budget', async () => {
    const limiter = new RateLimiter(services, rules, new MemoryCounters());
    const seen = [];
    for (let i = 0; i < 2; i++) {
      const { reply, headers } = fakeReply();
      await limiter.guard(fakeReq('POST', '/api/2.0/servers/', '10.0.0.9'), reply, null);
      seen.push(headers['X-RateLimit-Remaining']);
    }
    // POST=2/min is tighter than servers=3/day: 1 then 0 left, then refused.
    assert.deepEqual(seen, ['1', '0']);
    assert.equal(await status(limiter.guard(fakeReq('POST', '/api/2.0/servers/', '10.0.0.9'), fakeReply().reply, null)), 429);
    clock.advance(60_000);
    const { reply, headers } = fakeReply();
    await limiter.guard(fakeReq('POST', '/api/2.0/servers/', '10.0.0.9'), reply, null);
    assert.equal(headers['X-RateLimit-Limit'], '3', 'now the day budget is the tightest');
    assert.equal(headers['X-RateLimit-Remaining'], '0');
  });

  test('a request refused by one rule does not consume the others', async () => {
    const limiter = new RateLimiter(services, rules, new MemoryCounters());
    const user = await createUser(services, { email: `giveback-${Date.now()}@example.com`, password: 'x' });
    const auth = async (): Promise<Caller> => ({ uuid: user.uuid, email: user.email, state: 'REGULAR' });
    const post = (path: string) => status(limiter.guard(fakeReq('POST', path), fakeReply().reply, auth));
    assert.equal(await post('/api/2.0/servers/'), 200);
    assert.equal(await post('/api/2.0/servers/'), 200);
    // Minute budget spent: these are refused and must not eat the day budget.
    for (let i = 0; i < 5; i++) assert.equal(await post('/api/2.0/servers/'), 429);
    clock.advance(60_000);
    assert.equal(await post('/api/2.0/servers/'), 200, 'third of three per day');
    assert.equal(await post('/api/2.0/servers/'), 429, 'day budget spent');
    assert.equal(await post('/api/2.0/tags/'), 200, 'the refusal by the day rule did not consume the minute budget');
  });

  test('an account override is read once and forgotten when changed in this process', async () => {
    const limiter = new RateLimiter(services, rules, new MemoryCounters());
    const user = await createUser(services, { email: `override-${Date.now()}@example.com`, password: 'x' });
    assert.equal((await limiter.rulesFor(user.uuid)).rules.length, 3);
    await setAccountLimits(services, user.email, 'GET=50/min,POST=off');
    assert.equal(
      (await limiter.rulesFor(user.uuid)).rules.map((r) => `${r.method}${r.path ?? ''}=${r.count}/${r.per}`).join(','),
      'GET=50/min,POST/servers/=3/day',
    );
    await setAccountLimits(services, user.email, 'off');
    assert.equal((await limiter.rulesFor(user.uuid)).rules.length, 0);
    await setAccountLimits(services, user.email, null);
    assert.equal((await limiter.rulesFor(user.uuid)).rules.length, 3);
    // A hand-edited, unreadable override falls back to the deployment rules instead of failing requests.
    await services.store.db.insertInto('rate_limit_overrides').values({ user_uuid: user.uuid, rules: 'GET=lots', updated_at: 'x' }).execute();
    clock.advance(5_000);
    assert.equal((await limiter.rulesFor(user.uuid)).rules.length, 3);
  });
});
