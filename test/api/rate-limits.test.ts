import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { f } from '../../src/core/fields.js';
import { notFound } from '../../src/core/errors.js';
import { registry } from '../../src/registry.js';
import type { CollectionDecl, ResourceDecl } from '../../src/core/resource.js';
import { MemoryCounters } from '../../src/store/limits/counters.js';
import { setAccountLimits } from '../../src/resources/accounts/rate-limits.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { Client, type Response } from '../helpers/client.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { cli } from '../helpers/cli.js';
import { serveProcess } from '../helpers/process.js';
import { onlyOn } from '../helpers/skips.js';
import { FrozenClock, FUTURE_YEAR } from '../helpers/clock.js';

/**
 * Rate limits through the real HTTP server: the spec's table as the default, each row proven with the
 * injected clock (windows are fixed, aligned to it), the 429 shape, per-account overrides, per-address
 * limits for unauthenticated requests, the operator command, and two processes sharing one PostgreSQL.
 */

/** A valid server definition for POST /servers/. */
const SERVER = { cpu: 1000, mem: 536870912, vnc_password: 'rate-limit' };

/** `/servers/` exists before the servers kind does: a stand-in collection, so POST /servers/ reaches the limiter. */
const standInServers: CollectionDecl = {
  shape: 'collection',
  kind: 'servers',
  flavour: 'custom',
  fields: { name: f.string({ required: true }), resource_uri: f.string({ readonly: true }), uuid: f.string({ readonly: true }) },
  defaultLimit: 20,
  listMethods: ['get', 'post'],
  detailMethods: ['get'],
  filtering: {},
  service: {
    list: async () => ({ total: 0, objects: [] }),
    get: async (_ctx, uuid) => {
      throw notFound(uuid);
    },
    create: async (_ctx, inputs) =>
      inputs.map((i) => {
        const uuid = randomUUID();
        return { name: i.name, uuid, resource_uri: `/api/2.0/servers/${uuid}/` };
      }),
  },
};
const kinds: ResourceDecl[] = registry.some((k) => k.kind === 'servers') ? registry : [...registry, standInServers];

/** Fixed windows are aligned to the clock: every test starts at the top of its own minute, far from midnight. */
let minute = 0;
function startOfFreshMinute(srv: TestServer, span = 1): void {
  srv.clock.set(new Date(Date.UTC(FUTURE_YEAR, 0, 1, 8, minute, 0)));
  minute += span;
}

/** Runs `n` requests, `parallel` at a time, and answers their statuses in order. */
async function run(n: number, request: (i: number) => Promise<Response>, parallel = 10): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i += parallel) {
    const batch = await Promise.all(Array.from({ length: Math.min(parallel, n - i) }, (_, j) => request(i + j)));
    statuses.push(...batch.map((r) => r.status));
  }
  return statuses;
}

const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;

/** The 429 shape: Retry-After in whole seconds within the window, the API's error array. */
function assertTooMany(res: Response, message: RegExp, maxWait = 60): number {
  assert.equal(res.status, 429, res.text);
  const wait = Number(res.headers['retry-after']);
  assert.ok(Number.isInteger(wait) && wait >= 1 && wait <= maxWait, `Retry-After ${res.headers['retry-after']}`);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  assert.ok(Array.isArray(res.json) && res.json.length === 1, res.text);
  assert.deepEqual(Object.keys(res.json[0]).sort(), ['error_message', 'error_point', 'error_type']);
  assert.equal(res.json[0].error_type, 'permission');
  assert.equal(res.json[0].error_point, null);
  assert.match(res.json[0].error_message, message);
  assert.match(res.json[0].error_message, new RegExp(`retry in ${wait} seconds`));
  assert.equal(res.headers['x-ratelimit-remaining'], '0');
  return wait;
}

