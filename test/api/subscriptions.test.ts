import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Decimal } from 'decimal.js';
import { expectError } from '../helpers/errors.js';
import { futureIso } from '../helpers/clock.js';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { fixture, golden, sameShape } from '../helpers/golden.js';
import { assetPath } from '../../src/assets.js';
import { billingCommand } from '../../src/cli/billing.js';

const GiB = 2 ** 30;
const DAY = 86_400_000;
const PRICES: { objects: { resource: string; level: number; currency: string; price: string; multiplier: number }[] } = JSON.parse(
  readFileSync(assetPath('billing/prices.json'), 'utf8'),
);
const D = Decimal.clone({ precision: 100 });

/** Level-0 (subscription) price of `amount` over `seconds`, less `discount`: computed from the price file alone. */
function subscriptionPrice(resource: string, amount: number, seconds: number, discount = '0'): string {
  const row = PRICES.objects.find((r) => r.resource === resource && r.level === 0 && r.currency === 'EUR')!;
  const gross = new D(row.price).times(amount).times(seconds).div(row.multiplier);
  return gross.minus(gross.times(discount)).toDecimalPlaces(20, Decimal.ROUND_HALF_EVEN).toFixed(20);
}
const seconds = (o: { start_time: string; end_time: string }) => (Date.parse(o.end_time) - Date.parse(o.start_time)) / 1000;
const isNoon = (t: string) => /T12:00:00(\.0+)?\+00:00$/.test(t);
const balanceOf = async (c: Client) => new D((await c.get('balance/')).json.balance);

let srv: TestServer;
before(async () => {
  srv = await startServer();
  await srv.advance(0);
});
after(() => srv.close());

describe('the calculator (nothing is bought)', () => {
  test('the recorded request: 200, the recorded shape, the price from the level-0 price and the window', async () => {
    const c = await srv.user();
    const res = await c.post('subscriptioncalculator/', golden('request_subscriptioncalculator'));
    assert.equal(res.status, 200, res.text);
    sameShape(res.json, golden('response_subscriptioncalculator'));
    const q = res.json.objects[0];
    assert.ok(isNoon(q.end_time), q.end_time);
    assert.equal(q.price, subscriptionPrice('dssd', 10_000_000_000, seconds(q)));
    assert.equal(res.json.price, q.price);
    assert.deepEqual(q.discounts, {});
    assert.match(q.period, /^3[01] days, \d+:\d\d:\d\d(\.\d{6})?$/);
    // A year earns the 1-year discount of /discount/.
    const year = (await c.post('subscriptioncalculator/', [{ amount: 1, period: '1 year', resource: 'ip' }])).json.objects[0];
    assert.equal(year.discount_percent, '0.2500000000');
    assert.deepEqual(year.discounts, { period: '0.2500000000' });
    assert.equal(year.price, subscriptionPrice('ip', 1, seconds(year), '0.25'));
    assert.deepEqual(await c.get('subscriptions/').then((r) => r.json.meta.total_count), 0);
    assert.equal((await balanceOf(c)).toString(), '10000');
  });

  test('window rules and bad input: 400 naming the field, nothing changes', async () => {
    const c = await srv.user();
    const calc = (body: unknown) => c.post('subscriptioncalculator/', body);
    expectError(await calc([{ amount: 1, period: '1 month' }]), 400, 'validation', 'resource');
    expectError(await calc([{ amount: 1, resource: 'ip' }]), 400, 'validation', 'period');
    expectError(await calc([{ amount: 1, resource: 'ip', start_time: futureIso('01-01T00:00:00.000Z') }]), 400, 'validation', 'period');
    expectError(
      await calc([{ amount: 1, resource: 'ip', period: '1 month', start_time: futureIso('01-01T00:00:00.000Z'), end_time: futureIso('03-01T00:00:00.000Z') }]),
      400,
      'validation',
      'period',
    );
    expectError(await calc([{ amount: 1, resource: 'ip', period: 'forever' }]), 400, 'validation', 'period');
    expectError(await calc([{ amount: 1, resource: 'gold', period: '1 month' }]), 400, 'validation', 'resource');
    // Beyond the calendar: a 400, not a crash.
    expectError(await calc([{ amount: 1, resource: 'ip', period: '100000 years' }]), 400, 'validation', 'period');
    expectError(await calc([{ amount: 0, resource: 'ip', period: '1 month' }]), 400, 'validation', 'amount');
    expectError(await calc([{ amount: -3, resource: 'ip', period: '1 month' }]), 400, 'validation', 'amount');
    expectError(await calc([{ amount: 1, resource: 'ip', end_time: 'tomorrow' }]), 400, 'validation', 'end_time');
    expectError(await calc([{ amount: 1, resource: 'ip', end_time: '2001-01-01T00:00:00+00:00' }]), 400, 'validation', 'end_time');
    expectError(await calc(Array.from({ length: 501 }, () => ({ amount: 1, resource: 'ip', period: '1 month' }))), 400, 'validation', 'objects');
    // end + period: the period ending at end (rounded to noon); start + end: between them.
    const future = new Date(srv.clock.now().getTime() + 40 * DAY).toISOString();
    const endPeriod = (await calc([{ amount: 1, resource: 'vlan', period: '1 week', end_time: future }])).json.objects[0];
    assert.ok(isNoon(endPeriod.end_time));
    assert.ok(isNoon(endPeriod.start_time), endPeriod.start_time);
    assert.equal(seconds(endPeriod), 7 * 86_400);
    const noon = (days: number) => `${new Date(srv.clock.now().getTime() + days * DAY).toISOString().slice(0, 10)}T12:00:00+00:00`;
    const between = (await calc([{ amount: 1, resource: 'vlan', start_time: noon(10), end_time: noon(40) }])).json.objects[0];
    assert.deepEqual([between.start_time.slice(0, 19), seconds(between)], [noon(10).slice(0, 19), 30 * 86_400]);
  });
});

