import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Decimal } from 'decimal.js';
import { CYCLE_MS, cycleOf } from '../../src/billing/cycle.js';
import { FrozenClock } from '../helpers/clock.js';
import { GiB, testPriceFile } from '../helpers/prices.js';
import type { SingletonDecl } from '../../src/core/resource.js';
import { listQuery, openServices, type ServiceFixture } from '../helpers/services.js';

/**
 * The billing poll (billing/engine.ts) on the service tier: a recurring durable timer on the 5-minute
 * boundaries of the injected clock, with catch-up. When the clock moves hours at once, every missed poll
 * is billed, each once, exactly as if it had run on time. Amounts by hand from test/helpers/prices.ts:
 * a 10 GiB dssd drive at level 1 (0.2592 per GB for 30 days) costs 10 × 0.2592 × 300 / 2,592,000 = 0.0003
 * per 5-minute cycle.
 */
let fx: ServiceFixture;
const T0 = new Date('2030-01-07T00:00:00.000Z'); // a cycle boundary
const PER_CYCLE = '0.00030000000000000000';
/** `base` plus `seconds` × 0.000001 (a second of the drive), to 20 places as the API prints money. */
const plusSeconds = (base: string, seconds: number) => new Decimal(base).plus(new Decimal(seconds).times('0.000001')).toFixed(20);

type Ctx = Awaited<ReturnType<ServiceFixture['user']>>;
let alice: Ctx, bob: Ctx, carol: Ctx;

before(async () => {
  // A clock that stands still: what is billed must not depend on how long a call took on a loaded machine.
  fx = await openServices({ pricing: testPriceFile(), 'opening-balance': '100', currency: 'EUR' }, undefined, { clock: new FrozenClock(T0) });
  [alice, bob, carol] = [await fx.user(), await fx.user(), await fx.user()];
  fx.clock.set(T0);
  // The poll is first due at the next boundary: T0 + 5 minutes.
  await fx.advance(0);
});
after(() => fx.close());

const balanceOf = async (ctx: Ctx) => (await (fx.kind('balance') as SingletonDecl).service.get(ctx)).balance;

const burstEntries = async (ctx: Ctx): Promise<any[]> =>
  (await fx.collection('ledger').service.list(ctx, listQuery({ filters: { order_by: 'time' } }))).objects.filter((e) => e.billing_cycle !== null);

test('a clock moved 3 hours ahead: each of the 36 missed polls is charged once, 0.0003 each, and the balance follows', async () => {
  await fx.collection('drives').service.create!(alice, [{ name: 'data', size: 10 * GiB, media: 'disk', storage_type: 'dssd' }]);
  await fx.advance(3 * 3_600_000);

  const entries = await burstEntries(alice);
  const first = cycleOf(T0);
  assert.deepEqual(
    entries.map((e) => e.billing_cycle),
    Array.from({ length: 36 }, (_, i) => first + i),
    'one entry per cycle, every cycle of the 3 hours',
  );
  // The first cycle from the drive's creation (the real milliseconds the call took after T0 may cost it a
  // second): 0.000001 per second of it; every later one whole.
  const [head, ...rest] = entries;
  assert.ok(head.interval >= 298 && head.interval <= 300, `${head.interval} s`);
  assert.equal(head.amount, plusSeconds('0', head.interval));
  for (const e of rest) {
    assert.equal(e.amount, PER_CYCLE, `cycle ${e.billing_cycle}`);
    assert.deepEqual([e.interval, e.resource_amount, e.human_interval], [300, String(10 * GiB), '5 minutes']);
  }
  const missing = 300 - head.interval; // seconds the first cycle did not cover, at 0.000001 each
  // Each entry's poll is its cycle's end: T0 + 5 min, + 10 min, ..., + 3 h.
  assert.equal(Date.parse(String(entries.at(-1)!.poll_time).slice(0, 23) + 'Z'), T0.getTime() + 36 * CYCLE_MS);
  // 100 − 36 × 0.0003 = 99.9892 (plus the uncovered seconds of the first cycle)
  assert.equal(await balanceOf(alice), plusSeconds('99.9892', missing));
  assert.equal((await burstEntries(bob)).length, 0, 'nothing used, nothing charged');

  // Part of a cycle: no poll yet. The rest of it: one more.
  await fx.advance(2 * 60_000);
  assert.equal((await burstEntries(alice)).length, 36);
  await fx.advance(3 * 60_000);
  const after37 = await burstEntries(alice);
  assert.equal(after37.length, 37);
  assert.equal(after37.at(-1)!.billing_cycle, first + 36);
  assert.equal(await balanceOf(alice), plusSeconds('99.9889', missing));
  // Running the poll again bills nothing more.
  await fx.scheduler.runDue();
  assert.equal((await burstEntries(alice)).length, 37);

  // The usage records of those polls: a burst record each, and the day's sum (37 × 0.0003 = 0.0111).
  const bursts = await fx.collection('burstusage').service.list(alice, listQuery());
  assert.equal(bursts.total, 37);
  assert.ok(bursts.objects.slice(0, 36).every((b) => b.amount === PER_CYCLE && b.resource_type === 'dssd'));
  const daily = await fx.collection('dailyburstusage').service.list(alice, listQuery());
  // 10 GiB for 37 × 300 s less the missing seconds, in unit-days: 10,737,418,240 × 11,100 / 86,400 = 1,379,459,982.2…
  const unitDays = (10n * BigInt(GiB) * BigInt(11_100 - missing)) / 86_400n;
  assert.equal(BigInt(daily.objects[0].usage as number), unitDays);
  if (missing === 0) assert.equal(daily.objects[0].usage, 1_379_459_982);
  assert.deepEqual(
    daily.objects.map((d) => [d.date, d.resource_type, d.amount]),
    [['2030-01-07', 'dssd', plusSeconds('0.0111', -missing)]],
  );
});

test('a clock moved two days ahead: the polls before the last day are billed as one span, the last day poll by poll, every second once', async () => {
  const start = fx.clock.now();
  await fx.collection('drives').service.create!(carol, [{ name: 'data', size: 10 * GiB, media: 'disk', storage_type: 'dssd' }]);
  await fx.advance(2 * 86_400_000);
  const entries = await burstEntries(carol);
  const seconds = entries.reduce((n, e) => n + Number(e.interval), 0);
  // From the drive's creation to the last boundary passed, every second billed once.
  const lastPoll = Math.floor(fx.clock.now().getTime() / CYCLE_MS) * CYCLE_MS;
  assert.equal(seconds, (lastPoll - start.getTime()) / 1000, `${seconds} s billed`);
  // The last day (288 polls) one by one; what came before in one span entry.
  assert.equal(entries.filter((e) => e.interval === 300).length >= 288, true);
  assert.ok(entries.length <= 288 + 2, `${entries.length} entries`);
  // The span first: one entry for the day before the last (the clock stands still, so exactly a day), named by its length.
  assert.equal(entries[0].interval, 86_400);
  assert.equal(entries[0].human_interval, '24 hours');
  assert.equal(entries.length, 1 + 288);
  const cycles = entries.map((e) => e.billing_cycle);
  assert.equal(new Set(cycles).size, cycles.length, 'no cycle billed twice');
  // The total is exact: 0.0003 per 300 s, i.e. 0.000001 per second.
  const total = entries.reduce((sum, e) => sum + Math.round(Number(e.amount) * 1e6), 0);
  assert.equal(total, seconds);
});
