import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Decimal } from 'decimal.js';
import { Client } from '../helpers/client.js';
import { cli } from '../helpers/cli.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { startServer, type TestServer } from '../helpers/server.js';

/**
 * The admin plane's state actions and their operator commands: seed (idempotent), reset of one account,
 * export and import of the whole state, the shared clock, the clone fault; bad input changes nothing.
 */
const TOKEN = 'admin-token-for-tests-0123456789';
const A = '/_stratus/admin/';
let srv: TestServer;
let admin: Client;
let dir: string;

before(async () => {
  srv = await startServer({ 'admin-token': TOKEN, delays: 'drive.create=0,server.boot=0,drive.clone=1000' });
  srv.app.schedulerProbe = srv.scheduler;
  admin = new Client(srv.base);
  dir = mkdtempSync(join(tmpdir(), 'stratus-state-'));
});
after(async () => {
  await srv.close();
  rmSync(dir, { recursive: true, force: true });
});

const call = (method: string, path: string, body?: unknown) => admin.request(method, `${A}${path}`, { body, headers: { authorization: `Bearer ${TOKEN}` } });

const SEED = {
  users: [
    {
      email: 'Seeded@Example.com',
      password: 'seeded-secret',
      state: 'REGULAR',
      rate_limits: 'off',
      balance: '250.50',
      ips: 2,
      vlans: 1,
      drives: [{ name: 'boot', size: 1 << 30, media: 'disk' }],
      servers: [
        {
          name: 'web',
          cpu: 1000,
          mem: 536870912,
          vnc_password: 'secret',
          drives: [{ drive: 'boot', dev_channel: '0:0', device: 'virtio', boot_order: 1 }],
        },
      ],
      tags: [{ name: 'prod', resources: ['web', 'boot'] }],
    },
    { email: 'second@example.com', password: 'second-secret', state: 'trial' },
  ],
};

const seeded = () => new Client(srv.base, { email: 'seeded@example.com', password: 'seeded-secret' });

async function inventory(c: Client) {
  const names = async (kind: string) =>
    ((await c.get(`${kind}/detail/?limit=0`)).json.objects as { name?: string; uuid: string }[]).map((o) => o.name ?? o.uuid).sort();
  return { drives: await names('drives'), servers: await names('servers'), tags: await names('tags'), ips: await names('ips'), vlans: await names('vlans') };
}