describe('buying', () => {
  test("libcloud's request (a bare list): 201 with the objects and the total price; the balance pays it; the ledger says so", async () => {
    const c = await srv.user();
    const before = await balanceOf(c);
    const res = await c.post('subscriptions/', [{ amount: 10 * GiB, period: '1 month', auto_renew: false, resource: 'dssd' }]);
    assert.equal(res.status, 201, res.text);
    const s = res.json.objects[0];
    const recorded = { ...golden('response_subscription_list').objects[0] };
    for (const k of ['discount_amount', 'discount_percent', 'discounts']) delete recorded[k];
    const mine = { ...s };
    for (const k of ['discount_amount', 'discount_percent', 'discounts']) delete mine[k];
    sameShape(mine, recorded);
    assert.equal(typeof fixture('create_subscription.json').price, typeof res.json.price);
    assert.equal(s.status, 'active');
    assert.equal(s.auto_renew, false);
    assert.equal(s.amount, String(10 * GiB));
    assert.equal(s.price, subscriptionPrice('dssd', 10 * GiB, seconds(s)));
    assert.equal(res.json.price, s.price);
    assert.equal(res.headers.location?.endsWith(s.resource_uri), true);
    assert.equal((await balanceOf(c)).toFixed(20), before.minus(s.price).toFixed(20));
    const [entry] = (await c.get('ledger/?limit=1')).json.objects;
    assert.equal(entry.amount, s.price);
    assert.match(entry.reason, new RegExp(`^Subscription ${s.id}: 10.00 GB of dssd from `));
    assert.deepEqual((await c.get(s.resource_uri)).json, s);
    // What it covers is not charged: currentusage shows it subscribed.
    await c.post('drives/', { media: 'disk', name: 'covered', size: 10 * GiB });
    const usage = (await c.get('currentusage/')).json.usage.dssd;
    assert.deepEqual(usage, { burst: 0, subscribed: 10 * GiB, using: 10 * GiB });
  });

  test('ip and vlan: amount N buys N subscriptions, each with a new IP or VLAN of the account', async () => {
    const c = await srv.user();
    const res = await c.post('subscriptions/', {
      objects: [
        { amount: 2, period: '1 month', resource: 'ip' },
        { amount: 1, period: '1 month', resource: 'vlan' },
      ],
    });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.json.objects.length, 3);
    const ips = res.json.objects.filter((o: any) => o.resource === 'ip');
    assert.equal(ips.length, 2);
    const mineIps = (await c.get('ips/?limit=0')).json.objects.map((o: any) => o.uuid).sort();
    assert.deepEqual(ips.map((o: any) => o.subscribed_object).sort(), mineIps);
    const vlan = res.json.objects.find((o: any) => o.resource === 'vlan');
    const shown = await c.get(`vlans/${vlan.subscribed_object}/`);
    assert.equal(shown.status, 200);
    assert.equal(shown.json.subscription.id, Number(vlan.id));
    const total = res.json.objects.reduce((sum: Decimal, o: any) => sum.plus(o.price), new D(0));
    assert.equal(new D(res.json.price).toFixed(20), total.toFixed(20));
    // Filters: resource (comma = or), subscribed_object, status.
    assert.equal((await c.get('subscriptions/?resource=ip')).json.meta.total_count, 2);
    assert.equal((await c.get('subscriptions/?resource=ip,vlan')).json.meta.total_count, 3);
    assert.equal((await c.get(`subscriptions/?subscribed_object=${vlan.subscribed_object}`)).json.objects[0].id, vlan.id);
    assert.equal((await c.get('subscriptions/?status=active')).json.meta.total_count, 3);
    assert.equal((await c.get('subscriptions/?status=expired')).json.meta.total_count, 0);
    assert.equal((await c.get('subscriptions/?status=notexpired')).json.meta.total_count, 3);
    expectError(await c.get('subscriptions/?status=sleeping'), 400, 'validation', 'status');
  });

  test('without funds: 402, nothing bought, no IP taken, the balance unchanged', async () => {
    const c = await srv.user();
    await srv.services.store.db.updateTable('billing_accounts').set({ balance: '1.00000000000000000000' }).where('owner_uuid', '=', c.uuid).execute();
    expectError(await c.post('subscriptions/', [{ amount: 5, period: '1 year', resource: 'ip' }]), 402, 'billing', null);
    assert.equal((await c.get('subscriptions/')).json.meta.total_count, 0);
    assert.equal((await c.get('ips/')).json.meta.total_count, 0);
    assert.equal((await balanceOf(c)).toString(), '1');
    // Another account's subscription is invisible.
    const other = await srv.user();
    const bought = (await other.post('subscriptions/', [{ amount: 1, period: '1 month', resource: 'vlan' }])).json.objects[0];
    expectError(await c.get(bought.resource_uri), 404, 'notexist', null);
    expectError(await c.post(`subscriptions/${bought.id}/action/?do=extend`, {}), 404, 'notexist', null);
    expectError(await c.put(bought.resource_uri, { auto_renew: false }), 405, 'validation', null);
  });

  test('subscriptions cover running servers: cpu subscribed is not charged, memory beyond it is', async () => {
    const c = await srv.user();
    await c.post('subscriptions/', [{ amount: 2000, period: '1 month', resource: 'cpu' }]);
    const s = (await c.post('servers/', { cpu: 2000, mem: GiB, name: 'sub', vnc_password: 'secret' })).json.objects[0];
    await c.post(`servers/${s.uuid}/action/?do=start`);
    await srv.advance(3_000);
    await srv.advance(600_000);
    const reasons = (await c.get('ledger/?limit=0')).json.objects.map((e: any) => e.reason);
    const burst = (what: string) => reasons.some((r: string) => r.startsWith('Burst: ') && r.includes(` of ${what} `));
    assert.ok(!burst('cpu'), reasons.join('\n'));
    assert.ok(burst('mem'), reasons.join('\n'));
    assert.deepEqual((await c.get('currentusage/')).json.usage.cpu, { burst: 0, subscribed: 2000, using: 2000 });
  });
});

