import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Decimal } from 'decimal.js';
import { expectError } from '../helpers/errors.js';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { assetPath } from '../../src/assets.js';
import { ConfigError } from '../../src/config.js';
import { ApiError } from '../../src/core/errors.js';
import { simCommand } from '../../src/cli/sim.js';
import { sendBurst, sentBetween, startSending, stopSending } from '../../src/sim/traffic.js';
import { FUTURE_YEAR } from '../helpers/clock.js';

/**
 * Licences (reference §16.5) and traffic (tx, §16.2/§16.8) as the billing poll meters them: every
 * amount is checked against a decimal calculation from the price file alone.
 */
type User = Client & { uuid: string; email: string };
const GiB = 2 ** 30;
const CYCLE_MS = 300_000;
const WINDOWS = '400cb70f-964e-43c0-b4a3-165de1ab3e01'; // the library's Windows Server image (licence msft_p73_04837_core)
const TX_RATE = 4_096;

// The catalogue that still prices the older licences (msft_lwa_00135, msft_tfa_00009), which the default (the
// recorded 2022 zrh one) does not.
const PRICE_FILE = readFileSync(assetPath('billing/prices-intel.json'), 'utf8');
const PRICES: { objects: { resource: string; level: number; currency: string; price: string; multiplier: number }[]; licenses: object[] } =
  JSON.parse(PRICE_FILE);
const D = Decimal.clone({ precision: 100 });
/** Price × amount (× seconds, for use in time) ÷ multiplier, at 20 places: from the price file alone. */
function expected(resource: string, level: number, amount: number | string, seconds: number | null): string {
  const row = PRICES.objects.find((r) => r.resource === resource && r.level === level && r.currency === 'EUR');
  assert.ok(row, `a price for ${resource} level ${level}`);
  return new D(row.price)
    .times(amount)
    .times(seconds ?? 1)
    .div(row.multiplier)
    .toDecimalPlaces(20, Decimal.ROUND_HALF_EVEN)
    .toFixed(20);
}

async function pastBoundary(srv: TestServer, offsetMs = 1_000): Promise<Date> {
  const now = srv.clock.now().getTime();
  const boundary = (Math.floor(now / CYCLE_MS) + 1) * CYCLE_MS;
  await srv.advance(boundary - now + offsetMs);
  return new Date(boundary);
}
const cycleEndingAt = (poll: Date) => poll.getTime() / CYCLE_MS - 1;
async function entriesOf(c: Client, poll: Date): Promise<Record<string, any>> {
  const res = await c.get(`ledger/?billing_cycle=${cycleEndingAt(poll)}&limit=0`);
  assert.equal(res.status, 200, res.text);
  return Object.fromEntries(res.json.objects.map((e: any) => [e.reason.split(' of ')[1].split(' ')[0], e]));
}