describe('the default table (the spec\'s "Limits")', () => {
  let srv: TestServer;
  before(async () => {
    // A clock that moves only when a test moves it: windows, Reset and Retry-After are exact.
    srv = await startServer({ 'rate-limits': 'default' }, kinds, { clock: new FrozenClock() });
  });
  after(() => srv.close());

  test('GET: 100 per minute per user (HEAD counts as GET; OPTIONS never limited); the next window admits again', async () => {
    const u = await srv.user();
    const other = await srv.user();
    startOfFreshMinute(srv);
    srv.clock.advance(15_000); // 45 s left in this window
    const first = await u.get('tags/');
    assert.equal(first.status, 200);
    assert.equal(first.headers['x-ratelimit-limit'], '100');
    assert.equal(first.headers['x-ratelimit-remaining'], '99');
    assert.equal(first.headers['x-ratelimit-reset'], '45');
    const statuses = await run(99, (i) => u.request(i % 2 ? 'HEAD' : 'GET', 'profile/'));
    assert.equal(count(statuses, 200), 99, statuses.join());

    const refused = await u.get('tags/');
    const wait = assertTooMany(refused, /at most 100 GET requests per minute/);
    assert.equal(wait, 45, 'Retry-After: the rest of the window');
    assert.equal((await u.request('HEAD', 'tags/')).status, 429);
    assert.equal((await u.request('OPTIONS', 'tags/')).status, 200, 'OPTIONS is never limited');
    assert.equal((await u.put('profile/', {})).status, 200, 'PUT has its own budget');
    assert.equal((await other.get('tags/')).status, 200, 'limits are per user');

    srv.clock.advance(wait * 1000);
    const again = await u.get('tags/');
    assert.equal(again.status, 200, 'a new window');
    assert.equal(again.headers['x-ratelimit-remaining'], '99');
  });

  test('POST: 100 per minute per user', async () => {
    const u = await srv.user();
    startOfFreshMinute(srv);
    // Refused bodies still count: the limit is checked before the body is even read.
    const statuses = await run(100, (i) => (i < 5 ? u.post('tags/', { name: `t${i}` }) : u.post('tags/', { bad: 'body' })));
    assert.equal(count(statuses, 201) + count(statuses, 400), 100, statuses.join());
    assertTooMany(await u.post('tags/', { name: 'one too many' }), /at most 100 POST requests per minute/);
    assert.equal((await u.get('tags/?limit=0')).json.meta.total_count, 5, 'the refused request created nothing');
    srv.clock.advance(60_000);
    assert.equal((await u.post('tags/', { name: 'next minute' })).status, 201);
  });

  test('PUT: 100 per minute per user', async () => {
    const u = await srv.user();
    startOfFreshMinute(srv);
    const statuses = await run(100, (i) => u.put('profile/', { first_name: `n${i}` }));
    assert.equal(count(statuses, 200), 100, statuses.join());
    assertTooMany(await u.put('profile/', { first_name: 'late' }), /at most 100 PUT requests per minute/);
    assert.notEqual((await u.get('profile/')).json.first_name, 'late');
  });

  test('DELETE: 1000 per minute per user', async () => {
    const u = await srv.user();
    startOfFreshMinute(srv);
    const statuses = await run(1000, () => u.delete(`tags/${randomUUID()}/`), 16);
    assert.equal(count(statuses, 404), 1000, 'every delete reached the route');
    assertTooMany(await u.delete(`tags/${randomUUID()}/`), /at most 1000 DELETE requests per minute/);
    srv.clock.advance(60_000);
    assert.equal((await u.delete(`tags/${randomUUID()}/`)).status, 404);
  });

  test('POST under /servers/: 500 per day per user, on top of (and sharing) the POST-per-minute budget', async () => {
    const u = await srv.user();
    startOfFreshMinute(srv, 10);
    for (let m = 0; m < 5; m++) {
      const statuses = await run(100, (i) => u.post(i % 2 ? 'servers/' : '/api/2.0/servers', { ...SERVER, name: `s${m}-${i}` }));
      assert.equal(count(statuses, 201), 100, statuses.join());
      if (m === 0) {
        // The 100 POSTs to /servers/ spent this minute's POST budget for every path.
        assertTooMany(await u.post('tags/', { name: 'x' }), /at most 100 POST requests per minute/);
        assertTooMany(await u.post('servers/', { ...SERVER, name: 'x' }), /at most 100 POST requests per minute/);
      }
      srv.clock.advance(60_000);
    }
    // 500 today: the day rule refuses, with Retry-After up to midnight UTC.
    const refused = await u.post('servers/', { ...SERVER, name: 'five hundred and one' });
    const wait = assertTooMany(refused, /at most 500 POST requests to \/servers\/ per day/, 86_400);
    const untilMidnight = (Date.UTC(FUTURE_YEAR, 0, 2) - srv.clock.now().getTime()) / 1000;
    assert.equal(wait, untilMidnight, 'Retry-After: up to midnight UTC');
    // That refusal cost no per-minute budget, and other paths are not under the day rule.
    const tags = await run(100, (i) => u.post('tags/', { name: `after-${i}` }));
    assert.equal(count(tags, 201), 100, tags.join());
    // The next UTC day has a fresh budget.
    srv.clock.advance(wait * 1000);
    assert.equal((await u.post('servers/', { ...SERVER, name: 'tomorrow' })).status, 201);
  });

  test('429 in XML when XML is negotiated (Accept or ?format=xml), with Retry-After', async () => {
    const u = await srv.user();
    startOfFreshMinute(srv);
    await run(100, () => u.get('capabilities/'));
    for (const res of [await u.get('tags/', { accept: 'application/xml' }), await u.get('tags/?format=xml')]) {
      assert.equal(res.status, 429);
      assert.match(String(res.headers['content-type']), /^application\/xml/);
      assert.ok(Number(res.headers['retry-after']) >= 1);
      assert.match(
        res.text,
        /<objects><object type="hash"><error_message>Rate limit exceeded: at most 100 GET requests per minute; retry in \d+ seconds<\/error_message><error_point type="null"\/><error_type>permission<\/error_type><\/object><\/objects>/,
      );
    }
    // gzip when asked, like every response.
    const gz = await u.get('tags/', { 'accept-encoding': 'gzip' });
    assert.equal(gz.status, 429);
    assert.equal(gz.headers['content-encoding'], 'gzip');
    assert.equal(JSON.parse(gz.text)[0].error_type, 'permission');
  });

  test('unauthenticated requests are limited per client address, before their credentials are checked', async () => {
    startOfFreshMinute(srv);
    const anon = srv.anon();
    const from = (localAddress: string, c: Client = anon) => c.request('GET', 'tags/', { localAddress });
    const u = await srv.user();
    const liar = new Client(srv.base, { email: u.email, password: 'wrong password' });

    // Missing, unusable and wrong credentials count against the address: 401 until the budget is spent.
    // (Wrong passwords are kept few here: login protection has its own, stricter counters for those.)
    const statuses = await run(100, (i) =>
      i < 3 ? from('127.0.0.2', liar) : anon.request('GET', 'tags/', { localAddress: '127.0.0.2', headers: i % 2 ? { authorization: 'Bearer x' } : {} }),
    );
    assert.equal(count(statuses, 401), 100, statuses.join());
    assertTooMany(await from('127.0.0.2'), /at most 100 GET requests per minute/);
    assertTooMany(await from('127.0.0.2', liar), /at most 100 GET requests per minute/);
    // While the address is over, even good credentials from it wait (its refusal comes before scrypt) …
    assert.equal((await u.request('GET', 'tags/', { localAddress: '127.0.0.2' })).status, 429);
    // … but other addresses, and the user from them, are unaffected.
    assert.equal((await from('127.0.0.3')).status, 401);
    assert.equal((await u.request('GET', 'tags/', { localAddress: '127.0.0.3' })).status, 200);
    // Public routes count against the address too.
    const pub = await run(100, () => anon.request('POST', 'accounts/action/?do=nothing', { localAddress: '127.0.0.4', body: {} }));
    assert.equal(count(pub, 429), 0, pub.join());
    assertTooMany(await anon.request('POST', 'accounts/action/?do=nothing', { localAddress: '127.0.0.4', body: {} }), /at most 100 POST requests per minute/);

    srv.clock.advance(60_000);
    assert.equal((await from('127.0.0.2')).status, 401, 'a new window');
    assert.equal((await u.request('GET', 'tags/', { localAddress: '127.0.0.2' })).status, 200);
  });

  test('ended windows are pruned: counters do not grow without bound', async () => {
    const u = await srv.user();
    startOfFreshMinute(srv);
    await run(5, () => u.get('tags/'));
    const limiter = srv.app.rateLimiter!;
    assert.ok((await storedCounters(srv)) > 0);
    srv.clock.advance(2 * 86_400_000);
    // The next request starts the background prune (once a minute per process).
    assert.equal((await u.get('tags/')).status, 200);
    await limiter.idle();
    assert.equal(await storedCounters(srv), 1, 'only the window just opened');
  });
});

