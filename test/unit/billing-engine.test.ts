import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chargesOf, coveredSeconds } from '../../src/billing/engine.js';
import { burstReason, cycleOf, displayAmount, humanInterval, nextBoundary } from '../../src/billing/cycle.js';
import { levelFor, levelOf } from '../../src/billing/levels.js';
import { ledgerAmount, Money } from '../../src/billing/money.js';
import { burstOf } from '../../src/billing/usage-records.js';
import { GiB, testCatalogue } from '../helpers/prices.js';

/**
 * The billing engine's pure functions (billing/engine.ts, cycle.ts, levels.ts, usage-records.ts) with
 * expected values worked out by hand from the test catalogue (test/helpers/prices.ts: cpu 3.6 per GHz-hour
 * at level 1 = 0.000001 per MHz·s; mem 0.36 per GB-hour = 0.0001 per GiB·s; tx 0.05 per GB).
 */
const s = { config: { pricing: testCatalogue() } } as unknown as Parameters<typeof chargesOf>[0];
const POLL = new Date('2030-01-07T00:05:00.000Z');
const amounts = (cs: { resource?: string | null; amount: Money }[]) => Object.fromEntries(cs.map((c) => [c.resource, ledgerAmount(c.amount)]));

test('burst levels: utilisation of capacity → level 1..max, rounded up; single-level resources stay at 1', () => {
  assert.equal(levelFor(0, 20), 1);
  assert.equal(levelFor(0.01, 20), 1); // 0.2 → 1
  assert.equal(levelFor(0.05, 20), 1); // exactly 1
  assert.equal(levelFor(0.051, 20), 2); // 1.02 → 2
  assert.equal(levelFor(0.5, 20), 10);
  assert.equal(levelFor(0.99, 20), 20); // 19.8 → 20
  assert.equal(levelFor(3, 20), 20); // over capacity: the top level
  assert.equal(levelFor(0.9, 1), 1);
  // A specific key follows its own level, else its family's, else 1.
  assert.equal(levelOf({ cpu: 3 }, 'intel_cpu'), 3);
  assert.equal(levelOf({ cpu: 3, intel_cpu: 5 }, 'intel_cpu'), 5);
  assert.equal(levelOf({ mem: 4 }, 'amd_mem'), 4);
  assert.equal(levelOf({}, 'dssd'), 1);
});

test('cycles: 5-minute slots since the epoch, named by how long a use ran', () => {
  // 2030-01-07T00:05:00Z = 1,893,974,700 s = 6,313,249 cycles of 300 s.
  assert.equal(POLL.getTime(), 1_893_974_700_000);
  assert.equal(cycleOf(POLL), 6_313_249);
  assert.equal(cycleOf(new Date(POLL.getTime() - 1)), 6_313_248);
  assert.equal(nextBoundary(POLL).toISOString(), '2030-01-07T00:10:00.000Z');
  assert.equal(nextBoundary(new Date('2030-01-07T00:07:31Z')).toISOString(), '2030-01-07T00:10:00.000Z');
  assert.equal(humanInterval(1), '1 second');
  assert.equal(humanInterval(30), '30 seconds');
  assert.equal(humanInterval(60), '1 minute');
  assert.equal(humanInterval(137), '2 minutes');
  assert.equal(humanInterval(300), '5 minutes');
  assert.equal(humanInterval(7200), '2 hours');
  assert.equal(humanInterval(3 * 86_400), '3 days');
  assert.equal(displayAmount('GHz', new Money(2500)), '2.50');
  assert.equal(displayAmount('GB', new Money(4.5 * GiB)), '4.50');
  assert.equal(displayAmount('IP', new Money(3)), '3.00');
  assert.equal(burstReason('cpu', 'GHz', new Money(2000), 300, POLL), 'Burst: 2.00 GHz of cpu for 5 minutes at 2030-01-07 00:05');
});

test('the part of a cycle a use covered: whole when it began before, the seconds since when it began within, none after', () => {
  assert.equal(coveredSeconds(POLL, undefined), 300);
  assert.equal(coveredSeconds(POLL, POLL.getTime() - 3_600_000), 300);
  assert.equal(coveredSeconds(POLL, POLL.getTime() - 137_000), 137);
  assert.equal(coveredSeconds(POLL, POLL.getTime() - 137_400), 137); // rounded to the second
  assert.equal(coveredSeconds(POLL, POLL.getTime() + 1000), 0);
});

