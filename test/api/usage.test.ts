import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Decimal } from 'decimal.js';
import { expectError } from '../helpers/errors.js';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { golden } from '../helpers/golden.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { resetAccount } from '../../src/admin/reset.js';

/**
 * The usage records of reference §16.7: `/usage/` (what each object used at each poll), `/burstusage/`
 * (each account's burst per charged resource per poll, as the ledger charged it) and `/dailyburstusage/`
 * (their sums per day), checked against the ledger and the known usage, exactly.
 */
type User = Client & { uuid: string; email: string };
const GiB = 2 ** 30;
const CYCLE_MS = 300_000;
const BOOT_MS = 3_000;
const D = Decimal.clone({ precision: 100 });

async function pastBoundary(srv: TestServer, offsetMs = 1_000): Promise<Date> {
  const now = srv.clock.now().getTime();
  const boundary = (Math.floor(now / CYCLE_MS) + 1) * CYCLE_MS;
  await srv.advance(boundary - now + offsetMs);
  return new Date(boundary);
}

async function list(c: Client, path: string): Promise<any[]> {
  const res = await c.get(path);
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.meta.total_count >= res.json.objects.length, true);
  return res.json.objects;
}

/** The poll time as every record and ledger entry prints it. */
const iso = (d: Date) => d.toISOString().replace(/\.(\d{3})Z$/, '.$1000+00:00');
/** The resource a ledger burst entry charged ("Burst: 2.00 GHz of cpu for …"). */
const chargedOf = (e: any): string => e.reason.split(' of ')[1].split(' ')[0];

