import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Decimal } from 'decimal.js';
import { assetPath } from '../../src/assets.js';
import { chooseLocation } from '../../src/http/locations.js';
import { locationDb } from '../../src/core/locations.js';
import { ConfigError, loadConfig, locationConfig } from '../../src/config.js';
import { ApiError } from '../../src/core/errors.js';
import { authParams, curl, digestHeader } from '../helpers/auth.js';
import { cli } from '../helpers/cli.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { childEnv, serveProcess, type Running } from '../helpers/process.js';
import { needs } from '../helpers/skips.js';
import { until } from '../helpers/until.js';
import WebSocket from 'ws';

/**
 * Several locations in one deployment (`serve --locations zrh,sjc`), on the engine under test: each location
 * is its own cloud (accounts, passwords, balances, currencies, resources, capabilities, prices, library),
 * chosen by the request's host, and nothing of one is reachable from the other.
 */
const TOKEN = 'locations-admin-token-0123456789';
const SJC_SETTINGS = JSON.stringify({ sjc: { 'rate-limits': 'GET:/tags/=2/day', 'ip-pool': '10.20.0.0/24', 'vlan-pool': '500-509' } });
const INSTANT = 'drive.create=0,drive.clone=0,drive.clone.per_gib=0,drive.resize=0,server.boot=0,server.stop=0,server.shutdown=0';

interface Answer {
  status: number;
  json: any;
}

/** A request with an explicit Host header (what a client of `https://sjc.cloudsigma.com` sends), to the loopback server. */
function call(port: number, host: string, method: string, path: string, opts: { auth?: string; token?: string; body?: unknown } = {}): Promise<Answer> {
  const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  const headers: Record<string, string> = { Host: host, Accept: 'application/json' };
  if (opts.auth) headers.Authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
  if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
  if (body) headers['Content-Type'] = 'application/json';
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, json: text ? JSON.parse(text) : null }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('host and path choose the location', () => {
  const served = ['zrh', 'sjc'];
  test('real names, direct names, local names, a path prefix, and the default for any other host', () => {
    assert.deepEqual(chooseLocation('sjc.cloudsigma.com', '/api/2.0/', served, 'zrh'), { code: 'sjc' });
    assert.deepEqual(chooseLocation('direct.sjc.cloudsigma.com:8443', '/websocket', served, 'zrh'), { code: 'sjc' });
    assert.deepEqual(chooseLocation('SJC.localhost:8080', '/api/2.0/', served, 'zrh'), { code: 'sjc' });
    assert.deepEqual(chooseLocation('127.0.0.1:8080', '/sjc/api/2.0/servers/?limit=0', served, 'zrh'), { code: 'sjc', url: '/api/2.0/servers/?limit=0' });
    assert.deepEqual(chooseLocation('127.0.0.1:8080', '/api/2.0/', served, 'zrh'), { code: 'zrh' });
    assert.deepEqual(chooseLocation(undefined, '/fra/api/2.0/', served, 'zrh'), { code: 'zrh' });
  });
  test('a name of a location not served is refused, never answered by another location', () => {
    for (const host of ['fra.cloudsigma.com', 'direct.fra.cloudsigma.com', 'fra.localhost', 'www.cloudsigma.com']) {
      const c = chooseLocation(host, '/api/2.0/', served, 'zrh');
      assert.ok(c instanceof ApiError && c.type === 'notexist', host);
    }
  });
  test("each location's store: the first keeps --db, the others a SQLite file or a PostgreSQL schema of their own", () => {
    assert.equal(locationDb('./data/stratus.db', 'sjc'), './data/stratus-sjc.db');
    assert.equal(locationDb(':memory:', 'sjc'), ':memory:');
    assert.equal(locationDb('postgres://u:p@h:5432/db', 'sjc'), `postgres://u:p@h:5432/db?options=${encodeURIComponent('-c search_path=public_sjc')}`);
    assert.equal(
      locationDb(`postgres://h/db?sslmode=disable&options=${encodeURIComponent('-c search_path=t_1')}`, 'sjc'),
      `postgres://h/db?sslmode=disable&options=${encodeURIComponent('-c search_path=t_1_sjc')}`,
    );
  });
});