test('burst charges: usage beyond subscriptions at the level in force, per resource and interval, exact decimals', () => {
  const server = [
    { owner: 'a', keys: ['cpu'], amount: 2000 },
    { owner: 'a', keys: ['mem'], amount: 2 * GiB },
  ];
  // 2000 MHz × 300 s × 0.000001 = 0.6; 2 GiB × 300 s × 0.0001 = 0.06.
  let charges = chargesOf(s, server, new Map(), { cpu: 1, mem: 1 }, 'EUR', POLL);
  assert.deepEqual(amounts(charges), { cpu: '0.60000000000000000000', mem: '0.06000000000000000000' });
  const cpu = charges.find((c) => c.resource === 'cpu')!;
  assert.deepEqual(
    { cycle: cpu.billing_cycle, interval: cpu.interval, human: cpu.human_interval, units: cpu.resource_amount, reason: cpu.reason },
    { cycle: 6_313_248, interval: 300, human: '5 minutes', units: '2000', reason: 'Burst: 2.00 GHz of cpu for 5 minutes at 2030-01-07 00:05' },
  );
  // Level 2 doubles the cpu price (7.2 per GHz-hour): 1.2.
  charges = chargesOf(s, server, new Map(), { cpu: 2, mem: 1 }, 'EUR', POLL);
  assert.equal(amounts(charges).cpu, '1.20000000000000000000');
  // 1500 MHz subscribed: 500 MHz burst = 0.15; 2 GiB of mem subscribed: nothing.
  charges = chargesOf(
    s,
    server,
    new Map([
      ['cpu', 1500],
      ['mem', 2 * GiB],
    ]),
    { cpu: 1, mem: 1 },
    'EUR',
    POLL,
  );
  assert.deepEqual(amounts(charges), { cpu: '0.15000000000000000000' });
  assert.equal(charges[0]!.resource_amount, '500');
});

test('burst charges: a use begun mid-cycle is charged for its seconds; a subscription covers the longer use first', () => {
  const usage = [
    { owner: 'a', keys: ['cpu'], amount: 1000, since: POLL.getTime() - 137_000 },
    { owner: 'a', keys: ['cpu'], amount: 1000 },
  ];
  // The subscription's 1000 MHz go to the whole-cycle use; the newcomer is charged 1000 × 137 × 0.000001.
  const charges = chargesOf(s, usage, new Map([['cpu', 1000]]), { cpu: 1 }, 'EUR', POLL);
  assert.equal(charges.length, 1);
  assert.deepEqual([charges[0]!.interval, charges[0]!.human_interval, ledgerAmount(charges[0]!.amount)], [137, '2 minutes', '0.13700000000000000000']);
  // A specific key without its own price is charged as its family (intel_cpu → cpu).
  const intel = chargesOf(s, [{ owner: 'a', keys: ['intel_cpu', 'cpu'], amount: 3000 }], new Map(), { cpu: 1 }, 'EUR', POLL);
  assert.deepEqual(amounts(intel), { cpu: '0.90000000000000000000' });
  // Nothing prices it: free.
  assert.deepEqual(chargesOf(s, [{ owner: 'a', keys: ['sms'], amount: 5 }], new Map(), {}, 'EUR', POLL), []);
});

test('traffic is charged by volume beyond its subscription, and what the subscription covered is used up', () => {
  const consumed = new Map<string, number>();
  // 3 GiB sent, 1 GiB subscribed: 2 GiB × 0.05 = 0.1, one entry for the cycle.
  const charges = chargesOf(s, [{ owner: 'a', keys: ['tx'], amount: 3 * GiB, volume: true }], new Map([['tx', GiB]]), { tx: 1 }, 'EUR', POLL, 300, consumed);
  assert.deepEqual(amounts(charges), { tx: '0.10000000000000000000' });
  assert.equal(charges[0]!.volume, true);
  assert.deepEqual([...consumed], [['tx', GiB]]);
});

test('an account’s burst per resource: the sum of its entries, units, and unit-seconds (a volume counts a whole day)', () => {
  const bursts = burstOf([
    { amount: new Money('0.6'), reason: '', poll_time: POLL, resource: 'cpu', resource_amount: '2000', interval: 300 },
    { amount: new Money('0.137'), reason: '', poll_time: POLL, resource: 'cpu', resource_amount: '1000', interval: 137 },
    { amount: new Money('0.1'), reason: '', poll_time: POLL, resource: 'tx', resource_amount: String(2 * GiB), interval: 300, volume: true },
    { amount: new Money('-5'), reason: 'Payment', poll_time: POLL },
  ]);
  assert.deepEqual(
    bursts.map((b) => [b.resource, ledgerAmount(b.amount), b.usage, b.unitSeconds]),
    [
      // 2000 × 300 + 1000 × 137 = 737,000 MHz·s.
      ['cpu', '0.73700000000000000000', 3000, 737_000n],
      // 2 GiB × 86,400.
      ['tx', '0.10000000000000000000', 2 * GiB, 185_542_587_187_200n],
    ],
  );
});