/** Counter rows (PostgreSQL) or entries (SQLite's in-memory store). */
async function storedCounters(srv: TestServer): Promise<number> {
  const counters = srv.app.rateLimiter!.counters;
  if (counters instanceof MemoryCounters) return counters.size;
  const row = await srv.services.store.db
    .selectFrom('rate_counters')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

describe('configuring limits', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'stratus-rl-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('deployment "off": no limits and no rate-limit headers', async () => {
    const srv = await startServer({ 'rate-limits': 'off' });
    try {
      const u = await srv.user();
      const statuses = await run(150, () => u.get('tags/'));
      assert.equal(count(statuses, 200), 150);
      assert.equal((await u.get('tags/')).headers['x-ratelimit-limit'], undefined);
      assert.equal(srv.app.rateLimiter, null);
    } finally {
      await srv.close();
    }
  });

  test('a deployment rule file replaces the table; rules not in it are not limited', async () => {
    const file = join(dir, 'rules.json');
    writeFileSync(file, JSON.stringify({ rules: ['GET=3/min', { method: 'POST', path: '/servers/', count: 2, per: 'hour' }] }));
    const srv = await startServer({ 'rate-limits': file }, kinds);
    try {
      const u = await srv.user();
      startOfFreshMinute(srv);
      assert.deepEqual(await run(3, () => u.get('tags/')), [200, 200, 200]);
      assertTooMany(await u.get('tags/'), /at most 3 GET requests per minute/);
      const tags = await run(120, (i) => u.post('tags/', { name: `t${i}` }));
      assert.equal(count(tags, 201), 120, 'no POST rule in this deployment');
      assert.deepEqual(await run(2, (i) => u.post('servers/', { ...SERVER, name: `s${i}` }), 1), [201, 201]);
      assertTooMany(await u.post('servers/', { ...SERVER, name: 's' }), /at most 2 POST requests to \/servers\/ per hour/, 3600);
    } finally {
      await srv.close();
    }
  });

  test('per-account override: raised for a CI account, off, removed rules, reset; a raise admits at once', async () => {
    const srv = await startServer({ 'rate-limits': 'default' }, kinds);
    try {
      const ci = await srv.user();
      const regular = await srv.user();
      startOfFreshMinute(srv);
      await setAccountLimits(srv.services, ci.email, 'GET=150/min,PUT=off');
      const gets = await run(150, () => ci.get('tags/'));
      assert.equal(count(gets, 200), 150);
      assertTooMany(await ci.get('tags/'), /at most 150 GET requests per minute/);
      assert.equal(count(await run(101, () => ci.put('profile/', {})), 200), 101, 'PUT=off removed the PUT rule');
      assert.equal(count(await run(100, () => regular.get('tags/')), 200), 100);
      assertTooMany(await regular.get('tags/'), /at most 100 GET/);

      // Raising a limit in the middle of a window admits the blocked account at once.
      await setAccountLimits(srv.services, regular.email, 'GET=200/min');
      assert.equal((await regular.get('tags/')).status, 200);
      assert.equal((await regular.get('tags/')).headers['x-ratelimit-remaining'], '98');

      await setAccountLimits(srv.services, ci.email, 'off');
      assert.equal(count(await run(300, () => ci.get('tags/')), 200), 300);
      assert.equal((await ci.get('tags/')).headers['x-ratelimit-limit'], undefined, 'an exempt account has no budget to report');

      await setAccountLimits(srv.services, ci.email, null);
      assertTooMany(await ci.get('tags/'), /at most 100 GET requests per minute/); // 151 GETs already this minute
      srv.clock.advance(60_000);
      assert.equal((await ci.get('tags/')).headers['x-ratelimit-limit'], '100');
    } finally {
      await srv.close();
    }
  });

  test('invalid settings stop start-up with a clear message (exit code 2)', async () => {
    const file = join(dir, 'bad.json');
    writeFileSync(file, '["GET=100/min", {"method": "GET", "count": 5, "per": "min"}]');
    for (const [value, pattern, env] of [
      ['GET=abc/min', /rate-limits: rule "GET=abc\/min": count "abc" is not a whole number/, false],
      [file, /rate-limits file .*bad\.json: rule GET is given twice/, true],
    ] as const) {
      const res = env ? await cli(['serve'], { STRATUS_RATE_LIMITS: value }) : await cli(['serve', '--rate-limits', value]);
      assert.equal(res.status, 2, res.stderr);
      assert.match(res.stderr, pattern);
      assert.doesNotMatch(res.stderr, /\n\s+at /);
    }
  });
});

