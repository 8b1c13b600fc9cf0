import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Outcome } from '../../src/core/resource.js';
import { GiB, testPriceFile } from '../helpers/prices.js';
import type { SingletonDecl } from '../../src/core/resource.js';
import { FrozenClock } from '../helpers/clock.js';
import { listQuery, openServices, type ServiceFixture } from '../helpers/services.js';

/**
 * Subscription renewal on the service tier (resources/billing/subscription-lifecycle.ts): at the end of its
 * window an auto-renewing subscription buys the next one, charged in the ledger and the balance; 7 days and
 * 1 day before, a `renewal_soon` and `renewal_very_soon` notice. A clock that jumps past several windows
 * renews once, from when the renewal runs (no renewal loop). Prices by hand (test/helpers/prices.ts): 1 GiB
 * of dssd for 30 days at the subscription price (0.1296 per GB for 30 days) = 0.1296.
 */
let fx: ServiceFixture;
type Ctx = Awaited<ReturnType<ServiceFixture['user']>>;
let alice: Ctx;
const DAY = 86_400_000;
const T0 = new Date('2030-01-07T00:00:00.000Z');
const PRICE = '0.12960000000000000000';

before(async () => {
  // A clock that stands still: a renewal's times must not move with how long the machine takes.
  fx = await openServices({ pricing: testPriceFile(), 'opening-balance': '100', currency: 'EUR' }, undefined, { clock: new FrozenClock() });
  alice = await fx.user();
  fx.clock.set(T0);
  await fx.advance(0);
});
after(() => fx.close());

const balanceOf = async (ctx: Ctx) => (await (fx.kind('balance') as SingletonDecl).service.get(ctx)).balance;

const to = (iso: string) => fx.advance(Date.parse(iso) - fx.clock.now().getTime());
const subscriptionCharges = async () =>
  (await fx.collection('ledger').service.list(alice, listQuery({ filters: { order_by: 'time' } }))).objects.filter((e) =>
    /^Subscription /.test(String(e.reason)),
  );
const events = async () =>
  (await fx.collection('logs').service.list(alice, listQuery())).objects
    .filter((e) => e.category === 'Subscriptions')
    .map((e) => e.action)
    .reverse();
const chain = async () => (await fx.collection('subscriptions').service.list(alice, listQuery())).objects.reverse();
const balance = () => balanceOf(alice);

test('an auto-renewing subscription: notices before its end, one renewal at it, charged in the ledger and the balance', async () => {
  const made = await fx.collection('subscriptions').service.create!(alice, [
    { resource: 'dssd', amount: String(GiB), start_time: '2030-01-08T12:00:00+00:00', end_time: '2030-02-07T12:00:00+00:00' },
  ]);
  assert.ok(made instanceof Outcome);
  assert.equal(made.info.beside?.price, PRICE);
  assert.equal(await balance(), '99.87040000000000000000'); // 100 − 0.1296

  // A day before the 7-day notice: nothing yet.
  await to('2030-01-30T12:00:00Z');
  assert.deepEqual(await events(), ['create']);
  await to('2030-01-31T12:00:01Z');
  assert.deepEqual(await events(), ['create', 'renewal_soon']);
  await to('2030-02-06T12:00:01Z');
  assert.deepEqual(await events(), ['create', 'renewal_soon', 'renewal_very_soon']);
  assert.equal((await chain()).length, 1, 'not renewed before its end');

  await to('2030-02-07T12:00:01Z');
  assert.deepEqual(await events(), ['create', 'renewal_soon', 'renewal_very_soon', 'renewal_success']);
  const subs = await chain();
  assert.deepEqual(
    subs.map((s) => [s.start_time, s.end_time, s.price]),
    [
      ['2030-01-08T12:00:00.000000+00:00', '2030-02-07T12:00:00.000000+00:00', PRICE],
      ['2030-02-07T12:00:00.000000+00:00', '2030-03-09T12:00:00.000000+00:00', PRICE],
    ],
  );
  const charges = await subscriptionCharges();
  assert.deepEqual(
    charges.map((c) => [c.amount, c.reason]),
    [
      [PRICE, `Subscription ${subs[0].id}: 1.00 GB of dssd from 2030-01-08 12:00 to 2030-02-07 12:00`],
      [PRICE, `Subscription ${subs[1].id}: 1.00 GB of dssd from 2030-02-07 12:00 to 2030-03-09 12:00`],
    ],
  );
  assert.equal(await balance(), '99.74080000000000000000'); // 100 − 2 × 0.1296
});