describe('--location-settings and --vlan-pool', () => {
  const load = (flags: Record<string, string>) => loadConfig(flags, {});
  test("each location's settings over the catalogue's; the others keep the catalogue's and the deployment's", () => {
    const c = load({ locations: 'zrh,sjc', 'rate-limits': 'off', 'location-settings': SJC_SETTINGS });
    const [z, j] = [locationConfig(c, 'zrh'), locationConfig(c, 'sjc')];
    assert.equal(z.rateLimits, null);
    assert.deepEqual(j.rateLimits, [{ method: 'GET', path: '/tags/', count: 2, per: 'day' }]);
    assert.deepEqual([z.ipPool[0].cidr, j.ipPool[0].cidr], ['185.12.6.0/24', '10.20.0.0/24']);
    assert.deepEqual(
      [z.vlanPool, j.vlanPool],
      [
        { from: 2, to: 201 },
        { from: 500, to: 509 },
      ],
    );
    assert.deepEqual([z.currency, j.currency], ['EUR', 'USD']);
  });
  test("one location: as it always was (no VLAN tags), its own settings become the deployment's", () => {
    assert.equal(load({}).vlanPool, null);
    const one = load({ location: 'sjc', 'location-settings': '{"sjc": {"vlan-pool": "7-9", "ip-pool": "10.9.0.0/24"}}' });
    assert.deepEqual([one.vlanPool, one.ipPool[0].cidr], [{ from: 7, to: 9 }, '10.9.0.0/24']);
    assert.deepEqual(load({ 'vlan-pool': '100-199' }).vlanPool, { from: 100, to: 199 });
  });
  test('bad settings stop start-up with a message naming the setting', () => {
    for (const [flags, message] of [
      [{ 'vlan-pool': '0-10' }, /vlan-pool must be FROM-TO/],
      [{ locations: 'zrh,sjc', 'location-settings': '{"fra": {}}' }, /location-settings: fra is not served here/],
      [{ 'location-settings': '{"xyz": {}}' }, /unknown location "xyz"/],
      [{ locations: 'zrh,sjc', 'location-settings': '{"sjc": {"db": "x"}}' }, /"db" is not a per-location setting/],
      [{ locations: 'zrh,sjc', 'location-settings': '{"sjc": {"rate-limits": "GET=lots"}}' }, /location-settings: sjc: rate-limits/],
      [{ locations: 'zrh,sjc', 'location-settings': '{"sjc": {"currency": "JPY"}}' }, /location sjc: currency JPY has no prices/],
      [{ 'location-settings': '{not json' }, /location-settings: cannot read/],
    ] as const)
      assert.throws(
        () => load(flags as Record<string, string>),
        (e: Error) => e instanceof ConfigError && message.test(e.message),
        JSON.stringify(flags),
      );
  });
});