describe('processes', () => {
  test('stratus users limits: show, --set, --off, --reset; bad input exits 2; the server applies the override', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-rl-cli-'));
    const target = engine === 'sqlite' ? { url: join(dir, 'cli.db'), drop: async () => {} } : await freshDatabase();
    const db = ['--db', target.url];
    try {
      assert.equal((await cli(['migrate', ...db])).status, 0);
      assert.equal((await cli(['users', 'add', 'ci@example.com', '--password', 'ci-secret', ...db])).status, 0);
      assert.equal((await cli(['users', 'add', 'dev@example.com', '--password', 'dev-secret', ...db])).status, 0);

      const shown = await cli(['users', 'limits', 'ci@example.com', ...db]);
      assert.equal(shown.status, 0, shown.stderr);
      assert.match(shown.stdout, /^rate limits of ci@example\.com \(account override: none\)/);
      for (const line of [
        /GET\s+100\/min\s+deployment/,
        /POST\s+100\/min\s+deployment/,
        /POST \/servers\/\s+500\/day\s+deployment/,
        /PUT\s+100\/min\s+deployment/,
        /DELETE\s+1000\/min\s+deployment/,
      ])
        assert.match(shown.stdout, line);

      const set = await cli(['users', 'limits', 'CI@example.com', '--set', 'GET=1000/min,POST=200/min,POST:/servers/=5000/day', ...db]);
      assert.equal(set.status, 0, set.stderr);
      assert.match(set.stdout, /account override: GET=1000\/min,POST=200\/min,POST:\/servers\/=5000\/day/);
      assert.match(set.stdout, /GET\s+1000\/min\s+account/);
      assert.match(set.stdout, /POST \/servers\/\s+5000\/day\s+account/);
      assert.match(set.stdout, /PUT\s+100\/min\s+deployment/);
      assert.match((await cli(['users', 'limits', 'ci@example.com', '--rate-limits', 'off', ...db])).stdout, /rate limits are off in this deployment/);

      // (The rule parser's every error is covered by test/unit/rate-limit-rules.test.ts; here: the exit path.)
      for (const [args, pattern] of [
        [['--set', 'GET=lots/min'], /count "lots" is not a whole number/],
        [['--off', '--reset'], /at most one of --off, --reset, --set/],
      ] as const) {
        const res = await cli(['users', 'limits', 'ci@example.com', ...args, ...db]);
        assert.equal(res.status, 2, `${args.join(' ')}: ${res.stderr}`);
        assert.match(res.stderr, pattern);
        assert.doesNotMatch(res.stderr, /\n\s+at /);
      }
      const nobody = await cli(['users', 'limits', 'nobody@example.com', ...db]);
      assert.equal(nobody.status, 2);
      assert.match(nobody.stderr, /No user with e-mail nobody@example\.com/);
      // The rejected --set left the override as it was.
      assert.match((await cli(['users', 'limits', 'ci@example.com', ...db])).stdout, /account override: GET=1000\/min/);

      const off = await cli(['users', 'limits', 'ci@example.com', '--off', ...db]);
      assert.equal(off.status, 0, off.stderr);
      assert.match(off.stdout, /account override: off\)\n\s+none: the account is exempt/);

      // A server on the same database: the exempt CI account is not limited, the other account is.
      const srv = await startServer({ db: target.url, 'rate-limits': 'GET=3/day' });
      // Noon on the injected clock: the day window does not end mid-test, whenever the test runs.
      srv.clock.set(new Date(Date.UTC(FUTURE_YEAR, 0, 1, 12)));
      try {
        const ci = new Client(srv.base, { email: 'ci@example.com', password: 'ci-secret' });
        const dev = new Client(srv.base, { email: 'dev@example.com', password: 'dev-secret' });
        assert.deepEqual(await run(6, () => ci.get('profile/'), 1), [200, 200, 200, 200, 200, 200]);
        assert.deepEqual(await run(4, () => dev.get('profile/'), 1), [200, 200, 200, 429]);
      } finally {
        await srv.close();
      }

      const reset = await cli(['users', 'limits', 'ci@example.com', '--reset', ...db]);
      assert.equal(reset.status, 0, reset.stderr);
      assert.match(reset.stdout, /override removed[\s\S]*account override: none/);
    } finally {
      await target.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /**
   * Two API processes on one new PostgreSQL database under `limits`, with one user (`email`, `password`) and
   * the deployment's clock at noon (day windows: the test never straddles a window boundary, as it did on
   * real time at midnight UTC). Both processes must stop cleanly.
   */
  async function twoProcesses(
    limits: string,
    email: string,
    password: string,
    fn: (bases: [string, string], creds: { email: string; password: string }) => Promise<void>,
  ) {
    const target = await freshDatabase();
    const db = ['--db', target.url];
    try {
      assert.equal((await cli(['migrate', ...db])).status, 0);
      assert.equal((await cli(['users', 'add', email, '--password', password, ...db])).status, 0);
      assert.equal((await cli(['clock', 'set', `${FUTURE_YEAR}-01-01T12:00:00Z`, ...db])).status, 0);
      const a = await serveProcess([...db, '--rate-limits', limits]);
      const b = await serveProcess([...db, '--rate-limits', limits]);
      try {
        assert.notEqual(a.base, b.base);
        await fn([a.base, b.base], { email, password });
      } finally {
        a.child.kill('SIGTERM');
        b.child.kill('SIGTERM');
        assert.equal(await a.exited, 0);
        assert.equal(await b.exited, 0);
      }
    } finally {
      await target.drop();
    }
  }

  test(
    "two API processes on one PostgreSQL database share one user's budget (and one address's)",
    { skip: onlyOn('postgres') } /* SQLite is one process by design */,
    () =>
      twoProcesses('GET=6/day', 'shared@example.com', 'shared-secret', async ([a, b], creds) => {
        const clients = [new Client(a, creds), new Client(b, creds)];
        const remaining = [];
        for (let i = 0; i < 6; i++) {
          const res = await clients[i % 2].get('profile/');
          assert.equal(res.status, 200);
          remaining.push(res.headers['x-ratelimit-remaining']);
        }
        assert.deepEqual(remaining, ['5', '4', '3', '2', '1', '0'], 'one budget, counted by both processes');
        assertTooMany(await clients[0].get('profile/'), /at most 6 GET requests per day/, 86_400);
        assertTooMany(await clients[1].get('profile/'), /at most 6 GET requests per day/, 86_400);

        // Anonymous requests from one address, spread over both processes: one budget too.
        const anons = [new Client(a), new Client(b)];
        const statuses = await run(6, (i) => anons[i % 2].request('GET', 'tags/', { localAddress: '127.0.0.9' }), 1);
        assert.deepEqual(statuses, [401, 401, 401, 401, 401, 401]);
        assert.equal((await anons[0].request('GET', 'tags/', { localAddress: '127.0.0.9' })).status, 429);
        assert.equal((await anons[1].request('GET', 'tags/', { localAddress: '127.0.0.9' })).status, 429);
      }),
  );

  test(
    'two API processes on one PostgreSQL: concurrent reads, each counted along with its read, never overdraw one budget',
    { skip: onlyOn('postgres') } /* the counts travel with the reads on PostgreSQL only */,
    () =>
      twoProcesses('GET=10/day', 'reads@example.com', 'reads-secret', async ([a, b], creds) => {
        const clients = [new Client(a, creds), new Client(b, creds)];
        // Reusable GETs (a list, a missing object, a singleton): their answers are made before their
        // counts are known, so all 30 race both processes' counts at once.
        const paths = ['tags/', `tags/${randomUUID()}/`, 'capabilities/'];
        const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => clients[i % 2].get(paths[i % 3])));
        const admitted = answers.map((r, i) => ({ r, path: paths[i % 3] })).filter(({ r }) => r.status !== 429);
        assert.equal(admitted.length, 10, answers.map((r) => r.status).join(','));
        for (const { r, path } of admitted) assert.equal(r.status, path === paths[1] ? 404 : 200, `${path}: ${r.text}`);
        assert.deepEqual(
          admitted.map(({ r }) => Number(r.headers['x-ratelimit-remaining'])).sort((x, y) => x - y),
          [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
          'one budget, each unit granted once',
        );
        for (const r of answers.filter((x) => x.status === 429)) assertTooMany(r, /at most 10 GET requests per day/, 86_400);
        // Over the budget, a read of a missing object is refused, not answered 404; on both processes.
        assertTooMany(await clients[0].get(`tags/${randomUUID()}/`), /at most 10 GET requests per day/, 86_400);
        assertTooMany(await clients[1].get(`tags/${randomUUID()}/`), /at most 10 GET requests per day/, 86_400);
      }),
  );
});