describe('seeding', () => {
  test('creates users and what they hold; names link servers to drives and tags to both; seeding twice changes nothing', async () => {
    const first = await call('POST', 'seed', SEED);
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(first.json.created, { users: 2, balance: 1, ips: 2, vlans: 1, drives: 1, servers: 1, tags: 1 });
    const c = seeded();
    const inv = await inventory(c);
    assert.deepEqual([inv.drives, inv.servers, inv.tags], [['boot'], ['web'], ['prod']]);
    assert.equal(inv.ips.length, 2);
    assert.equal(inv.vlans.length, 1);
    const server = (await c.get('servers/?limit=0')).json.objects[0];
    const full = (await c.get(`servers/${server.uuid}/`)).json;
    const drive = (await c.get('drives/?limit=0')).json.objects[0];
    assert.equal(full.drives[0].drive.uuid, drive.uuid, 'the server has the seeded drive');
    const tag = (await c.get('tags/?limit=0')).json.objects[0];
    assert.equal((await c.get(`tags/${tag.uuid}/`)).json.resources.length, 2);
    assert.equal((await new Client(srv.base, { email: 'second@example.com', password: 'second-secret' }).get('profile/')).json.state, 'TRIAL');

    const again = await call('POST', 'seed', SEED);
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.json.created, {});
    assert.deepEqual(again.json.existing, { users: 2, balance: 1, ips: 2, vlans: 1, drives: 1, servers: 1, tags: 1 });
    // The balance is the seed's, and the ledger explains it (one payment entry, not two). The clock is real: a
    // billing poll may have charged the seeded IPs, VLAN and drive meanwhile, and the ledger shows that too.
    const ledger = (await c.get('ledger/?limit=0')).json.objects as { reason: string; amount: string }[];
    assert.equal(ledger.filter((e) => / seed - /.test(e.reason)).length, 1);
    const charged = ledger.filter((e) => !/ seed - /.test(e.reason)).reduce((sum, e) => sum.plus(e.amount), new Decimal(0));
    assert.ok(charged.gte(0) && charged.lt('0.01'), `charges meanwhile: ${charged}`);
    assert.equal(new Decimal((await c.get('balance/')).json.balance).toFixed(20), new Decimal('250.5').minus(charged).toFixed(20));
    assert.deepEqual(await inventory(c), inv);
  });

  test('malformed seeds are 400 naming the entry and create nothing', async () => {
    const cases: [unknown, string][] = [
      [{ users: [{ email: 'rich@example.com', balance: '-100' }] }, 'users[0].balance'],
      [{ users: [{ email: 'x@example.com', colour: 'red' }] }, 'users[0].colour'],
      [{ people: [] }, 'people'],
      [{ users: [{ email: 'x@example.com', drives: [{ size: 1 }] }] }, 'users[0].drives[0].name'],
      [{ users: [{ email: 'x@example.com', ips: -1 }] }, 'users[0].ips'],
      [{ users: [{ email: 'x@example.com' }, { email: 'X@example.com' }] }, 'users[1].email'],
      [{ users: [{ email: 'x@example.com', state: 'ADMIN' }] }, 'users[0].state'],
      [{ users: [{ email: 'x@example.com', rate_limits: 'GET=lots' }] }, 'users[0].rate_limits'],
      [[1], 'seed'],
    ];
    for (const [doc, point] of cases) {
      const res = await call('POST', 'seed', doc);
      assert.equal(res.status, 400, JSON.stringify(doc));
      assert.equal(res.json[0].error_type, 'validation');
      assert.equal(res.json[0].error_point, point);
    }
    const users = await srv.services.store.db.selectFrom('users').select('email').where('email', 'in', ['rich@example.com', 'x@example.com']).execute();
    assert.deepEqual(users, []);
  });

  test('stratus seed FILE: the same, idempotent; a bad file is exit code 2 with one line', async () => {
    const url = engine === 'sqlite' ? join(dir, 'seed.db') : (await freshDatabase()).url;
    const other = await startServer({ db: url });
    try {
      const file = join(dir, 'seed.json');
      writeFileSync(file, JSON.stringify(SEED));
      const first = await cli(['seed', file, '--db', url]);
      assert.equal(first.status, 0, first.stderr);
      assert.match(first.stdout, /created 2 users, 1 balance, 2 ips, 1 vlans, 1 drives, 1 servers, 1 tags/);
      const second = await cli(['seed', file, '--db', url]);
      assert.match(second.stdout, /created nothing; already there 2 users, 1 balance, 2 ips, 1 vlans, 1 drives, 1 servers, 1 tags/);
      writeFileSync(join(dir, 'bad.json'), '{"users": [{"email": "a@example.com", "balance": "lots"}]}');
      const bad = await cli(['seed', join(dir, 'bad.json'), '--db', url]);
      assert.equal(bad.status, 2);
      assert.match(bad.stderr, /^stratus: .*bad\.json: users\[0\]\.balance: balance is a non-negative decimal/);
      // A value the kind refuses names the seed entry, not only the field.
      writeFileSync(join(dir, 'nomedia.json'), '{"users": [{"email": "m@example.com", "drives": [{"name": "boot", "size": 1073741824}]}]}');
      const nomedia = await cli(['seed', join(dir, 'nomedia.json'), '--db', url]);
      assert.equal(nomedia.status, 2);
      assert.match(nomedia.stderr, /^stratus: .*nomedia\.json: users\[0\]\.drives\[0\]\.media: .*\(the entry named "boot"\)\n$/);
      assert.equal((await cli(['seed', join(dir, 'missing.json'), '--db', url])).status, 2);
      // users add --limits: a refused rule creates nothing.
      const refused = await cli(['users', 'add', 'lim@example.com', '--limits', 'GET=lots', '--db', url]);
      assert.equal(refused.status, 2);
      assert.match(refused.stderr, /^stratus: /);
      const added = await cli(['users', 'add', 'lim@example.com', '--limits', 'off', '--password', 'lim-secret', '--db', url]);
      assert.equal(added.status, 0, added.stderr);
      assert.match((await cli(['users', 'limits', 'lim@example.com', '--db', url])).stdout, /account override: off/);
      writeFileSync(join(dir, 'garbage.json'), '{nope');
      assert.match((await cli(['seed', join(dir, 'garbage.json'), '--db', url])).stderr, /is not JSON/);
    } finally {
      await other.close();
    }
  });
});