test('a clock that jumps 100 days renews once, from when the renewal runs, not once per window missed', async () => {
  // The second window ends 2030-03-09 12:00; 100 days after the first renewal is 2030-05-18.
  await to('2030-05-18T12:00:00Z');
  const renewedAt = fx.clock.now().getTime();
  const subs = await chain();
  assert.equal(subs.length, 3, 'one renewal for the three windows the clock passed');
  const last = subs[2];
  const start = Date.parse(String(last.start_time).slice(0, 23) + 'Z');
  const end = Date.parse(String(last.end_time).slice(0, 23) + 'Z');
  assert.ok(start >= Date.parse('2030-05-18T12:00:00Z') - 1000 && start <= renewedAt, `${last.start_time}`);
  assert.equal(end - start, 30 * DAY, 'the same 30 days again');
  assert.equal(last.price, PRICE);
  assert.equal((await events()).filter((a) => a === 'renewal_success').length, 2);
  assert.equal((await subscriptionCharges()).length, 3);
  assert.equal(await balance(), '99.61120000000000000000'); // 100 − 3 × 0.1296

  // 29 more days: still inside the third window, nothing renews.
  await fx.advance(29 * DAY);
  assert.equal((await chain()).length, 3);
  assert.equal((await subscriptionCharges()).length, 3);
  // The grouped view: one chain, its extensions as descendants, ending where the last window ends.
  const grouped = (await fx.collection('groupedsubscriptions').service.list(alice, listQuery())).objects;
  assert.equal(grouped.length, 1);
  assert.deepEqual([(grouped[0].descendants as unknown[]).length, grouped[0].end_time], [2, last.end_time]);
  // The renewal is active, and its own end is scheduled ahead.
  assert.equal(last.status, 'active');
  const due = await fx.services.store.db
    .selectFrom('timers')
    .select('due_ms')
    .where('subject', '=', String(last.id))
    .where('kind', '=', 'subscription.end')
    .where('state', '=', 'pending')
    .executeTakeFirstOrThrow();
  assert.ok(Number(due.due_ms) > fx.clock.now().getTime() && Number(due.due_ms) === end, `${due.due_ms} vs ${end}`);
});

test('a subscription that does not renew expires at its end, with expire notices before it and no charge', async () => {
  const bob = await fx.user();
  const start = new Date(fx.clock.now().getTime() + DAY);
  const day = start.toISOString().slice(0, 10);
  const made = (await fx.collection('subscriptions').service.create!(bob, [
    { resource: 'dssd', amount: String(GiB), start_time: `${day}T12:00:00+00:00`, period: '30 days', auto_renew: false },
  ])) as Outcome<Record<string, unknown>[]>;
  const end = Date.parse(String(made.value[0].end_time).slice(0, 23) + 'Z');
  await fx.advance(end + 60_000 - fx.clock.now().getTime());
  const actions = (await fx.collection('logs').service.list(bob, listQuery())).objects
    .filter((e) => e.category === 'Subscriptions')
    .map((e) => e.action)
    .reverse();
  assert.deepEqual(actions, ['create', 'expire_soon', 'expire_very_soon', 'expire']);
  const subs = (await fx.collection('subscriptions').service.list(bob, listQuery())).objects;
  assert.deepEqual(
    subs.map((s) => s.status),
    ['expired'],
  );
});

test('a renewal the account cannot pay at the end fails, and the subscription expires: no new window, no charge', async () => {
  const carol = await fx.user();
  // A window of hours: the clock passes its end without a day of polls.
  const made = (await fx.collection('subscriptions').service.create!(carol, [
    { resource: 'dssd', amount: String(GiB), end_time: new Date(fx.clock.now().getTime() + 3 * 3_600_000).toISOString() },
  ])) as Outcome<Record<string, unknown>[]>;
  // The account is empty when the renewal falls due.
  await fx.services.store.db.updateTable('billing_accounts').set({ balance: '0.00000000000000000000' }).where('owner_uuid', '=', carol.caller.uuid).execute();
  const end = Date.parse(String(made.value[0].end_time).slice(0, 23) + 'Z');
  await fx.advance(end + 60_000 - fx.clock.now().getTime());
  const actions = (await fx.collection('logs').service.list(carol, listQuery())).objects.filter((e) => e.category === 'Subscriptions').map((e) => e.action);
  assert.ok(actions.includes('renewal_failure') && actions.includes('expire'), String(actions));
  const subs = (await fx.collection('subscriptions').service.list(carol, listQuery())).objects;
  assert.deepEqual(
    subs.map((s) => [s.status, s.descendants]),
    [['expired', []]],
  );
  assert.equal((await (fx.kind('balance') as SingletonDecl).service.get(carol)).balance, '0.00000000000000000000');
});
