import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Decimal } from 'decimal.js';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { assetPath } from '../../src/assets.js';
import { assignIps } from '../../src/resources/ips/ips.js';
import { assignVlans } from '../../src/resources/vlans/vlans.js';
import { setWritten } from '../../src/sim/storage.js';
import { FrozenClock } from '../helpers/clock.js';

/**
 * Issue 14's "done when": one account with an AMD and an Intel server, drives, a snapshot, an IP, a VLAN,
 * a licence and subscriptions runs through a simulated month (30 days, 8,640 billing cycles). Every ledger
 * entry is checked against a decimal calculation from the price file alone — what it must charge for, how
 * much, at which price — and the balance is the opening balance less the ledger.
 *
 * How the month is billed: the first two days a day at a time (within the catch-up window: 576 cycles,
 * each measured and billed on its own — the traffic subscription runs out and the licence subscription
 * ends in them), then the other 28 days in one move of the clock, which the catch-up path bills as one
 * span of 27 days and the last day's 288 cycles. A poll costs a few milliseconds (more on PostgreSQL and
 * under load), so billing all 8,640 cycles one by one takes a minute or more: `STRATUS_MONTH_BY_CYCLE=1`
 * does that (a day at a time for 30 days) with the same checks.
 */
type User = Client & { uuid: string; email: string };
const GiB = 2 ** 30;
const CYCLE_MS = 300_000;
const DAY_MS = 86_400_000;
const DAYS = 30;
/** Days billed a day at a time before the rest of the month moves in one step. */
const BY_CYCLE_DAYS = process.env.STRATUS_MONTH_BY_CYCLE === '1' ? DAYS : 2;
const TX_RATE = 4_096;
const WINDOWS = '400cb70f-964e-43c0-b4a3-165de1ab3e01';
const LICENCE = 'msft_p73_04837_core';
/** A location with Intel hosts prices them: the catalogue with intel_cpu/intel_mem (the default has none). */
const PRICE_FILE = 'billing/prices-intel.json';

const PRICES: { objects: { resource: string; level: number; currency: string; price: string; multiplier: number; unit: string }[] } = JSON.parse(
  readFileSync(assetPath(PRICE_FILE), 'utf8'),
);
const D = Decimal.clone({ precision: 100 });
const priceRow = (resource: string, level: number) => {
  const row = PRICES.objects.find((r) => r.resource === resource && r.level === level && r.currency === 'EUR');
  assert.ok(row, `a EUR price for ${resource} at level ${level}`);
  return row;
};
const round = (d: Decimal) => d.toDecimalPlaces(20, Decimal.ROUND_HALF_EVEN).toFixed(20);
/** A burst entry: price × amount × seconds ÷ multiplier (traffic: by volume, no seconds). Licences have level 0 only. */
function burstAmount(resource: string, amount: string, seconds: number): string {
  const row = priceRow(resource, resource.startsWith('msft_') ? 0 : 1);
  const units = new D(amount).times(resource === 'tx' ? 1 : seconds);
  return round(new D(row.price).times(units).div(row.multiplier));
}

let dir: string;
let srv: TestServer;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-month-'));
  // A location with AMD and Intel hosts.
  const caps = JSON.parse(readFileSync(assetPath('resources/capabilities/defaults.json'), 'utf8'));
  caps.hypervisors = { kvm: ['amd', 'intel'] };
  writeFileSync(join(dir, 'caps.json'), JSON.stringify(caps));
  srv = await startServer(
    {
      capabilities: join(dir, 'caps.json'),
      pricing: assetPath(PRICE_FILE),
      'opening-balance': '100000',
      // Guests do not write (the snapshot keeps the size the test gives it); operations are instant.
      delays: 'drive.clone=0,drive.clone.per_gib=0,drive.create=0,server.boot=0,snapshot.create=0,drive.write_rate=0',
    },
    undefined,
    // Time stands still but for the test's moves: how many polls the month makes does not depend on how
    // long the machine takes to bill them (real time passing added polls under load).
    { clock: new FrozenClock() },
  );
  await srv.advance(0);
});
after(async () => {
  await srv.close();
  rmSync(dir, { recursive: true, force: true });
});

async function pastBoundary(offsetMs = 0): Promise<Date> {
  const now = srv.clock.now().getTime();
  const boundary = (Math.floor(now / CYCLE_MS) + 1) * CYCLE_MS;
  await srv.advance(boundary - now + offsetMs);
  return new Date(boundary);
}