describe('after buying: auto_renew, extend, chains, renewal and expiry on the clock', () => {
  test('auto_renew toggles (or takes a value); extend buys the next window of the chain; grouped shows the chain', async () => {
    const c = await srv.user();
    const s = (await c.post('subscriptions/', [{ amount: 1, period: '1 year', resource: 'vlan' }])).json.objects[0];
    assert.equal(s.auto_renew, true);
    const off = await c.post(`subscriptions/${s.id}/action/?do=auto_renew`);
    assert.equal(off.status, 200, off.text);
    assert.equal(off.json.auto_renew, false);
    assert.equal((await c.post(`subscriptions/${s.id}/action/?do=auto_renew`, { auto_renew: false })).json.auto_renew, false);
    expectError(await c.post(`subscriptions/${s.id}/action/?do=auto_renew`, { auto_renew: 'maybe' }), 400, 'validation', 'auto_renew');
    const priced = await c.post(`subscriptioncalculator/${s.id}/action/?do=extend`, {});
    assert.equal(priced.status, 200, priced.text);
    sameShape(priced.json, golden('response_subscriptioncalculator_extend'));
    assert.equal(priced.json.start_time, s.end_time);
    const ext = await c.post(`subscriptions/${s.id}/action/?do=extend`, {});
    assert.equal(ext.status, 200, ext.text);
    const e1 = ext.json.objects[0];
    assert.equal(e1.start_time, s.end_time);
    assert.equal(e1.status, 'inactive');
    assert.equal(e1.subscribed_object, s.subscribed_object);
    assert.equal(e1.price, priced.json.price);
    // Extending the first again extends the last of the chain.
    const e2 = (await c.post(`subscriptions/${s.id}/action/?do=extend`, {})).json.objects[0];
    assert.equal(e2.start_time, e1.end_time);
    assert.deepEqual((await c.get(s.resource_uri)).json.descendants, [e1.resource_uri]);
    const grouped = (await c.get('groupedsubscriptions/')).json;
    assert.equal(grouped.meta.total_count, 1);
    assert.equal(grouped.objects[0].id, s.id);
    assert.equal(grouped.objects[0].end_time, e2.end_time);
    assert.deepEqual(grouped.objects[0].descendants, [e1.resource_uri, e2.resource_uri]);
    assert.equal((await c.get('subscriptions/?status=inactive')).json.meta.total_count, 2);
  });

  test('a top-up is a payment event; operator top-ups are refused for unknown accounts', async () => {
    const c = await srv.user();
    await billingCommand(srv.services, ['topup', c.email, '25.50'], {}, 'usage');
    const log = (await c.get('logs/?limit=1')).json.objects[0];
    assert.equal(log.category, 'Billing');
    assert.equal(log.action, 'payment');
    // No account with that e-mail: refused (notexist, naming the e-mail), and no money moves anywhere.
    const before = await balanceOf(c);
    await assert.rejects(billingCommand(srv.services, ['topup', `nobody-${c.email}`, '25.50'], {}, 'usage'), (e: any) => {
      assert.equal(e.type, 'notexist');
      assert.equal(e.point, 'email');
      return true;
    });
    assert.equal((await balanceOf(c)).toFixed(20), before.toFixed(20));
  });
});