describe('reset of one account', () => {
  test('empties the account (its login, state and limits stay); other accounts keep everything', async () => {
    const a = await srv.user();
    const b = await srv.user();
    const da = (await a.post('drives/', { name: 'a', size: 1 << 30, media: 'disk' })).json.objects[0].uuid;
    await a.post('tags/', { name: 'ta', resources: [da] });
    await a.post('servers/', { name: 'sa', cpu: 1000, mem: 536870912, vnc_password: 'pw' });
    await b.post('drives/', { name: 'b', size: 1 << 30, media: 'disk' });
    // Its money too: a subscription (with its renewal timers), the ledger it wrote, the balance.
    assert.equal((await a.post('subscriptions/', [{ amount: 1, period: '1 month', resource: 'vlan' }])).status, 201);
    const opening = (await b.get('balance/')).json.balance;
    const res = await call('POST', 'reset', { email: a.email });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.deleted.resources, 4); // drive, tag, server and the subscription's VLAN
    assert.equal(res.json.deleted.subscriptions, 1);
    assert.ok(res.json.deleted.timers >= 1, JSON.stringify(res.json.deleted));
    assert.equal((await a.get('subscriptions/')).json.meta.total_count, 0);
    assert.equal((await a.get('ledger/')).json.meta.total_count, 0);
    assert.equal((await a.get('balance/')).json.balance, opening);
    assert.equal(res.json.email, a.email);
    const inv = await inventory(a);
    assert.deepEqual([inv.drives, inv.servers, inv.tags], [[], [], []]);
    assert.equal((await a.get('drives/')).json.meta.total_count, 0, 'its counts are 0');
    assert.equal((await b.get('drives/')).json.meta.total_count, 1, 'another account is untouched');
    assert.equal((await a.post('drives/', { name: 'again', size: 1 << 30, media: 'disk' })).status, 201, 'the account works on');
    assert.equal((await call('POST', 'reset', { email: 'nobody@example.com' })).status, 404);
    assert.equal((await call('POST', 'reset', { email: a.email, all: true })).status, 400);

    const url = engine === 'sqlite' ? join(dir, 'reset-one.db') : (await freshDatabase()).url;
    const other = await startServer({ db: url });
    try {
      const u = await other.user();
      await u.post('tags/', { name: 't' });
      const out = await cli(['reset', u.email, '--db', url]);
      assert.equal(out.status, 0, out.stderr);
      assert.match(out.stdout, /^reset .*: 1 object\(s\) and their state deleted; the login stays\n$/);
      assert.equal((await u.get('tags/')).json.meta.total_count, 0);
      assert.equal((await cli(['reset', 'nobody@example.com', '--db', url])).status, 2);
    } finally {
      await other.close();
    }
  });
});