describe(`two locations in one process (${engine})`, () => {
  let dir: string;
  let db: { url: string; drop: () => Promise<void> };
  let srv: Running;
  let port: number;
  const email = `both-${process.pid}-${Date.now()}@example.com`;
  const zrh = `${email}:zrh-password-1`;
  const sjc = `${email}:sjc-password-2`;
  const Z = 'zrh.cloudsigma.com';
  const S = 'sjc.cloudsigma.com';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'stratus-locations-'));
    db = engine === 'sqlite' ? { url: join(dir, 's.db'), drop: async () => {} } : await freshDatabase();
    srv = await serveProcess([
      '--db',
      db.url,
      '--locations',
      'zrh,sjc',
      '--rate-limits',
      'off',
      '--admin-token',
      TOKEN,
      // Boots take an hour of the shared clock here: the clock test moves it.
      '--delays',
      INSTANT.replace('server.boot=0', 'server.boot=3600000'),
      // sjc's own rate limits, IP and VLAN pools over the catalogue's (zrh keeps the deployment's and the catalogue's).
      '--location-settings',
      SJC_SETTINGS,
    ]);
    port = Number(new URL(srv.base).port);
    // The same e-mail in both: through zrh's admin plane, and through the operator command with --location sjc.
    assert.equal((await call(port, Z, 'POST', '/_stratus/admin/users', { token: TOKEN, body: { email, password: 'zrh-password-1' } })).status, 201);
    const add = await cli(['users', 'add', email, '--password', 'sjc-password-2', '--db', db.url, '--locations', 'zrh,sjc', '--location', 'sjc']);
    assert.equal(add.status, 0, add.stderr);
  });
  after(async () => {
    srv?.child.kill('SIGTERM');
    await srv?.exited;
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('one e-mail is two accounts: separate passwords, balances and currencies', async () => {
    const a = await call(port, Z, 'GET', '/api/2.0/balance/', { auth: zrh });
    const b = await call(port, S, 'GET', '/api/2.0/balance/', { auth: sjc });
    assert.equal(a.status, 200);
    assert.equal(b.status, 200);
    assert.equal(a.json.currency, 'EUR');
    assert.equal(b.json.currency, 'USD');
    // Each password opens its own location only.
    assert.equal((await call(port, S, 'GET', '/api/2.0/balance/', { auth: zrh })).status, 401);
    assert.equal((await call(port, Z, 'GET', '/api/2.0/balance/', { auth: sjc })).status, 401);
    const [ua, ub] = await Promise.all([call(port, Z, 'GET', '/api/2.0/profile/', { auth: zrh }), call(port, S, 'GET', '/api/2.0/profile/', { auth: sjc })]);
    assert.notEqual(ua.json.uuid, ub.json.uuid);
    // A payment in one location moves that balance only.
    const paid = await cli(['billing', 'topup', email, '5', '--db', db.url, '--locations', 'zrh,sjc', '--location', 'sjc']);
    assert.equal(paid.status, 0, paid.stderr);
    assert.equal((await call(port, S, 'GET', '/api/2.0/balance/', { auth: sjc })).json.balance, '10005.00000000000000000000');
    assert.equal((await call(port, Z, 'GET', '/api/2.0/balance/', { auth: zrh })).json.balance, a.json.balance);
  });

  test("a resource of one location is 404 in the other, by any of its names; lists show each location's own", async () => {
    const made = await call(port, Z, 'POST', '/api/2.0/drives/', { auth: zrh, body: { name: 'only-zrh', size: 1073741824, media: 'disk' } });
    assert.equal(made.status, 201);
    const uuid = made.json.objects[0].uuid;
    assert.equal((await call(port, Z, 'GET', `/api/2.0/drives/${uuid}/`, { auth: zrh })).status, 200);
    assert.equal((await call(port, 'zrh.localhost', 'GET', `/api/2.0/drives/${uuid}/`, { auth: zrh })).status, 200);
    assert.equal((await call(port, '127.0.0.1', 'GET', `/zrh/api/2.0/drives/${uuid}/`, { auth: zrh })).status, 200);
    for (const [host, path] of [
      [S, `/api/2.0/drives/${uuid}/`],
      ['direct.sjc.cloudsigma.com', `/api/2.0/drives/${uuid}/`],
      ['sjc.localhost', `/api/2.0/drives/${uuid}/`],
      [`127.0.0.1:${port}`, `/sjc/api/2.0/drives/${uuid}/`],
    ]) {
      const res = await call(port, host, 'GET', path, { auth: sjc });
      assert.equal(res.status, 404, `${host}${path}`);
      assert.equal(res.json[0].error_type, 'notexist');
    }
    assert.deepEqual((await call(port, S, 'GET', '/api/2.0/drives/?limit=0', { auth: sjc })).json.objects, []);
    assert.deepEqual(
      (await call(port, Z, 'GET', '/api/2.0/drives/?limit=0', { auth: zrh })).json.objects.map((d: any) => d.uuid),
      [uuid],
    );
    // A host of no location is answered with the API's error, by no location's data.
    const fra = await call(port, 'fra.cloudsigma.com', 'GET', `/api/2.0/drives/${uuid}/`, { auth: zrh });
    assert.equal(fra.status, 404);
    assert.match(fra.json[0].error_message, /No location fra here/);
    // A host naming none reaches the default location (the first).
    assert.equal((await call(port, `127.0.0.1:${port}`, 'GET', `/api/2.0/drives/${uuid}/`, { auth: zrh })).status, 200);
  });

  test('capabilities, prices and library drives differ as the catalogue configures them', async () => {
    const [capZ, capS] = await Promise.all([
      call(port, Z, 'GET', '/api/2.0/capabilities/', { auth: zrh }),
      call(port, S, 'GET', '/api/2.0/capabilities/', { auth: sjc }),
    ]);
    assert.deepEqual(capZ.json.hypervisors.kvm, ['amd']);
    assert.deepEqual(capS.json.hypervisors.kvm, ['intel']);
    const [pZ, pS] = await Promise.all([
      call(port, Z, 'GET', '/api/2.0/pricing/?limit=0', { auth: zrh }),
      call(port, S, 'GET', '/api/2.0/pricing/?limit=0', { auth: sjc }),
    ]);
    const resources = (p: Answer) => new Set(p.json.objects.map((o: any) => o.resource));
    assert.ok(!resources(pZ).has('intel_cpu'));
    assert.ok(resources(pS).has('intel_cpu'));
    const [lZ, lS] = await Promise.all([
      call(port, Z, 'GET', '/api/2.0/libdrives/?limit=0', { auth: zrh }),
      call(port, S, 'GET', '/api/2.0/libdrives/?limit=0', { auth: sjc }),
    ]);
    const distributions = (l: Answer) => new Set(l.json.objects.map((o: any) => o.distribution));
    assert.ok(distributions(lZ).has('openSUSE'));
    assert.ok(!distributions(lS).has('openSUSE'));
    assert.ok(lS.json.objects.length > 0 && lS.json.objects.length < lZ.json.objects.length);
  });

  test('Digest through the location prefix: curl --digest signs the URL it sent, prefix and all', async () => {
    // sjc's own password through the prefix; zrh's through its plain path, on the same port.
    const viaPrefix = await curl(['--digest', '-u', sjc, `http://127.0.0.1:${port}/sjc/api/2.0/balance/`]);
    assert.deepEqual(viaPrefix.status, [200], viaPrefix.body);
    assert.match(viaPrefix.body, /"currency": ?"USD"/);
    const plain = await curl(['--digest', '-u', zrh, `http://127.0.0.1:${port}/api/2.0/balance/`]);
    assert.deepEqual(plain.status, [200], plain.body);
    // Signed by hand: the target sent (with its prefix) passes; the path without it names another target.
    const get = (headers: Record<string, string> = {}) =>
      new Promise<http.IncomingMessage>((resolve, reject) =>
        http
          .get({ host: '127.0.0.1', port, path: '/sjc/api/2.0/balance/', headers }, (res) => {
            res.resume();
            resolve(res);
          })
          .on('error', reject),
      );
    const raw = (await get()).rawHeaders;
    const challenge = authParams(raw.find((v, i) => i % 2 === 1 && /^Digest /.test(v) && /^www-authenticate$/i.test(raw[i - 1])) ?? '');
    const at = sjc.lastIndexOf(':');
    const signed = (uri: string, nc: number) =>
      digestHeader({
        username: sjc.slice(0, at),
        password: sjc.slice(at + 1),
        method: 'GET',
        uri,
        realm: challenge.realm,
        nonce: challenge.nonce,
        opaque: challenge.opaque,
        nc,
      });
    assert.equal((await get({ Authorization: signed('/sjc/api/2.0/balance/', 1) })).statusCode, 200);
    assert.equal((await get({ Authorization: signed('/api/2.0/balance/', 2) })).statusCode, 401);
  });

  test('/locations/ lists both, and the URLs it gives reach their location', async () => {
    const res = await call(port, S, 'GET', '/api/2.0/locations/?limit=0', { auth: sjc });
    assert.equal(res.status, 200);
    assert.deepEqual(
      res.json.objects.map((l: any) => [l.id, l.display_name, l.country_code]),
      [
        ['ZRH', 'Zurich, Switzerland', 'CH'],
        ['SJC', 'San Jose, United States', 'US'],
      ],
    );
    for (const [loc, auth, currency] of [
      [res.json.objects[0], zrh, 'EUR'],
      [res.json.objects[1], sjc, 'USD'],
    ]) {
      for (const key of ['api_endpoint', 'upload_url']) {
        const u = new URL(loc[key]);
        const b = await call(port, u.host, 'GET', `${u.pathname}balance/`, { auth });
        assert.equal(b.json.currency, currency, `${key} ${loc[key]}`);
      }
    }
  });

  test("the websocket follows the same rule: a location's stream by its prefix or name, another location's cookie refused, an unserved name 404", async () => {
    const auth = await new Promise<string>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/sjc/api/2.0/accounts/action/?do=authenticate_asynchronous',
          headers: { Authorization: `Basic ${Buffer.from(sjc).toString('base64')}`, Accept: 'application/json' },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve(String(res.headers['set-cookie']).split(';')[0]));
        },
      );
      req.on('error', reject);
      req.end();
    });
    assert.match(auth, /^async_auth=/);
    const open = (path: string, headers: Record<string, string> = {}) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}${path}`, { headers: { cookie: auth, ...headers } });
      const frames: any[] = [];
      ws.on('message', (m) => frames.push(JSON.parse(String(m))));
      const outcome = new Promise<'open' | number>((resolve) => {
        ws.once('open', () => resolve('open'));
        ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.on('error', () => resolve(-1));
      });
      return { ws, frames, outcome };
    };
    // zrh does not know sjc's cookie; a name of no served location is a 404 (never another location's stream).
    assert.equal(await open('/zrh/websocket').outcome, 401);
    assert.equal(await open('/websocket', { Host: 'direct.fra.cloudsigma.com' }).outcome, 404);
    for (const [path, headers] of [
      ['/sjc/websocket', {}],
      ['/websocket', { Host: 'direct.sjc.cloudsigma.com' }],
    ] as const) {
      const c = open(path, headers);
      assert.equal(await c.outcome, 'open', path);
      const made = await call(port, S, 'POST', '/api/2.0/drives/', { auth: sjc, body: { name: `ws-${path.length}`, size: 1073741824, media: 'disk' } });
      const uri = `/api/2.0/drives/${made.json.objects[0].uuid}/`;
      await until(`a frame for ${uri} on ${path}`, () => c.frames.some((f) => f.resource_uri === uri));
      const closed = new Promise((r) => c.ws.once('close', r));
      c.ws.close();
      await closed;
    }
  });

  test("rate limits, the public IP pool and the VLAN pool are each location's own (--location-settings over the catalogue)", async () => {
    // sjc allows two GETs of /tags/ a day; zrh has the deployment's (off).
    const codes = async (host: string, auth: string) => {
      const out: number[] = [];
      for (let i = 0; i < 3; i++) out.push((await call(port, host, 'GET', '/api/2.0/tags/', { auth })).status);
      return out;
    };
    assert.deepEqual(await codes(S, sjc), [200, 200, 429]);
    assert.deepEqual(await codes(Z, zrh), [200, 200, 200]);
    // An IP and a VLAN each, through each location's admin plane: from that location's pools.
    for (const host of [Z, S]) {
      const seeded = await call(port, host, 'POST', '/_stratus/admin/seed', { token: TOKEN, body: { users: [{ email, ips: 1, vlans: 1 }] } });
      assert.equal(seeded.status, 200, JSON.stringify(seeded.json));
    }
    const [ipZ, ipS] = await Promise.all([call(port, Z, 'GET', '/api/2.0/ips/', { auth: zrh }), call(port, S, 'GET', '/api/2.0/ips/', { auth: sjc })]);
    assert.match(ipZ.json.objects[0].uuid, /^185\.12\.6\.\d+$/);
    assert.match(ipS.json.objects[0].uuid, /^10\.20\.0\.\d+$/);
    const [vZ, vS] = await Promise.all([
      call(port, Z, 'GET', '/api/2.0/vlans/detail/', { auth: zrh }),
      call(port, S, 'GET', '/api/2.0/vlans/detail/', { auth: sjc }),
    ]);
    // zrh: the first 200 tags (the catalogue's first entry); sjc: its own range.
    const tagZ = vZ.json.objects[0].bottom_vlan_tag;
    assert.ok(tagZ >= 2 && tagZ <= 201, String(tagZ));
    assert.equal(vS.json.objects[0].bottom_vlan_tag, 500);
  });

  test('health, readiness and metrics report every location, from any of them', async () => {
    for (const [host, path] of [
      [S, '/_stratus/ready'],
      [`127.0.0.1:${port}`, '/zrh/_stratus/ready'],
    ]) {
      const ready = await call(port, host, 'GET', path);
      assert.equal(ready.status, 200, JSON.stringify(ready.json));
      assert.equal(ready.json.status, 'ready');
      assert.equal(ready.json.location, host === S ? 'sjc' : 'zrh');
      assert.deepEqual(Object.keys(ready.json.locations).sort(), ['sjc', 'zrh']);
      for (const r of Object.values(ready.json.locations) as any[]) assert.equal(r.checks.scheduler.running, true);
    }
    const health = await call(port, Z, 'GET', '/_stratus/health');
    assert.deepEqual(health.json, { location: 'zrh', locations: { sjc: 'ok', zrh: 'ok' }, status: 'ok' });
    const text = await new Promise<string>((resolve, reject) =>
      http
        .get({ host: '127.0.0.1', port, path: '/_stratus/metrics', headers: { Host: S } }, (res) => {
          let t = '';
          res.on('data', (d) => (t += d));
          res.on('end', () => resolve(t));
        })
        .on('error', reject),
    );
    for (const loc of ['zrh', 'sjc']) assert.match(text, new RegExp(`stratus_scheduler_running\\{location="${loc}"\\} 1`));
    // Every series names its location.
    const series = text.split('\n').filter((l) => l && !l.startsWith('#'));
    assert.ok(series.length > 20);
    for (const line of series) assert.match(line, /location="(zrh|sjc)"/, line);
  });

  test('one clock: moved once through one location, the servers booting in both reach running', async () => {
    const boot = async (host: string, auth: string, name: string) => {
      const made = await call(port, host, 'POST', '/api/2.0/servers/', { auth, body: { name, cpu: 1000, mem: 536870912, vnc_password: 'vncpass1' } });
      assert.equal(made.status, 201, JSON.stringify(made.json));
      const uuid = made.json.objects[0].uuid as string;
      assert.equal((await call(port, host, 'POST', `/api/2.0/servers/${uuid}/action/?do=start`, { auth })).status, 202);
      assert.equal((await call(port, host, 'GET', `/api/2.0/servers/${uuid}/`, { auth })).json.status, 'starting');
      return uuid;
    };
    const status = async (host: string, auth: string, uuid: string) => (await call(port, host, 'GET', `/api/2.0/servers/${uuid}/`, { auth })).json.status;
    const [a, b] = [await boot(Z, zrh, 'clock-zrh'), await boot(S, sjc, 'clock-sjc')];
    // The admin plane of sjc moves the deployment's clock past the boots: each location runs its due work at once.
    const moved = await call(port, S, 'POST', '/_stratus/admin/clock', { token: TOKEN, body: { advance_ms: 3_600_000 } });
    assert.equal(moved.status, 200);
    const there = await call(port, Z, 'GET', '/_stratus/admin/clock', { token: TOKEN });
    assert.equal(there.json.offset_ms, moved.json.offset_ms);
    assert.deepEqual([await status(Z, zrh, a), await status(S, sjc, b)], ['running', 'running']);
    // Moved from outside (the operator command on the first location's store): each location's scheduler sees it at its next tick.
    const [c, d] = [await boot(Z, zrh, 'clock-zrh-2'), await boot(S, sjc, 'clock-sjc-2')];
    const adv = await cli(['clock', 'advance', '1h', '--db', db.url, '--locations', 'zrh,sjc']);
    assert.equal(adv.status, 0, adv.stderr);
    await until(
      'both servers running after the operator moved the clock',
      async () => (await status(Z, zrh, c)) === 'running' && (await status(S, sjc, d)) === 'running',
    );
  });

  test("each location charges at its own price list: zrh's cpu in EUR, sjc's intel_cpu in USD", async () => {
    const boot = async (host: string, auth: string) => {
      const made = await call(port, host, 'POST', '/api/2.0/servers/', { auth, body: { name: 'priced', cpu: 1000, mem: 536870912, vnc_password: 'vncpass1' } });
      assert.equal(made.status, 201, JSON.stringify(made.json));
      assert.equal((await call(port, host, 'POST', `/api/2.0/servers/${made.json.objects[0].uuid}/action/?do=start`, { auth })).status, 202);
    };
    await boot(Z, zrh);
    await boot(S, sjc);
    // Past the boots (an hour here), then to a cycle's boundary, then one whole cycle later: that cycle's entries cover 300 s.
    const advance = async (ms: number) => (await call(port, S, 'POST', '/_stratus/admin/clock', { token: TOKEN, body: { advance_ms: ms } })).json.now as string;
    const now = Date.parse(await advance(3_600_000));
    await advance(Math.ceil(now / 300_000) * 300_000 - now + 1_000);
    const cycle = Math.floor(Date.parse(await advance(300_000)) / 300_000) - 1;
    const catalogue = (file: string) =>
      JSON.parse(readFileSync(assetPath(file), 'utf8')).objects as { resource: string; level: number; currency: string; price: string; multiplier: number }[];
    for (const [host, auth, file, resource, currency, absent] of [
      [Z, zrh, 'billing/prices.json', 'cpu', 'EUR', 'intel_cpu'],
      [S, sjc, 'billing/prices-intel.json', 'intel_cpu', 'USD', 'amd_cpu'],
    ] as const) {
      const entries = await until(`${host}: the ledger of cycle ${cycle}`, async () => {
        const res = await call(port, host, 'GET', `/api/2.0/ledger/?billing_cycle=${cycle}&limit=0`, { auth });
        return res.json.objects.length > 0 && res.json.objects;
      });
      const byResource = new Map<string, any>(entries.map((e: any) => [e.reason.split(' of ')[1].split(' ')[0], e]));
      const cpu = byResource.get(resource);
      assert.ok(cpu, `${host} charges ${resource}: ${[...byResource.keys()].join(', ')}`);
      assert.ok(!byResource.has(absent), `${host} charges no ${absent}`);
      assert.equal(cpu.interval, 300);
      // The amount from the location's own price file alone: price × MHz × seconds ÷ multiplier, at level 1.
      const row = catalogue(file).find((r) => r.resource === resource && r.level === 1 && r.currency === currency);
      assert.ok(row, `${file} prices ${resource} in ${currency}`);
      const D = Decimal.clone({ precision: 100 });
      const expected = new D(row.price).times(cpu.resource_amount).times(300).div(row.multiplier).toDecimalPlaces(20, Decimal.ROUND_HALF_EVEN).toFixed(20);
      assert.equal(cpu.amount, expected, `${host} ${resource}`);
    }
    const [balZ, balS] = [await call(port, Z, 'GET', '/api/2.0/balance/', { auth: zrh }), await call(port, S, 'GET', '/api/2.0/balance/', { auth: sjc })];
    assert.deepEqual([balZ.json.currency, balS.json.currency], ['EUR', 'USD']);
  });

  test("the admin plane's state export and import act on the location of its host", async () => {
    const exported = await call(port, S, 'GET', '/_stratus/admin/state', { token: TOKEN });
    assert.equal(exported.status, 200);
    const made = await call(port, S, 'POST', '/api/2.0/drives/', { auth: sjc, body: { name: 'after-export', size: 1073741824, media: 'disk' } });
    assert.equal(made.status, 201);
    const names = async (host: string, auth: string) =>
      (await call(port, host, 'GET', '/api/2.0/drives/detail/?limit=0', { auth })).json.objects.map((o: any) => o.name as string).sort();
    const zrhBefore = await names(Z, zrh);
    const sjcExported = (await names(S, sjc)).filter((n: string) => n !== 'after-export');
    const imported = await call(port, S, 'POST', '/_stratus/admin/state', { token: TOKEN, body: exported.json });
    assert.equal(imported.status, 200, JSON.stringify(imported.json));
    assert.deepEqual(await names(S, sjc), sjcExported, 'sjc as exported');
    assert.deepEqual(await names(Z, zrh), zrhBefore);
    assert.ok(zrhBefore.includes('only-zrh'), zrhBefore.join());
    // The admin plane of an unserved location's name is refused, never another location's.
    assert.equal((await call(port, 'fra.cloudsigma.com', 'GET', '/_stratus/admin/clock', { token: TOKEN })).status, 404);
  });

  test('operator commands act on the location --location names; one not served is refused', async () => {
    const on = (loc: string) => ['--db', db.url, '--locations', 'zrh,sjc', '--location', loc];
    const zList = await cli(['users', 'list', '--db', db.url, '--locations', 'zrh,sjc']);
    const sList = await cli(['users', 'list', '--db', db.url, '--locations', 'zrh,sjc', '--location', 'sjc']);
    assert.equal(zList.status, 0, zList.stderr);
    assert.equal(sList.status, 0, sList.stderr);
    assert.match(zList.stdout, new RegExp(email));
    assert.match(sList.stdout, new RegExp(email));
    const seedFile = join(dir, 'seed.json');
    writeFileSync(seedFile, JSON.stringify({ users: [{ email: `only-sjc-${email}`, password: 'seeded-pass-1', locations: ['sjc'] }] }));
    for (const loc of ['zrh', 'sjc']) {
      const r = await cli(['seed', seedFile, '--db', db.url, '--locations', 'zrh,sjc', '--location', loc]);
      assert.equal(r.status, 0, r.stderr);
    }
    assert.equal((await call(port, S, 'GET', '/api/2.0/balance/', { auth: `only-sjc-${email}:seeded-pass-1` })).status, 200);
    assert.equal((await call(port, Z, 'GET', '/api/2.0/balance/', { auth: `only-sjc-${email}:seeded-pass-1` })).status, 401);
    // Export takes the location too: sjc's state has the sjc-only user, zrh's not.
    const [ex, ez] = await Promise.all([
      cli(['export', '--db', db.url, '--locations', 'zrh,sjc', '--location', 'sjc']),
      cli(['export', '--db', db.url, '--locations', 'zrh,sjc']),
    ]);
    assert.equal(ex.status, 0, ex.stderr);
    assert.ok(ex.stdout.includes(`only-sjc-${email}`));
    assert.ok(!ez.stdout.includes(`only-sjc-${email}`) && ez.stdout.includes(email));
    // Import takes it too: sjc's export imported into sjc drops what sjc got since; zrh is untouched.
    const file = join(dir, 'sjc-state.json');
    writeFileSync(file, ex.stdout);
    const later = `later-${email}`;
    assert.equal((await cli(['users', 'add', later, '--password', 'later-pass-1', ...on('sjc')])).status, 0);
    const zrhUsers = (await cli(['users', 'list', ...on('zrh')])).stdout;
    const imp = await cli(['import', file, ...on('sjc')]);
    assert.equal(imp.status, 0, imp.stderr);
    const sjcUsers = (await cli(['users', 'list', ...on('sjc')])).stdout;
    assert.ok(!sjcUsers.includes(later) && sjcUsers.includes(`only-sjc-${email}`), sjcUsers);
    assert.equal((await cli(['users', 'list', ...on('zrh')])).stdout, zrhUsers);
    const bad = await cli(['users', 'list', '--db', db.url, '--locations', 'zrh,sjc', '--location', 'fra']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /location fra is not one of --locations \(zrh, sjc\)/);
    const unknown = await cli(['users', 'list', '--db', db.url, '--locations', 'zrh,xyz']);
    assert.equal(unknown.status, 2);
    assert.match(unknown.stderr, /unknown location "xyz"/);
  });
});

const PYTHON = '/usr/bin/python3';
const SCRIPT = fileURLToPath(new URL('../clients/libcloud_locations.py', import.meta.url));

describe(`libcloud picks a location by region (${engine})`, { skip: needs('python3-libcloud') }, () => {
  async function run(flags: string[], clientEnv: (stdout: string) => NodeJS.ProcessEnv = () => ({})): Promise<void> {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-libcloud-loc-'));
    const db = engine === 'sqlite' ? { url: join(dir, 'l.db'), drop: async () => {} } : await freshDatabase();
    const srv = await serveProcess(['--db', db.url, '--locations', 'zrh,sjc', '--rate-limits', 'off', '--delays', INSTANT, ...flags]);
    try {
      const login = /Demo login: (\S+) \/ (\S+)/.exec(srv.stdout());
      assert.ok(login, srv.stdout());
      const res = spawnSync(PYTHON, [SCRIPT, srv.base, login[1], login[2]], {
        encoding: 'utf8',
        timeout: 100_000,
        env: { ...childEnv(), ...clientEnv(srv.stdout()) },
      });
      assert.equal(res.status, 0, `${res.stdout}\n${res.stderr}`);
      assert.match(res.stdout, /ALL OK/);
    } finally {
      srv.child.kill('SIGTERM');
      await srv.exited;
      await db.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  }

  test('local form: each driver pointed at the server and its location prefix', { timeout: 120_000 }, async () => {
    await run([]);
  });

  test('HTTPS: drivers built with region=zrh and region=sjc, a name mapping and the CA only', { timeout: 120_000 }, async () => {
    await run(['--tls'], (stdout) => {
      const ca = /trust the local CA (\S+) \(/.exec(stdout);
      assert.ok(ca, stdout);
      return { SSL_CERT_FILE: ca[1] };
    });
  });
});
