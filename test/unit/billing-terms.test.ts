import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ledgerAmount, Money } from '../../src/billing/money.js';
import { addPeriod, noonAtOrAfter, noonAtOrBefore, parsePeriod, timedeltaText, windowOf } from '../../src/billing/periods.js';
import { checkAmount, checkResource, extensionOf, priceWindow, purchaseCharge, quote, requirePayable, statusOf } from '../../src/billing/subscription-terms.js';
import type { Services } from '../../src/core/context.js';
import type { SubscriptionRow } from '../../src/store/billing/index.js';
import { GiB, testCatalogue } from '../helpers/prices.js';

/**
 * Subscription periods and terms (billing/periods.ts, billing/subscription-terms.ts), with expected values
 * worked out by hand from the test catalogue (test/helpers/prices.ts: dssd 0.1296 per GB for 30 days to
 * subscribe; 3% off from 3 months, 25% from a year).
 */
const s = { config: { pricing: testCatalogue() } } as unknown as Pick<Services, 'config'>;
const at = (iso: string) => new Date(iso);
const iso = (d: Date) => d.toISOString();
const status400 = (point: string) => (e: { status?: number; point?: string; errorPoint?: string }) => e.status === 400 && JSON.stringify(e).includes(point);
const DAY = 86_400_000;

test('periods: free text read into calendar units; anything else is a 400', () => {
  assert.deepEqual(parsePeriod('2 months 1 week'), { years: 0, months: 2, weeks: 1, days: 0, hours: 0, minutes: 0 });
  assert.deepEqual(parsePeriod('1 year, 30 days'), { years: 1, months: 0, weeks: 0, days: 30, hours: 0, minutes: 0 });
  assert.throws(() => parsePeriod('1 fortnight'), status400('period'));
  assert.throws(() => parsePeriod('month'), status400('period'));
  assert.throws(() => parsePeriod('0 days'), status400('period'));
});

test('periods are added as a calendar does: month ends clamp, leap years count', () => {
  assert.equal(iso(addPeriod(at('2030-01-31T12:00:00Z'), parsePeriod('1 month'))), '2030-02-28T12:00:00.000Z');
  assert.equal(iso(addPeriod(at('2028-01-31T12:00:00Z'), parsePeriod('1 month'))), '2028-02-29T12:00:00.000Z');
  assert.equal(iso(addPeriod(at('2028-02-29T12:00:00Z'), parsePeriod('1 year'))), '2029-02-28T12:00:00.000Z');
  assert.equal(iso(addPeriod(at('2030-03-31T00:00:00Z'), parsePeriod('1 month'), -1)), '2030-02-28T00:00:00.000Z');
  assert.equal(iso(addPeriod(at('2030-01-01T00:00:00Z'), parsePeriod('1 week 2 days 3 hours'))), '2030-01-10T03:00:00.000Z');
});

test('a period printed as Python’s timedelta', () => {
  assert.equal(timedeltaText(300_000), '0:05:00');
  assert.equal(timedeltaText(DAY), '1 day, 0:00:00');
  assert.equal(timedeltaText(30 * DAY), '30 days, 0:00:00');
  assert.equal(timedeltaText(DAY + 3_661_500), '1 day, 1:01:01.500000');
});

test('windows: ends rounded up to noon UTC, starts down to noon but never before now', () => {
  assert.equal(iso(noonAtOrAfter(at('2030-01-07T12:00:00Z'))), '2030-01-07T12:00:00.000Z');
  assert.equal(iso(noonAtOrAfter(at('2030-01-07T12:00:01Z'))), '2030-01-08T12:00:00.000Z');
  assert.equal(iso(noonAtOrBefore(at('2030-01-07T11:59:59Z'))), '2030-01-06T12:00:00.000Z');
  const now = at('2030-01-07T08:00:00Z');
  const byPeriod = windowOf({ period: '1 month' }, now);
  assert.deepEqual([iso(byPeriod.start), iso(byPeriod.end)], ['2030-01-07T08:00:00.000Z', '2030-02-07T12:00:00.000Z']);
  const given = windowOf({ start_time: '2030-01-08T12:00:00+00:00', end_time: '2030-02-07T12:00:00+00:00' }, now);
  assert.deepEqual([iso(given.start), iso(given.end), given.period], ['2030-01-08T12:00:00.000Z', '2030-02-07T12:00:00.000Z', null]);
  // A start in the past starts now.
  const late = windowOf({ start_time: '2030-01-01', period: '1 month' }, now);
  assert.equal(iso(late.start), '2030-01-07T08:00:00.000Z');
  assert.throws(() => windowOf({ start_time: '2030-01-08', end_time: '2030-02-08', period: '1 month' }, now), status400('period'));
  assert.throws(() => windowOf({ start_time: '2030-01-08' }, now), status400('period'));
});