describe('export and import', () => {
  test('round trip: the state after an import is the exported one, in a used database and in a fresh one', async () => {
    const u = await srv.user();
    const d = (await u.post('drives/', { name: 'keep', size: 1 << 30, media: 'disk' })).json.objects[0];
    await call('POST', 'clock', { advance: '1h' });
    const clockAtExport = (await call('GET', 'clock')).json.offset_ms;
    const exported = await call('GET', 'state');
    assert.equal(exported.status, 200);
    assert.equal(exported.json.format, 'stratus-state');
    for (const t of ['users', 'resources', 'timers', 'sim_state', 'settings', 'audit_log']) assert.ok(Array.isArray(exported.json.tables[t]), t);
    const before = await inventory(u);
    // Change everything: a new drive, a renamed one, another user.
    await u.post('drives/', { name: 'later', size: 1 << 30, media: 'disk' });
    assert.equal((await u.put(`drives/${d.uuid}/`, { name: 'renamed', size: 1 << 30, media: 'disk' })).status, 200);
    const late = await srv.user();
    await call('POST', 'clock', { advance: '1h' });
    const imported = await call('POST', 'state', exported.json);
    assert.equal(imported.status, 200, imported.text);
    assert.ok(Math.abs(imported.json.offset_ms - clockAtExport) < 1000, 'the clock is part of the state');
    assert.deepEqual(await inventory(u), before);
    assert.equal((await u.get(`drives/${d.uuid}/`)).json.name, 'keep', 'not a cached later version');
    assert.equal((await late.get('profile/')).status, 401, 'a user made after the export is gone');
    // The imported keys go on: a new object gets a fresh key.
    assert.equal((await u.post('drives/', { name: 'after', size: 1 << 30, media: 'disk' })).status, 201);
    assert.equal((await u.put(`drives/${d.uuid}/`, { name: 'renamed-again', size: 1 << 30, media: 'disk' })).json.name, 'renamed-again');

    // The same document into a fresh database through the command line.
    const url = engine === 'sqlite' ? join(dir, 'fresh.db') : (await freshDatabase()).url;
    const fresh = await startServer({ db: url });
    try {
      const file = join(dir, 'state.json');
      writeFileSync(file, JSON.stringify(exported.json));
      const res = await cli(['import', file, '--db', url]);
      assert.equal(res.status, 0, res.stderr);
      // The running server sees the import at once: a new token for every kept answer, no wait.
      assert.deepEqual(await inventory(new Client(fresh.base, { email: u.email, password: u.password })), before);
      const out = join(dir, 'again.json');
      const exp = await cli(['export', out, '--db', url]);
      assert.equal(exp.status, 0, exp.stderr);
      const again = JSON.parse(readFileSync(out, 'utf8'));
      assert.deepEqual(Object.keys(again.tables).sort(), Object.keys(exported.json.tables).sort());
      assert.equal(again.tables.resources.length, exported.json.tables.resources.length);
    } finally {
      await fresh.close();
    }
  });

  test('a state file of another schema, or not a state file, is refused and changes nothing', async () => {
    const u = await srv.user();
    const doc = (await call('GET', 'state')).json;
    const cases: [unknown, string][] = [
      [{ ...doc, schema: '0001_initial' }, 'schema'],
      [{ ...doc, format: 'something' }, 'format'],
      [{ ...doc, format_version: 99 }, 'format_version'],
      [{ ...doc, tables: { ...doc.tables, users: undefined } }, 'tables'],
      [{ ...doc, tables: { ...doc.tables, extra: [] } }, 'tables'],
    ];
    for (const [bad, point] of cases) {
      const res = await call('POST', 'state', bad);
      assert.equal(res.status, 400, point);
      assert.equal(res.json[0].error_point, point);
    }
    assert.match((await call('POST', 'state', cases[0][0])).json[0].error_message, /exported from schema 0001_initial/);
    assert.equal((await u.get('profile/')).status, 200, 'nothing was replaced');
    const file = join(dir, 'old.json');
    writeFileSync(file, JSON.stringify(cases[0][0]));
    const url = engine === 'sqlite' ? join(dir, 'old.db') : (await freshDatabase()).url;
    const other = await startServer({ db: url });
    try {
      const res = await cli(['import', file, '--db', url]);
      assert.equal(res.status, 2);
      assert.match(res.stderr, /^stratus: .*old\.json: schema: the state file was exported from schema 0001_initial/);
    } finally {
      await other.close();
    }
  });
});