describe('a simulated month', () => {
  test('30 days, 8,640 cycles: every entry as the price file says, every second billed once, balance = opening − Σ ledger', { timeout: 600_000 }, async () => {
    const c = (await srv.user()) as User;
    const ok = <T extends { status: number; text: string; json: any }>(res: T, status = 201) => {
      assert.equal(res.status, status, res.text);
      return res.json.objects?.[0] ?? res.json;
    };
    // --- The account's things.
    const win = ok(await c.post(`libdrives/${WINDOWS}/action/?do=clone`, { name: 'win' }), 202);
    const data = ok(await c.post('drives/', { media: 'disk', name: 'data', size: 10 * GiB }));
    await srv.advance(0);
    const amd = ok(
      await c.post('servers/', {
        cpu: 2000,
        mem: GiB,
        name: 'amd',
        vnc_password: 'secret',
        cpu_type: 'amd',
        drives: [{ boot_order: 1, dev_channel: '0:0', device: 'virtio', drive: data.uuid }],
        nics: [{ ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' }],
      }),
    );
    const intel = ok(
      await c.post('servers/', {
        cpu: 4000,
        mem: 2 * GiB,
        smp: 4,
        name: 'intel',
        vnc_password: 'secret',
        cpu_type: 'intel',
        drives: [{ boot_order: 1, dev_channel: '0:0', device: 'virtio', drive: win.uuid }],
      }),
    );
    assert.equal(intel.cpu_type, 'intel');
    const snap = ok(await c.post('snapshots/', { drive: data.uuid }));
    await srv.advance(0);
    // After the snapshot, 1 GiB of the drive changes: the snapshot occupies 1 GiB of dssd.
    await srv.services.store.transaction((tx) => setWritten(tx, srv.services, { uuid: data.uuid, size: 10 * GiB }, GiB));
    await srv.services.store.transaction(async (tx) => {
      await assignIps(tx, srv.services, c.uuid, 1);
      await assignVlans(tx, srv.services, c.uuid, 1);
    });
    for (const s of [amd, intel]) assert.equal((await c.post(`servers/${s.uuid}/action/?do=start`)).status, 202);
    await srv.advance(0);
    assert.equal((await c.get(`snapshots/${snap.uuid}/`)).json.allocated_size, GiB);

    // --- The month begins at a poll; the subscriptions are bought just after it.
    await pastBoundary();
    const m0 = await pastBoundary();
    const txPerCycle = TX_RATE * 300; // one public NIC
    const txBought = 100 * 2 ** 20; // 100 MiB: about 85 cycles' traffic
    const licenceEnd = new Date(Math.ceil((m0.getTime() + DAY_MS / 2) / DAY_MS) * DAY_MS + DAY_MS / 2); // a noon 1-2 days on
    const subs = ok(
      await c.post('subscriptions/', [
        { resource: LICENCE, amount: 2, end_time: licenceEnd.toISOString(), auto_renew: false },
        { resource: 'tx', amount: txBought, auto_renew: false },
      ]),
    );
    void subs;
    const bought = (await c.get('subscriptions/?limit=0')).json.objects;
    assert.equal(bought.length, 2);
    const licenceSub = bought.find((o: any) => o.resource === LICENCE);
    assert.equal(Date.parse(licenceSub.end_time), licenceEnd.getTime());

    // --- 30 days: a day at a time (288 cycles per step, each billed on its own), then the rest at once. Timed.
    const t0 = performance.now();
    for (let day = 0; day < BY_CYCLE_DAYS; day++) await srv.advance(DAY_MS);
    if (BY_CYCLE_DAYS < DAYS) await srv.advance((DAYS - BY_CYCLE_DAYS) * DAY_MS);
    const billingMs = performance.now() - t0;
    const end = new Date(m0.getTime() + DAYS * DAY_MS);

    // --- Every entry, oldest first.
    const t1 = performance.now();
    const res = await c.get('ledger/?order_by=time&limit=0');
    assert.equal(res.status, 200);
    const ledger: any[] = res.json.objects;
    const fetchMs = performance.now() - t1;

    // 1. The chain: each entry starts from the balance the one before left; the balance is what the ledger says.
    let running = new D('100000');
    for (const e of ledger) {
      assert.equal(new D(e.initial).toFixed(20), running.toFixed(20), e.id);
      assert.equal(new D(e.end).toFixed(20), new D(e.initial).minus(e.amount).toFixed(20), e.id);
      running = new D(e.end);
    }
    const spent = ledger.reduce((sum, e) => sum.plus(e.amount), new D(0));
    const balance = new D((await c.get('balance/')).json.balance);
    assert.equal(balance.toFixed(20), new D('100000').minus(spent).toFixed(20));
    assert.equal(balance.toFixed(20), running.toFixed(20));

    // 2. Every entry's amount from the price file: purchases at level 0 for their window, burst at level 1.
    for (const e of ledger) {
      if (e.billing_cycle === null) {
        const sub = bought.find((o: any) => e.reason.startsWith(`Subscription ${o.id}:`));
        assert.ok(sub, e.reason);
        const row = priceRow(sub.resource, 0);
        const units = new D(sub.amount).times(sub.resource === 'tx' ? 1 : (Date.parse(sub.end_time) - Date.parse(sub.start_time)) / 1000);
        assert.equal(e.amount, round(new D(row.price).times(units).div(row.multiplier)), e.reason);
        continue;
      }
      const resource = e.reason.split(' of ')[1].split(' ')[0];
      assert.equal(e.amount, burstAmount(resource, e.resource_amount, e.interval), `${e.reason} (${e.id})`);
    }

    // 3. Each cycle (or span) of the month charged exactly what the account used beyond its subscriptions.
    const burst = ledger.filter((e) => e.billing_cycle !== null && Date.parse(e.poll_time) > m0.getTime());
    const byPoll = new Map<number, Map<string, any>>();
    for (const e of burst) {
      const resource = e.reason.split(' of ')[1].split(' ')[0];
      const at = Date.parse(e.poll_time.slice(0, 23) + 'Z');
      let m = byPoll.get(at);
      if (!m) byPoll.set(at, (m = new Map()));
      assert.ok(!m.has(resource), `one ${resource} entry at ${e.poll_time}`);
      m.set(resource, e);
    }
    const cycles = DAYS * 288;
    const spanCycles = BY_CYCLE_DAYS < DAYS ? (DAYS - BY_CYCLE_DAYS - 1) * 288 : 0;
    assert.equal(byPoll.size, cycles - spanCycles + (spanCycles ? 1 : 0));
    const txSent = (k: number) => k * txPerCycle; // sent since the month began, at the end of cycle k
    const txCharged = (from: number, to: number) => Math.max(0, txSent(to) - txBought) - Math.max(0, txSent(from) - txBought);
    const seconds = new Map<string, number>();
    let txTotal = 0;
    const spanAt = BY_CYCLE_DAYS * 288 + spanCycles;
    for (let k = 1; k <= cycles; k++) {
      if (k > BY_CYCLE_DAYS * 288 && k < spanAt) continue; // inside the span
      const from = k === spanAt && spanCycles ? BY_CYCLE_DAYS * 288 : k - 1;
      const poll = new Date(m0.getTime() + k * CYCLE_MS);
      const interval = (k - from) * 300;
      const want: Record<string, number> = {
        cpu: 2000, // the AMD server: amd_cpu has no price of its own, cpu prices it
        mem: GiB,
        intel_cpu: 4000,
        intel_mem: 2 * GiB,
        dssd: 40 * GiB + 10 * GiB + GiB, // the Windows clone, the data drive, the snapshot
        ip: 1,
        vlan: 1,
        [LICENCE]: poll.getTime() <= licenceEnd.getTime() ? 4 - 2 : 4, // smp 4; two subscribed until the end
      };
      if (txCharged(from, k) > 0) want.tx = txCharged(from, k);
      const got = byPoll.get(poll.getTime());
      assert.ok(got, `the poll at ${poll.toISOString()} billed`);
      assert.deepEqual(Object.fromEntries([...got].map(([r, e]) => [r, Number(e.resource_amount)])), want, `cycle ${k} of the month`);
      for (const [r, e] of got) {
        assert.equal(e.interval, interval, `${r} at ${e.poll_time}`);
        assert.equal(e.billing_cycle, poll.getTime() / CYCLE_MS - 1);
        if (r === 'tx') txTotal += Number(e.resource_amount);
        else seconds.set(r, (seconds.get(r) ?? 0) + e.interval);
      }
    }
    // Every second of the month billed once for what is used in time; every byte sent beyond the subscription once.
    for (const [r, n] of seconds) assert.equal(n, DAYS * 86_400, r);
    assert.equal(txTotal, txSent(cycles) - txBought);
    // The traffic subscription was used up (expired), the licence one ended; the levels stayed at 1.
    const after = Object.fromEntries((await c.get('subscriptions/?limit=0')).json.objects.map((o: any) => [o.resource, [o.status, o.remaining]]));
    assert.deepEqual(after, { [LICENCE]: ['expired', '2'], tx: ['expired', '0'] });
    const levels = (await c.get('pricing/?limit=1')).json.current;
    for (const r of ['cpu', 'mem', 'intel_cpu', 'intel_mem', 'dssd', 'ip', 'vlan', 'tx']) assert.equal(levels[r], 1, r);
    assert.ok(srv.clock.now().getTime() >= end.getTime());
    // The month's runtime, for the record (the test's own budget: well under its timeout).
    console.log(
      `# month: ${cycles} cycles (${cycles - spanCycles} polls) billed in ${(billingMs / 1000).toFixed(1)} s; ${ledger.length} entries fetched in ${(fetchMs / 1000).toFixed(1)} s`,
    );
  });
});