let dir: string;
let srv: TestServer;
before(async () => {
  // The catalogues list only `instance` licences; this one adds an `install` and a `stub` one (both priced in
  // prices-intel.json).
  dir = mkdtempSync(join(tmpdir(), 'stratus-licences-'));
  const file = join(dir, 'prices.json');
  const doc = JSON.parse(PRICE_FILE);
  doc.licenses.push(
    { burstable: false, id: 20, long_name: 'Remote Desktop Services', name: 'msft_lwa_00135', type: 'install', user_metric: '' },
    { burstable: false, id: 21, long_name: 'Exchange', name: 'msft_tfa_00009', type: 'stub', user_metric: 'users' },
  );
  writeFileSync(file, JSON.stringify(doc));
  srv = await startServer({ pricing: file, delays: 'drive.clone=0,drive.clone.per_gib=0,drive.create=0,server.boot=0,drive.write_rate=0' });
  await srv.advance(0);
});
after(async () => {
  await srv.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A clone of the Windows image, ready. */
async function windowsDrive(c: Client): Promise<any> {
  const res = await c.post(`libdrives/${WINDOWS}/action/?do=clone`, { name: 'win' });
  assert.equal(res.status, 202, res.text);
  const drive = res.json.objects?.[0] ?? res.json;
  await srv.advance(0);
  const now = (await c.get(`drives/${drive.uuid}/`)).json;
  assert.equal(now.licenses[0].license.name, 'msft_p73_04837_core');
  return now;
}

describe('licences', () => {
  test('instance (smp): per running server with the drive attached, × its cores, while it runs; a subscription covers part', async () => {
    const c = (await srv.user()) as User;
    const win = await windowsDrive(c);
    const s = (
      await c.post('servers/', {
        cpu: 4000,
        mem: 2 * GiB,
        smp: 4,
        name: 'win',
        vnc_password: 'secret',
        drives: [{ boot_order: 1, dev_channel: '0:0', device: 'virtio', drive: win.uuid }],
      })
    ).json.objects[0];
    // Not running: no licence in use (the drive holds it, but an instance licence counts running servers).
    assert.equal((await c.get('currentusage/')).json.usage.msft_p73_04837_core.using, 0);
    await pastBoundary(srv, 0);
    assert.equal((await c.post(`servers/${s.uuid}/action/?do=start`)).status, 202);
    await srv.advance(0);
    const usage = (await c.get('currentusage/')).json.usage;
    assert.deepEqual(usage.msft_p73_04837_core, { burst: 4, subscribed: 0, using: 4 });
    let poll = await pastBoundary(srv, 0);
    await pastBoundary(srv, 0);
    poll = new Date(poll.getTime() + CYCLE_MS);
    let e = await entriesOf(c, poll);
    assert.equal(e.msft_p73_04837_core.resource_amount, '4');
    assert.equal(e.msft_p73_04837_core.interval, 300);
    // Licences are priced at level 0 only (reference §16.2): the level-0 price whatever the burst level.
    assert.equal(e.msft_p73_04837_core.amount, expected('msft_p73_04837_core', 0, 4, 300));
    assert.equal(e.msft_p73_04837_core.reason.split(' at ')[0], 'Burst: 4.00 of msft_p73_04837_core for 5 minutes');
    // Two of the four bought: two remain charged.
    const sub = await c.post('subscriptions/', { resource: 'msft_p73_04837_core', amount: 2, period: '1 month', auto_renew: false });
    assert.equal(sub.status, 201, sub.text);
    assert.deepEqual((await c.get('currentusage/')).json.usage.msft_p73_04837_core, { burst: 2, subscribed: 2, using: 4 });
    poll = await pastBoundary(srv, 0);
    e = await entriesOf(c, poll);
    assert.equal(e.msft_p73_04837_core.resource_amount, '2');
    assert.equal(e.msft_p73_04837_core.amount, expected('msft_p73_04837_core', 0, 2, 300));
    // Stopped: nothing more for the licence.
    assert.equal((await c.post(`servers/${s.uuid}/action/?do=stop`)).status, 202);
    await srv.advance(0);
    await pastBoundary(srv, 0);
    poll = await pastBoundary(srv, 0);
    e = await entriesOf(c, poll);
    assert.equal(e.msft_p73_04837_core, undefined);
    assert.ok(e.dssd);
  });

  test('install and stub: per drive holding them, from its creation, running or not', async () => {
    const c = (await srv.user()) as User;
    const d = (await c.post('drives/', { media: 'disk', name: 'rds', size: GiB })).json.objects[0];
    // Licences come with library images only (a customer cannot set them): put them on as an image would.
    await srv.services.store.transaction((tx) =>
      srv.services.store.resources.patch(tx, srv.clock.now(), 'drives', d.uuid, (b) => ({
        ...b,
        licenses: [
          { amount: 3, license: { name: 'msft_lwa_00135', resource_uri: '/api/2.0/licenses/20/' }, user: null },
          { amount: 25, license: '/api/2.0/licenses/21/', user: null },
        ],
      })),
    );
    const usage = (await c.get('currentusage/')).json.usage;
    assert.deepEqual(usage.msft_lwa_00135, { burst: 3, subscribed: 0, using: 3 });
    assert.deepEqual(usage.msft_tfa_00009, { burst: 25, subscribed: 0, using: 25 });
    await pastBoundary(srv, 0);
    const poll = await pastBoundary(srv, 0);
    const e = await entriesOf(c, poll);
    assert.equal(e.msft_lwa_00135.amount, expected('msft_lwa_00135', 0, 3, 300));
    assert.equal(e.msft_tfa_00009.amount, expected('msft_tfa_00009', 0, 25, 300));
    assert.equal(e.msft_tfa_00009.reason.split(' at ')[0], 'Burst: 25.00 count of msft_tfa_00009 for 5 minutes');
  });

  test('a clone of a licensed drive keeps its licences', async () => {
    const c = (await srv.user()) as User;
    const win = await windowsDrive(c);
    const res = await c.post(`drives/${win.uuid}/action/?do=clone`, { name: 'copy' });
    assert.equal(res.status, 202, res.text);
    const copy = res.json.objects?.[0] ?? res.json;
    assert.deepEqual(copy.licenses, win.licenses);
  });
});

describe('traffic (tx)', () => {
  test('the simulated counters are exact between any two moments, whatever happened between (no byte lost to rounding)', async () => {
    const server = '00000000-0000-4000-8000-0000000000aa';
    const t0 = Date.UTC(FUTURE_YEAR, 0, 1);
    const at = (ms: number) => ({ ...srv.services, clock: { now: () => new Date(t0 + ms) } });
    const db = srv.services.store;
    await db.transaction((tx) => startSending(tx, at(0), server, 3));
    // At 1,001 ms three NICs have sent 12,300.288 bytes: a burst then must not drop the .288.
    await db.transaction((tx) => sendBurst(tx, at(1_001), server, 1_000));
    await db.transaction((tx) => stopSending(tx, at(2_333), server));
    await db.transaction((tx) => startSending(tx, at(5_000), server, 1));
    const between = async (a: number, b: number) => (await sentBetween(db.db, srv.services, t0 + a, t0 + b, [server])).get(server) ?? 0;
    const whole = 3 * TX_RATE * 2.333 + 1_000 + TX_RATE * 295; // 28,667.904 + 1,000 + 1,208,320
    assert.equal(await between(0, 300_000), Math.floor(whole));
    assert.equal((await between(0, 1_500)) + (await between(1_500, 300_000)), Math.floor(whole));
    assert.equal(await between(2_333, 5_000), 0);
    assert.equal(await between(300_000, 600_000), TX_RATE * 300);
  });

  test('a running server sends at nic.tx_rate per public NIC; each cycle charges what was sent in it, by volume', async () => {
    const c = (await srv.user()) as User;
    const s = (
      await c.post('servers/', {
        cpu: 1000,
        mem: GiB,
        name: 'web',
        vnc_password: 'secret',
        nics: [
          { ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' },
          { ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' },
        ],
      })
    ).json.objects[0];
    await pastBoundary(srv, 0);
    assert.equal((await c.post(`servers/${s.uuid}/action/?do=start`)).status, 202);
    await srv.advance(0);
    await pastBoundary(srv, 0); // the cycle it started in (less the moments the start took)
    let poll = await pastBoundary(srv, 0);
    let e = await entriesOf(c, poll);
    const perCycle = 2 * TX_RATE * 300;
    assert.equal(e.tx.resource_amount, String(perCycle));
    assert.equal(e.tx.interval, 300);
    assert.equal(e.tx.amount, expected('tx', 1, perCycle, null));
    assert.equal(e.tx.reason.split(' at ')[0], `Burst: ${(perCycle / GiB).toFixed(2)} GB of tx for 5 minutes`);
    // /currentusage/: what was sent in the cycle so far.
    // (The injected clock also follows real time: the bounds are the clock's before and after the request.)
    await srv.advance(100_000);
    const asked = srv.clock.now().getTime();
    const sentSoFar = (await c.get('currentusage/')).json.usage.tx;
    const answered = srv.clock.now().getTime();
    const bytesBy = (t: number) => (2 * TX_RATE * (t - poll.getTime())) / 1000;
    assert.ok(sentSoFar.using >= bytesBy(asked) - 1 && sentSoFar.using <= bytesBy(answered) + 1, JSON.stringify(sentSoFar));
    assert.equal(sentSoFar.burst, sentSoFar.using);
    // The operator adds a burst: it lands in this cycle, once.
    const out = await simCommand(srv.services, ['traffic', s.uuid], { send: String(3 * GiB) }, 'usage');
    assert.match(out, /bytes sent/);
    poll = await pastBoundary(srv, 0);
    e = await entriesOf(c, poll);
    assert.equal(e.tx.resource_amount, String(perCycle + 3 * GiB));
    assert.equal(e.tx.amount, expected('tx', 1, perCycle + 3 * GiB, null));
    // Stopped mid-cycle: what it sent before the stop is billed, then nothing.
    await srv.advance(60_000);
    const stopAsked = srv.clock.now().getTime();
    assert.equal((await c.post(`servers/${s.uuid}/action/?do=stop`)).status, 202);
    await srv.advance(2_000); // server.stop
    const stopped = srv.clock.now().getTime();
    const cycleStart = poll.getTime();
    poll = await pastBoundary(srv, 0);
    e = await entriesOf(c, poll);
    const sent = Number(e.tx.resource_amount);
    const by = (t: number) => (2 * TX_RATE * (t - cycleStart)) / 1000;
    assert.ok(sent >= by(stopAsked + 2_000) - 1 && sent <= by(stopped) + 1, `${sent} in ${by(stopAsked + 2_000)}..${by(stopped)}`);
    poll = await pastBoundary(srv, 0);
    assert.equal((await entriesOf(c, poll)).tx, undefined);
    // Bad operator input changes nothing.
    await assert.rejects(simCommand(srv.services, ['traffic', s.uuid], { send: '-5' }, 'usage'), ConfigError);
    await assert.rejects(simCommand(srv.services, ['traffic', s.uuid], { send: 'lots' }, 'usage'), ConfigError);
    await assert.rejects(simCommand(srv.services, ['traffic', '00000000-0000-4000-8000-000000000000'], { send: '5' }, 'usage'), ApiError);
    assert.match(await simCommand(srv.services, ['traffic', s.uuid], {}, 'usage'), /bytes sent/);
    poll = await pastBoundary(srv, 0);
    assert.equal((await entriesOf(c, poll)).tx, undefined);
  });

  test('traffic subscriptions are used up by volume, one at a time: active, then expired; the next inactive until then', async () => {
    const c = (await srv.user()) as User;
    const s = (
      await c.post('servers/', { cpu: 1000, mem: GiB, name: 'web', vnc_password: 'secret', nics: [{ ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' }] })
    ).json.objects[0];
    const perCycle = TX_RATE * 300;
    // The first covers 1.5 cycles, the second 10.
    const first = (await c.post('subscriptions/', { resource: 'tx', amount: perCycle * 1.5 })).json.objects[0];
    const second = (await c.post('subscriptions/', { resource: 'tx', amount: perCycle * 10 })).json.objects[0];
    const statuses = async () => {
      const list = (await c.get('subscriptions/?resource=tx')).json.objects;
      return Object.fromEntries(list.map((o: any) => [o.id, [o.status, o.remaining]]));
    };
    assert.deepEqual(await statuses(), { [first.id]: ['active', String(perCycle * 1.5)], [second.id]: ['inactive', String(perCycle * 10)] });
    assert.equal((await c.get('currentusage/')).json.usage.tx.subscribed, perCycle * 11.5);
    const cycleStart = (await pastBoundary(srv, 0)).getTime();
    assert.equal((await c.post(`servers/${s.uuid}/action/?do=start`)).status, 202);
    await srv.advance(0);
    const poweredOnBy = srv.clock.now().getTime();
    // A cycle (less the moments the start took): covered, no tx entry; about half of the first is left.
    let poll = await pastBoundary(srv, 0);
    assert.equal((await entriesOf(c, poll)).tx, undefined);
    const [status, remaining] = (await statuses())[first.id];
    assert.equal(status, 'active');
    const left = Number(remaining);
    assert.ok(left >= perCycle / 2 && left <= perCycle / 2 + (TX_RATE * (poweredOnBy - cycleStart)) / 1000 + 1, remaining);
    // A whole cycle: the rest of the first, then the second.
    poll = await pastBoundary(srv, 0);
    assert.equal((await entriesOf(c, poll)).tx, undefined);
    assert.deepEqual(await statuses(), { [first.id]: ['expired', '0'], [second.id]: ['active', String(perCycle * 10 - (perCycle - left))] });
    const byStatus = async (status: string) => (await c.get(`subscriptions/?resource=tx&status=${status}`)).json.objects.map((o: any) => o.id);
    assert.deepEqual(await byStatus('expired'), [first.id]);
    assert.deepEqual(await byStatus('active'), [second.id]);
    assert.deepEqual(await byStatus('notexpired'), [second.id]);
    assert.deepEqual(await byStatus('inactive'), []);
    // Nothing billed for tx while covered; the subscription prices were the only tx charges.
    const txEntries = (await c.get('ledger/?limit=0')).json.objects.filter((e: any) => /^Burst: .* of tx /.test(e.reason));
    assert.deepEqual(txEntries, []);
    expectError(await c.get('subscriptions/?status=depleted'), 400, 'validation', 'status');
  });
});
