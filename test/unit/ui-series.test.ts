import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { accountsOf } from '../../src/ui/operator/admin-client.js';
import { balanceOverTime, burstResources, formatAmount, groupOf, levelsOf, spendingPerDay, usageByGroup, type Pricing } from '../../src/ui/charts/series.js';

const s = (iso: string) => Date.parse(iso) / 1000;

describe('console chart series', () => {
  test('balance over time: oldest first, one point per second (the balance after its last entry)', () => {
    const entries = [
      { time: '2030-01-01T00:05:00Z', amount: '0.5', initial: '99.5', end: '99.0' },
      { time: '2030-01-01T00:00:00Z', amount: '-100', initial: '0', end: '100' },
      { time: '2030-01-01T00:05:00Z', amount: '0.5', initial: '100', end: '99.5' },
      { time: 'not a time', amount: '1', initial: '1', end: '0' },
    ];
    // The two entries of 00:05 chain 100 -> 99.5 -> 99.0: the point is 99.0, in either order.
    assert.deepEqual(balanceOverTime(entries), [
      [s('2030-01-01T00:00:00Z'), s('2030-01-01T00:05:00Z')],
      [100, 99],
    ]);
    assert.deepEqual(balanceOverTime([...entries].reverse())[1], [100, 99]);
  });

  test('spending per UTC day: debits and credits apart', () => {
    const [x, spent, paid] = spendingPerDay([
      { time: '2030-01-01T23:59:00Z', amount: '1.25', initial: '0', end: '0' },
      { time: '2030-01-01T01:00:00Z', amount: '-50', initial: '0', end: '0' },
      { time: '2030-01-02T00:00:00Z', amount: '2', initial: '0', end: '0' },
      { time: '2030-01-01T02:00:00Z', amount: '0.75', initial: '0', end: '0' },
    ]);
    assert.deepEqual(x, [s('2030-01-01T00:00:00Z'), s('2030-01-02T00:00:00Z')]);
    assert.deepEqual(spent, [2, 2]);
    assert.deepEqual(paid, [50, 0]);
  });

  test('usage keys group as a person reads them', () => {
    assert.equal(groupOf('intel_cpu'), 'cpu');
    assert.equal(groupOf('cpu'), 'cpu');
    assert.equal(groupOf('amd_mem'), 'mem');
    assert.equal(groupOf('dssd'), 'storage');
    assert.equal(groupOf('tx'), 'traffic');
    assert.equal(groupOf('ip'), null);
  });

  test('usage and burst per group on one time axis', () => {
    const t1 = '2030-01-01T00:05:00Z';
    const t2 = '2030-01-01T00:10:00Z';
    const g = usageByGroup(
      [
        { poll_time: t1, resource: 'intel_cpu', amount: '2000' },
        { poll_time: t1, resource: 'intel_cpu', amount: '1000' },
        { poll_time: t1, resource: 'dssd', amount: '1073741824' },
        { poll_time: t2, resource: 'intel_cpu', amount: '3000' },
      ],
      [
        { date: t2, resource_type: 'cpu', usage: 1000, amount: '0.01' },
        { date: '2030-01-01T00:15:00Z', resource_type: 'cpu', usage: 500, amount: '0.01' },
      ],
    );
    assert.deepEqual(g.cpu, [
      [s(t1), s(t2), s('2030-01-01T00:15:00Z')],
      [3000, 3000, null],
      [0, 1000, 500],
    ]);
    assert.deepEqual(g.storage, [[s(t1)], [1073741824], [0]]);
    assert.deepEqual(g.traffic, [[], [], []]);
  });

  test('price levels of a resource, with the level in force and the next', () => {
    const pricing: Pricing = {
      current: { cpu: 2 },
      next: { cpu: 3 },
      objects: [
        { resource: 'cpu', level: 2, price: '0.02', unit: 'GHz/hour', currency: 'USD' },
        { resource: 'cpu', level: 0, price: '0.008', unit: 'GHz/hour', currency: 'USD' },
        { resource: 'cpu', level: 1, price: '0.01', unit: 'GHz/hour', currency: 'USD' },
        { resource: 'cpu', level: 1, price: '0.009', unit: 'GHz/hour', currency: 'EUR' },
        { resource: 'ip', level: 1, price: '3', unit: 'IP', currency: 'USD' },
        { resource: 'ip', level: 0, price: '2', unit: 'IP', currency: 'USD' },
        { resource: 'mem', level: 1, price: '0.01', currency: 'USD' },
        { resource: 'mem', level: 2, price: '0.02', currency: 'USD' },
      ],
    };
    const cpu = levelsOf(pricing, 'cpu', 'USD');
    assert.deepEqual(levelsOf(pricing, 'cpu', 'EUR').columns, [[1], [0.009]]);
    assert.deepEqual(cpu.columns, [
      [1, 2],
      [0.01, 0.02],
    ]);
    assert.equal(cpu.current, 2);
    assert.equal(cpu.next, 3);
    assert.equal(cpu.unit, 'GHz/hour');
    assert.deepEqual(burstResources(pricing), ['cpu', 'mem']);
  });

  test('amounts for axes', () => {
    assert.equal(formatAmount(2 * 1024 ** 3, 'bytes'), '2 GiB');
    assert.equal(formatAmount(512, 'bytes'), '512 B');
    assert.equal(formatAmount(2500, 'MHz'), '2.5 GHz');
  });

  test('the operator accounts table: users with their balances, no credentials', () => {
    const rows = accountsOf({
      tables: {
        users: [
          { uuid: 'b', email: 'b@example.com', state: 'REGULAR', password_hash: 'secret', created_at: '2030-01-01T00:00:00Z' },
          { uuid: 'a', email: 'a@example.com', state: 'TRIAL', password_hash: 'secret' },
        ],
        billing_accounts: [{ owner_uuid: 'b', balance: '12.50', currency: 'USD' }],
      },
    });
    assert.deepEqual(rows, [
      { uuid: 'a', email: 'a@example.com', state: 'TRIAL', balance: null, currency: null, created_at: null },
      { uuid: 'b', email: 'b@example.com', state: 'REGULAR', balance: '12.50', currency: 'USD', created_at: '2030-01-01T00:00:00Z' },
    ]);
    assert.ok(!JSON.stringify(rows).includes('secret'));
  });
});