describe('bounds: times the service represents, amounts counted before work', () => {
  /** Everything a purchase would leave behind: subscriptions, timers, ledger entries, the balance. */
  const traces = async (c: Client & { uuid: string }) => ({
    subscriptions: (await c.get('subscriptions/?limit=0')).json.meta.total_count,
    ledger: (await c.get('ledger/?limit=0')).json.meta.total_count,
    balance: (await c.get('balance/')).json.balance,
    timers: Number(
      (
        await srv.services.store.db
          .selectFrom('timers')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('kind', 'like', 'subscription.%')
          .executeTakeFirstOrThrow()
      ).n,
    ),
  });

  test('an end in the last day of year 9999, rounded up to noon, would leave the calendar: 400, nothing bought, nothing scheduled', async () => {
    const c = await srv.user();
    const before = await traces(c);
    // The probe's request: its end rounds up into the year 10000, whose text sorted before every time.
    const probe = { amount: 1, resource: 'vlan', start_time: '9999-12-31T00:00:00+00:00', end_time: '9999-12-31T13:00:00+00:00' };
    for (const path of ['subscriptions/', 'subscriptioncalculator/']) {
      expectError(await c.post(path, [probe]), 400, 'validation', 'end_time');
      // A time zone offset moves a four-digit time into the year 10000 too.
      expectError(
        await c.post(path, [{ amount: 1, resource: 'vlan', start_time: '9999-12-01', end_time: '9999-12-31T23:00:00-05:00' }]),
        400,
        'validation',
        'end_time',
      );
      expectError(
        await c.post(path, [{ amount: 1, resource: 'vlan', start_time: '9999-12-31T23:00:00-05:00', period: '1 day' }]),
        400,
        'validation',
        'start_time',
      );
    }
    assert.deepEqual(await traces(c), before);
    // The last noon the service represents is accepted: a window that ends exactly there.
    const last = await c.post('subscriptioncalculator/', [
      { amount: 1, resource: 'vlan', start_time: '9999-12-30T12:00:00+00:00', end_time: '9999-12-31T12:00:00+00:00' },
    ]);
    assert.equal(last.status, 200, last.text);
    assert.equal(last.json.objects[0].end_time, '9999-12-31T12:00:00.000000+00:00');
  });

  test('an ip or vlan subscription of a huge amount is refused before one object is made (the limit counts objects)', async () => {
    const c = await srv.user();
    const before = await traces(c);
    // The server runs in this process: a request that holds its event loop shows as a delay here. Once
    // one object per unit was made before the limit was checked (12.5 s and ~1 GiB for 1,000,000).
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    for (const amount of [1_000_000, 2_000_000, '9007199254740991', 501]) {
      for (const resource of ['ip', 'vlan'])
        expectError(await c.post('subscriptions/', [{ amount, resource, period: '1 month' }]), 400, 'validation', 'objects');
    }
    delay.disable();
    assert.ok(delay.max / 1e6 < 500, `the event loop was held ${(delay.max / 1e6).toFixed(0)} ms`);
    // Two requests that each fit, together over the limit, count together.
    expectError(
      await c.post('subscriptions/', [
        { amount: 300, resource: 'ip', period: '1 month' },
        { amount: 201, resource: 'vlan', period: '1 month' },
      ]),
      400,
      'validation',
      'objects',
    );
    assert.deepEqual(await traces(c), before);
  });
});