describe('faults and users through the admin plane', () => {
  test('the next clone of a drive fails (its job fails, the clone is unavailable); the one after succeeds', async () => {
    const u = await srv.user();
    const src = (await u.post('drives/', { name: 'src', size: 1 << 30, media: 'disk' })).json.objects[0].uuid;
    await srv.advance(1);
    assert.equal((await call('POST', 'faults', { type: 'clone', drive: src })).status, 201);
    assert.equal((await call('POST', 'faults', { type: 'clone', drive: '00000000-0000-0000-0000-000000000000' })).status, 404);
    const clone = async () => {
      const res = await u.post(`drives/${src}/action/?do=clone`, { name: 'c' });
      assert.ok(res.status < 300, res.text);
      const uuid = res.json.objects?.[0]?.uuid ?? res.json.uuid;
      await call('POST', 'clock', { advance: '1m' });
      return (await u.get(`drives/${uuid}/`)).json;
    };
    assert.equal((await clone()).status, 'unavailable');
    assert.equal((await clone()).status, 'unmounted');
  });

  test('users: create with rate limits, change them; a bad rule creates nothing', async () => {
    const made = await call('POST', 'users', { email: 'limited@example.com', password: 'limited-secret', rate_limits: 'off' });
    assert.equal(made.status, 201, made.text);
    const row = await srv.services.store.db.selectFrom('rate_limit_overrides').select('rules').where('user_uuid', '=', made.json.uuid).executeTakeFirst();
    assert.equal(row?.rules, 'off');
    const bad = await call('POST', 'users', { email: 'badrule@example.com', rate_limits: 'GET=lots' });
    assert.equal(bad.status, 400);
    assert.equal((await call('POST', 'users', { email: 'badrule@example.com' })).status, 201, 'the refused create left no user behind');
    const set = await call('POST', 'users/limited@example.com/limits', { rate_limits: 'GET=1000/min' });
    assert.equal(set.status, 200, set.text);
    assert.equal((await call('POST', 'users/limited@example.com/limits', {})).status, 400);
    assert.equal((await call('POST', 'users/limited@example.com/limits', { rate_limits: null })).status, 200);
    assert.equal(
      await srv.services.store.db.selectFrom('rate_limit_overrides').select('rules').where('user_uuid', '=', made.json.uuid).executeTakeFirst(),
      undefined,
    );
  });
});

describe('the clock from the command line', () => {
  test('show, advance, set; backwards or a bad duration is exit code 2; a server sees the move at its next tick', async () => {
    const url = engine === 'sqlite' ? join(dir, 'clock.db') : (await freshDatabase()).url;
    const other = await startServer({ db: url });
    try {
      const shown = await cli(['clock', 'show', '--db', url]);
      assert.equal(shown.status, 0, shown.stderr);
      assert.match(shown.stdout, /^\d{4}-\d\d-\d\dT.*\(offset -?\d+ ms from real time\)\n$/);
      const moved = await cli(['clock', 'advance', '2h', '--db', url]);
      assert.equal(moved.status, 0, moved.stderr);
      const offset = Number(/offset (\d+) ms/.exec(moved.stdout)?.[1]);
      assert.ok(offset >= 7_200_000 - 1000 && offset <= 7_200_000 + 1000, moved.stdout);
      const year = new Date().getUTCFullYear() + 5;
      const set = await cli(['clock', 'set', `${year}-01-01T00:00:00Z`, '--db', url]);
      assert.match(set.stdout, new RegExp(`^clock moved to ${year}-01-01T00:00:00\\.000000\\+00:00`), set.stderr);
      assert.match((await cli(['clock', 'set', `${year + 20}-01-01T00:00:00Z`, '--db', url])).stderr, /more than ten years/);
      const back = await cli(['clock', 'set', `${year - 1}-01-01T00:00:00Z`, '--db', url]);
      assert.equal(back.status, 2);
      assert.match(back.stderr, /only moves forward/);
      // Like every operator command, they refuse a database without a current schema.
      for (const args of [['clock', 'show'], ['export'], ['seed', 'x.json'], ['import', 'x.json'], ['faults', 'clone']]) {
        const res = await cli([...args, '--db', join(dir, 'nothing.db')]);
        assert.equal(res.status, 2, args.join(' '));
        assert.match(res.stderr, /there is no database at .*nothing\.db: run `stratus migrate/);
      }
      for (const bad of [
        ['advance', '5x'],
        ['advance', '-1h'],
        ['set', 'tomorrow'],
        ['show', 'extra'],
      ])
        assert.equal((await cli(['clock', ...bad, '--db', url])).status, 2, bad.join(' '));
      // This in-process server has no polling loop: a pass of its scheduler is its "next tick".
      await (await import('../../src/admin/clock.js')).syncClock(other.services);
      assert.equal(other.clock.now().getUTCFullYear(), year);
    } finally {
      await other.close();
    }
  });
});