describe('usage records: /usage/, /burstusage/, /dailyburstusage/ (reference §16.7)', () => {
  let srv: TestServer;
  let alice: User, bob: User;
  let server: any, drive: any;
  let p1: Date, p2: Date;
  before(async () => {
    srv = await startServer();
    [alice, bob] = [await srv.user(), await srv.user()];
    await srv.advance(0); // the recurring timers exist from here on
    await pastBoundary(srv, 60_000);
    server = (await alice.post('servers/', { cpu: 2000, mem: GiB, name: 'metered', vnc_password: 'secret' })).json.objects[0];
    drive = (await alice.post('drives/', { media: 'disk', name: 'data', size: 10 * GiB })).json.objects[0];
    assert.equal((await alice.post(`servers/${server.uuid}/action/?do=start`)).status, 202);
    await srv.advance(BOOT_MS);
    p1 = await pastBoundary(srv); // the server's first, partial cycle
    p2 = await pastBoundary(srv); // a whole cycle
  });
  after(() => srv.close());

  test('/usage/: each object at each poll, in base units under its most specific key, newest first', async () => {
    const records = await list(alice, 'usage/?limit=0');
    const want = (p: Date) => [
      { amount: '2000', poll_time: iso(p), resource: 'amd_cpu', uuid: server.uuid },
      { amount: String(GiB), poll_time: iso(p), resource: 'amd_mem', uuid: server.uuid },
      { amount: String(10 * GiB), poll_time: iso(p), resource: 'dssd', uuid: drive.uuid },
    ];
    const byKey = (a: any, b: any) => a.resource.localeCompare(b.resource);
    assert.equal(records.length, 6);
    assert.deepEqual(records.slice(0, 3).sort(byKey), want(p2));
    assert.deepEqual(records.slice(3).sort(byKey), want(p1));
    assert.deepEqual(await list(bob, 'usage/?limit=0'), []);
  });

  test('/burstusage/: per charged resource per poll, the ledger amounts and the burst units exactly', async () => {
    const ledger = await list(alice, 'ledger/?limit=0');
    const records = await list(alice, 'burstusage/?limit=0');
    assert.equal(records.length, 6);
    for (const r of records) {
      assert.deepEqual(Object.keys(r).sort(), ['amount', 'date', 'resource_type', 'usage', 'uuid']);
      assert.match(r.uuid, /^[0-9a-f-]{36}$/);
      const entries = ledger.filter((e) => e.poll_time === r.date && chargedOf(e) === r.resource_type);
      assert.ok(entries.length >= 1, `${r.resource_type} at ${r.date}`);
      const sum = entries.reduce((s, e) => s.plus(e.amount), new D(0));
      assert.equal(r.amount, sum.toFixed(20));
      assert.equal(
        r.usage,
        entries.reduce((s, e) => s + Number(e.resource_amount), 0),
      );
    }
    const at = (p: Date) =>
      records
        .filter((r) => r.date === iso(p))
        .map((r) => [r.resource_type, r.usage])
        .sort();
    assert.deepEqual(at(p2), [
      ['cpu', 2000],
      ['dssd', 10 * GiB],
      ['mem', GiB],
    ]);
    assert.deepEqual(at(p1), at(p2));
    // Newest first; one record by its uuid; another account sees none of them.
    assert.ok(records[0].date >= records[5].date);
    const one = await alice.get(`burstusage/${records[0].uuid}/`);
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.json, records[0]);
    expectError(await bob.get(`burstusage/${records[0].uuid}/`), 404, 'notexist', null);
    expectError(await alice.get('burstusage/not-a-record/'), 404, 'notexist', null);
    assert.deepEqual(await list(bob, 'burstusage/'), []);
  });

  test('/dailyburstusage/: per day and resource, the sum of the day’s burst records; usage in unit-days', async () => {
    const ledger = await list(alice, 'ledger/?limit=0');
    const days = await list(alice, 'dailyburstusage/?limit=0');
    const expected = new Map<string, { amount: Decimal; unitSeconds: bigint }>();
    for (const e of ledger) {
      if (e.billing_cycle === null) continue;
      const key = `${e.poll_time.slice(0, 10)} ${chargedOf(e)}`;
      const x = expected.get(key) ?? { amount: new D(0), unitSeconds: 0n };
      x.amount = x.amount.plus(e.amount);
      x.unitSeconds += BigInt(e.resource_amount) * BigInt(e.interval);
      expected.set(key, x);
    }
    assert.equal(days.length, expected.size);
    for (const d of days) {
      assert.deepEqual(Object.keys(d).sort(), ['amount', 'date', 'resource_type', 'usage']);
      assert.match(d.date, /^\d{4}-\d{2}-\d{2}$/);
      const x = expected.get(`${d.date} ${d.resource_type}`);
      assert.ok(x, `${d.date} ${d.resource_type}`);
      assert.equal(d.amount, x.amount.toFixed(20));
      assert.equal(d.usage, Number(x.unitSeconds / 86_400n));
    }
    // Newest day first, resources in order within a day.
    const order = days.map((d) => `${d.date} ${d.resource_type}`);
    assert.deepEqual(
      order,
      [...order].sort((a, b) => b.slice(0, 10).localeCompare(a.slice(0, 10)) || a.localeCompare(b)),
    );
    assert.deepEqual(await list(bob, 'dailyburstusage/'), []);
  });

  test('filters: date, date__lt/lte/gt/gte, poll_time_gt/lt (and the __ forms), day filters; paging', async () => {
    const t1 = encodeURIComponent(iso(p1));
    const t2 = encodeURIComponent(iso(p2));
    const dates = async (q: string) => [...new Set((await list(alice, `burstusage/?limit=0&${q}`)).map((r) => r.date))].sort();
    assert.deepEqual(await dates(`date__gt=${t1}&date__lte=${t2}`), [iso(p2)]);
    assert.deepEqual(await dates(`date__gte=${t1}&date__lt=${t2}`), [iso(p1)]);
    assert.deepEqual(await dates(`date=${t2}`), [iso(p2)]);
    assert.deepEqual(
      await dates(`date=${iso(p2).slice(0, 10)}&date__lte=${t2}`),
      iso(p1).slice(0, 10) === iso(p2).slice(0, 10) ? [iso(p1), iso(p2)] : [iso(p2)],
    );
    // A date and time without a zone is UTC.
    assert.deepEqual(await dates(`date=${iso(p2).slice(0, 19)}`), [iso(p2)]);
    const polls = async (q: string) => [...new Set((await list(alice, `usage/?limit=0&${q}`)).map((r) => r.poll_time))].sort();
    for (const gt of ['poll_time_gt', 'poll_time__gt']) assert.deepEqual(await polls(`${gt}=${t1}&poll_time__lte=${t2}`), [iso(p2)]);
    for (const lt of ['poll_time_lt', 'poll_time__lt']) assert.deepEqual(await polls(`${lt}=${t2}&poll_time__gte=${t1}`), [iso(p1)]);
    const day2 = iso(p2).slice(0, 10);
    const next = new Date(Date.parse(day2) + 86_400_000).toISOString().slice(0, 10);
    assert.deepEqual([...new Set((await list(alice, `dailyburstusage/?date__gt=${day2}`)).map((d) => d.date))], []);
    assert.ok(
      (await list(alice, `dailyburstusage/?date__lt=${next}&date__gt=${new Date(Date.parse(day2) - 86_400_000).toISOString().slice(0, 10)}`)).every(
        (d) => d.date === day2,
      ),
    );
    assert.equal((await list(alice, `dailyburstusage/?date__lt=${day2}T00:00:01`)).filter((d) => d.date === day2).length, 3);
    assert.equal((await list(alice, `dailyburstusage/?date__lt=${day2}`)).filter((d) => d.date === day2).length, 0);
    // Paging in the database: pages of the whole list, with its total.
    const all = await list(alice, 'usage/?limit=0');
    const page = await alice.get('usage/?limit=2&offset=1');
    assert.equal(page.status, 200, page.text);
    assert.equal(page.json.meta.total_count, all.length);
    assert.deepEqual(page.json.objects, all.slice(1, 3));
    // Pages that cross from one poll's records into the next, and past the end.
    for (const [limit, offset] of [
      [3, 2],
      [4, 1],
      [1, 5],
      [5, 4],
      [0, 4],
    ]) {
      const p = await alice.get(`usage/?limit=${limit}&offset=${offset}`);
      assert.equal(p.json.meta.total_count, all.length);
      assert.deepEqual(p.json.objects, limit === 0 ? all.slice(offset) : all.slice(offset, offset + limit), `limit ${limit} offset ${offset}`);
    }
    assert.deepEqual((await alice.get(`usage/?limit=2&offset=${all.length}`)).json.objects, []);
    const first = await alice.get('burstusage/');
    assert.equal(first.json.meta.limit, 20);
    assert.equal((await alice.get('dailyburstusage/?limit=1')).json.objects.length, 1);
  });

  test('/burstusage/ without a date filter is the last 30 days', async () => {
    const old = srv.clock.now().getTime() - 31 * 86_400_000;
    await srv.services.store.db
      .insertInto('burst_usage')
      .values({
        uuid: '00000000-0000-4000-8000-000000000031',
        owner_uuid: alice.uuid,
        date_ms: old,
        resource_type: 'cpu',
        amount: '1.00000000000000000000',
        usage: 1,
      })
      .execute();
    const recent = await list(alice, 'burstusage/?limit=0');
    assert.ok(!recent.some((r) => r.uuid === '00000000-0000-4000-8000-000000000031'));
    const older = await list(alice, `burstusage/?limit=0&date__lt=${encodeURIComponent(iso(new Date(old + 1)))}`);
    assert.deepEqual(
      older.map((r) => [r.uuid, r.usage, r.date]),
      [['00000000-0000-4000-8000-000000000031', 1, iso(new Date(old))]],
    );
  });

  test('bad filter values are a 400 naming the filter; nothing else is read', async () => {
    expectError(await alice.get('burstusage/?date=yesterday'), 400, 'validation', 'date');
    expectError(await alice.get('burstusage/?date__gt=2024-13-45'), 400, 'validation', 'date__gt');
    expectError(await alice.get('burstusage/?date__lte=1'), 400, 'validation', 'date__lte');
    expectError(await alice.get('dailyburstusage/?date__lt=soon'), 400, 'validation', 'date__lt');
    expectError(await alice.get('dailyburstusage/?date__gt=2024-01-01T25:00:00'), 400, 'validation', 'date__gt');
    expectError(await alice.get('usage/?poll_time_gt=abc'), 400, 'validation', 'poll_time_gt');
    expectError(await alice.get('usage/?poll_time__lt=2024-01-01Tnoon'), 400, 'validation', 'poll_time__lt');
  });

  test('XML and the schema as recorded', async () => {
    const res = await alice.get('burstusage/?limit=1&format=xml');
    assert.equal(res.status, 200, res.text);
    assert.match(res.headers['content-type'] ?? '', /xml/);
    assert.match(res.text, /<resource_type>(cpu|mem|dssd)<\/resource_type>/);
    for (const path of ['dailyburstusage/?limit=1&format=xml', 'usage/?limit=1&format=xml']) {
      const x = await alice.get(path);
      assert.equal(x.status, 200, x.text);
      assert.match(x.text, /<amount>/);
    }
    const schema = await alice.get('burstusage/schema/');
    assert.equal(schema.status, 200);
    assert.deepEqual(schema.json, golden('response_burst_usage_schema'));
  });

  test('writes are refused: the records are read-only', async () => {
    for (const path of ['burstusage/', 'dailyburstusage/', 'usage/']) {
      const res = await alice.post(path, { amount: '1', resource_type: 'cpu', usage: 1 });
      assert.equal(res.status, 405, `${path} ${res.text}`);
    }
    assert.equal((await list(alice, 'usage/?limit=0')).length >= 6, true);
  });

  test('traffic is a volume: the day’s tx usage is the bytes sent beyond subscriptions, the sum of its burst records', async () => {
    const dave = await srv.user();
    const s = (
      await dave.post('servers/', { cpu: 1000, mem: GiB, name: 'sender', vnc_password: 'secret', nics: [{ ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' }] })
    ).json.objects[0];
    assert.equal((await dave.post(`servers/${s.uuid}/action/?do=start`)).status, 202);
    await srv.advance(BOOT_MS);
    await pastBoundary(srv);
    await pastBoundary(srv);
    const tx = (await list(dave, 'burstusage/?limit=0')).filter((r) => r.resource_type === 'tx');
    assert.ok(tx.length >= 2, 'a burst record of traffic per poll');
    assert.ok(tx.every((r) => r.usage > 0));
    const daily = (await list(dave, 'dailyburstusage/?limit=0')).filter((r) => r.resource_type === 'tx');
    for (const day of new Set(tx.map((r) => r.date.slice(0, 10)))) {
      const ofDay = tx.filter((r) => r.date.startsWith(day));
      const row = daily.find((r) => r.date === day);
      assert.ok(row, `a daily row for ${day}`);
      assert.equal(
        row.usage,
        ofDay.reduce((n, r) => n + r.usage, 0),
      );
      assert.equal(row.amount, ofDay.reduce((sum, r) => sum.plus(r.amount), new D(0)).toFixed(20));
    }
  });

  test('a whole day of burst: 288 polls add up to the day; usage is the day’s average use', async () => {
    const carol = await srv.user();
    const big = (await carol.post('drives/', { media: 'disk', name: 'big', size: 300 * GiB })).json.objects[0];
    // From the next 00:00 UTC at least 10 minutes away (the drive is in use all of its first cycle), one whole day.
    const now = srv.clock.now().getTime();
    const midnight = Math.ceil((now + 600_000) / 86_400_000) * 86_400_000;
    // Two steps, so each poll is billed as its own cycle (a jump of more than a day bills one span first).
    await srv.advance(midnight - now);
    await srv.advance(86_400_000 + 1_000);
    const day = new Date(midnight).toISOString().slice(0, 10);
    const [row] = await list(
      carol,
      `dailyburstusage/?date__gt=${new Date(midnight - 1).toISOString().slice(0, 10)}&date__lt=${new Date(midnight + 86_400_000).toISOString().slice(0, 10)}`,
    );
    assert.deepEqual([row.date, row.resource_type, row.usage], [day, 'dssd', 300 * GiB]);
    const burst = await list(carol, `burstusage/?date=${day}&limit=0`);
    assert.equal(burst.length, 288);
    assert.equal(row.amount, burst.reduce((s, r) => s.plus(r.amount), new D(0)).toFixed(20));
    assert.ok(burst.every((r) => r.date.startsWith(day) && r.usage === 300 * GiB));
    const objects = await list(carol, `usage/?poll_time__gte=${day}T00:00:00Z&poll_time_lt=${day}T23:59:59Z&limit=0`);
    assert.equal(objects.length, 288);
    assert.ok(objects.every((o) => o.uuid === big.uuid && o.resource === 'dssd' && o.amount === String(300 * GiB)));
  });
});

describe('usage records are kept for the retention, and go with a reset account', () => {
  let srv: TestServer;
  before(async () => {
    srv = await startServer({ 'usage-retention': '1h' });
    await srv.advance(0);
  });
  after(() => srv.close());

  test('the hourly prune (a durable timer) deletes records older than the retention; nothing newer', async () => {
    const dave = await srv.user();
    await dave.post('drives/', { media: 'disk', name: 'kept', size: GiB });
    await srv.advance(2 * 3_600_000);
    const due = async () =>
      Number(
        (
          await srv.services.store.db
            .selectFrom('timers')
            .select('due_ms')
            .where('kind', '=', 'usage.prune')
            .where('state', '=', 'pending')
            .executeTakeFirstOrThrow()
        ).due_ms,
      );
    const at = await due();
    assert.ok(at > srv.clock.now().getTime());
    const cutoff = at - 3_600_000;
    const before = await list(dave, 'usage/?limit=0');
    assert.ok(
      before.some((r) => Date.parse(r.poll_time) < cutoff),
      'records older than the coming cutoff exist',
    );
    await srv.advance(at - srv.clock.now().getTime());
    const afterPrune = await list(dave, 'usage/?limit=0');
    assert.ok(afterPrune.length > 0);
    assert.ok(afterPrune.every((r) => Date.parse(r.poll_time) >= cutoff));
    // What was within the retention is all still there.
    const kept = before.filter((r) => Date.parse(r.poll_time) >= cutoff);
    assert.deepEqual(afterPrune.slice(afterPrune.length - kept.length), kept);
    const burst = await list(dave, `burstusage/?limit=0&date__gt=${encodeURIComponent(iso(new Date(0)))}`);
    assert.ok(burst.length > 0 && burst.every((r) => Date.parse(r.date) >= cutoff));
    const days = await list(dave, 'dailyburstusage/?limit=0');
    assert.ok(days.every((d) => d.date >= new Date(cutoff).toISOString().slice(0, 10)));
    // The next prune is an hour on.
    assert.equal(await due(), at + 3_600_000);
  });

  test('a one-account reset empties its records; another account keeps its own', async () => {
    const [erin, frank] = [await srv.user(), await srv.user()];
    await erin.post('drives/', { media: 'disk', name: 'e', size: GiB });
    await frank.post('drives/', { media: 'disk', name: 'f', size: GiB });
    await srv.advance(2 * CYCLE_MS);
    for (const c of [erin, frank]) for (const path of ['usage/', 'burstusage/', 'dailyburstusage/']) assert.ok((await list(c, path)).length > 0, path);
    const frankBefore = await list(frank, 'usage/?limit=0');
    await resetAccount(srv.services, erin.uuid);
    for (const path of ['usage/', 'burstusage/', 'dailyburstusage/']) assert.deepEqual(await list(erin, path), [], path);
    assert.deepEqual(await list(frank, 'usage/?limit=0'), frankBefore);
  });

  test('a retention that is not a duration stops start-up', () => {
    for (const bad of ['5x', '0m', '', '31', '-1d', '3651d'])
      assert.throws(
        () => loadConfig({ 'usage-retention': bad }, {}),
        (e: unknown) => e instanceof ConfigError && /usage-retention/.test(e.message),
        bad,
      );
    assert.equal(loadConfig({ 'usage-retention': '12h' }, {}).usageRetentionMs, 12 * 3_600_000);
    assert.equal(loadConfig({}, {}).usageRetentionMs, 31 * 86_400_000);
  });
});