test('quotes: the level-0 price for the window, less the biggest period discount it reaches', () => {
  const start = at('2030-01-07T12:00:00Z');
  // 1 GiB for 30 days at 0.1296: no discount.
  const month = priceWindow(s, 'EUR', 'dssd', GiB, start, new Date(start.getTime() + 30 * DAY));
  assert.deepEqual(
    [ledgerAmount(month.gross), ledgerAmount(month.discountPercent), ledgerAmount(month.price)],
    ['0.12960000000000000000', '0.00000000000000000000', '0.12960000000000000000'],
  );
  // 90 days = 3 × 0.1296 = 0.3888, 3% off: 0.377136.
  const quarter = quote(s, 'EUR', { resource: 'dssd', amount: String(GiB), period: '3 months' }, start);
  assert.equal(iso(quarter.end), '2030-04-07T12:00:00.000Z');
  assert.deepEqual([ledgerAmount(quarter.gross), ledgerAmount(quarter.price)], ['0.38880000000000000000', '0.37713600000000000000']);
  // 365 days = 0.1296 × 365 / 30 = 1.5768, 25% off: 1.1826.
  const year = quote(s, 'EUR', { resource: 'hdd', amount: GiB, period: '1 year' }, start);
  assert.deepEqual(
    [year.resource, ledgerAmount(year.gross), ledgerAmount(year.price), year.period],
    ['dssd', '1.57680000000000000000', '1.18260000000000000000', '1 year'],
  );
  // A year less an hour (a start after noon, an end rounded to noon) still reaches the year's discount: a
  // day's grace. 0.1296 / 2,592,000 = 0.00000005 per GiB·s × 31,532,400 s = 1.57662, 25% off: 1.182465.
  const almost = priceWindow(s, 'EUR', 'dssd', GiB, at('2030-01-07T13:00:00Z'), at('2031-01-07T12:00:00Z'));
  assert.deepEqual([ledgerAmount(almost.gross), ledgerAmount(almost.price)], ['1.57662000000000000000', '1.18246500000000000000']);
  assert.equal(checkResource(s, 'hdd', 'EUR'), 'dssd');
  assert.throws(() => checkResource(s, 'gpu', 'EUR'), status400('resource'));
  assert.equal(checkAmount('5'), 5);
  assert.equal(checkAmount(undefined), 1);
  assert.throws(() => checkAmount(0), status400('amount'));
  assert.throws(
    () => requirePayable({ owner: 'a', balance: new Money('0.1'), currency: 'EUR', credit_limit: null, notice: null }, new Money('0.12')),
    (e: { status?: number }) => e.status === 402,
  );
});

const bought = (start: string, end: string, more: Partial<SubscriptionRow> = {}): SubscriptionRow => ({
  id: 7,
  uuid: 'u',
  owner_uuid: 'a',
  resource: 'dssd',
  amount: GiB,
  start_time: start,
  end_time: end,
  start_ms: Date.parse(start),
  end_ms: Date.parse(end),
  period: null,
  price: '0.1296',
  discount_amount: '0',
  discount_percent: '0',
  auto_renew: 1,
  subscribed_object: null,
  parent_id: null,
  root_id: null,
  created_at: start,
  consumed: 0,
  ...more,
});

test('an extension buys the same length from the end; a late renewal buys one window from when it runs', () => {
  const last = bought('2030-01-08T12:00:00Z', '2030-02-07T12:00:00Z');
  const next = extensionOf(s, 'EUR', last, {});
  assert.deepEqual(
    [iso(next.start), iso(next.end), ledgerAmount(next.price)],
    ['2030-02-07T12:00:00.000Z', '2030-03-09T12:00:00.000Z', '0.12960000000000000000'],
  );
  // Renewing on time (at the end): the same window.
  assert.equal(iso(extensionOf(s, 'EUR', last, {}, at('2030-02-07T12:00:00Z')).start), '2030-02-07T12:00:00.000Z');
  // Renewing 100 days late: one window from then, not one per window missed.
  const late = extensionOf(s, 'EUR', last, {}, at('2030-05-18T00:00:00Z'));
  assert.deepEqual(
    [iso(late.start), iso(late.end), ledgerAmount(late.price)],
    ['2030-05-18T00:00:00.000Z', '2030-06-17T00:00:00.000Z', '0.12960000000000000000'],
  );
  // A period bought with one is applied again from the end.
  const monthly = extensionOf(s, 'EUR', bought('2030-01-31T12:00:00Z', '2030-02-28T12:00:00Z', { period: '1 month' }), {});
  assert.equal(iso(monthly.end), '2030-03-28T12:00:00.000Z');
  const charge = purchaseCharge(s, next, 8, at('2030-02-07T12:00:00Z'));
  assert.equal(charge.reason, 'Subscription 8: 1.00 GB of dssd from 2030-02-07 12:00 to 2030-03-09 12:00');
  assert.equal(charge.resource, 'subscription:8');
});

test('status: inactive before the window, active in it, expired after it or (traffic) once used up', () => {
  const row = bought('2030-01-08T12:00:00Z', '2030-02-07T12:00:00Z');
  assert.equal(statusOf(row, at('2030-01-08T11:59:59Z')), 'inactive');
  assert.equal(statusOf(row, at('2030-01-08T12:00:00Z')), 'active');
  assert.equal(statusOf(row, at('2030-02-07T12:00:00Z')), 'expired');
  const tx = bought('2030-01-08T12:00:00Z', '2031-01-08T12:00:00Z', { resource: 'tx', amount: GiB, consumed: GiB });
  assert.equal(statusOf(tx, at('2030-03-01T00:00:00Z')), 'expired');
  const fresh = { ...tx, consumed: 0 };
  assert.equal(statusOf(fresh, at('2030-03-01T00:00:00Z'), new Set([7]), 7), 'active');
  assert.equal(statusOf(fresh, at('2030-03-01T00:00:00Z'), new Set([6]), 7), 'inactive');
});
