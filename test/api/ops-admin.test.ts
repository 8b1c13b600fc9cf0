import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureDemoLogin } from '../../src/resources/users/users.js';
import { Client } from '../helpers/client.js';
import { cli } from '../helpers/cli.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { basic } from '../helpers/auth.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { until } from '../helpers/until.js';

/** The admin plane: token and loopback guard, reset, users, unlock, clock, faults; bad input is a 400 that changes nothing. */
const TOKEN = 'admin-token-for-tests-0123456789';
let srv: TestServer;
let admin: Client;

before(async () => {
  srv = await startServer({ 'admin-token': TOKEN, 'demo-login': 'demo@example.com:demo-secret', 'login-protection': 'default' });
  srv.app.schedulerProbe = srv.scheduler;
  admin = new Client(srv.base);
});
after(() => srv.close());

const A = '/_stratus/admin/';
const call = (method: string, path: string, body?: unknown, token = TOKEN, localAddress?: string) =>
  admin.request(method, `${A}${path}`, { body, headers: token ? { authorization: `Bearer ${token}` } : {}, localAddress });

describe('the admin plane', () => {
  test('needs the token (401 with a Bearer challenge), from loopback; the API credentials do not open it', async () => {
    const none = await call('GET', 'clock', undefined, '');
    assert.equal(none.status, 401);
    assert.equal(none.headers['www-authenticate'], 'Bearer realm="stratus-admin"');
    assert.equal(none.json[0].error_type, 'permission');
    assert.equal((await call('GET', 'clock', undefined, 'wrong-token-wrong-token')).status, 401);
    const u = await srv.user();
    assert.equal((await admin.request('GET', `${A}clock`, { headers: { authorization: basic(u.email, u.password) } })).status, 401);
    assert.equal((await call('GET', 'clock')).status, 200);
    const index = await call('GET', '');
    assert.ok(index.json.actions.includes('/_stratus/admin/reset'));
  });

  test('wrong tokens back off per address: 429 with Retry-After for a doubling lock; the right token elsewhere is not slowed', async () => {
    const from = '127.0.0.66';
    const elsewhere = '127.0.0.67';
    const wrong = () => call('GET', 'clock', undefined, 'wrong-token-wrong-token', from);
    for (let i = 0; i < 4; i++) assert.equal((await wrong()).status, 401);
    const locked = await wrong();
    assert.equal(locked.status, 429, locked.text);
    assert.equal(locked.headers['retry-after'], '1');
    assert.deepEqual(Object.keys(locked.json[0]).sort(), ['error_message', 'error_point', 'error_type']);
    // While locked, even the right token is refused there (a lock is no oracle); elsewhere it works at once.
    assert.equal((await call('GET', 'clock', undefined, TOKEN, from)).status, 429);
    assert.equal((await call('GET', 'clock', undefined, TOKEN, elsewhere)).status, 200);
    // Each further wrong token after a lock doubles it: 2 s, 4 s.
    srv.clock.advance(1_000);
    assert.equal((await wrong()).headers['retry-after'], '2');
    assert.equal((await wrong()).status, 429, 'refused during the lock, and not counted');
    srv.clock.advance(2_000);
    assert.equal((await wrong()).headers['retry-after'], '4');
    // The right token after the lock forgets the address.
    srv.clock.advance(4_000);
    assert.equal((await call('GET', 'clock', undefined, TOKEN, from)).status, 200);
    for (let i = 0; i < 4; i++) assert.equal((await wrong()).status, 401);
    assert.equal((await call('GET', 'clock', undefined, TOKEN, from)).status, 200);
  });

  test('users: create, password, state; mistakes are 400/404/409 and change nothing', async () => {
    const made = await call('POST', 'users', { email: 'Pipe@Example.com' });
    assert.equal(made.status, 201, made.text);
    assert.equal(made.json.email, 'pipe@example.com');
    const c = new Client(srv.base, { email: 'pipe@example.com', password: made.json.password });
    assert.equal((await c.get('profile/')).status, 200);
    assert.equal((await call('POST', 'users', { email: 'pipe@example.com' })).status, 409);
    assert.equal((await call('POST', 'users', { email: 'not an email' })).status, 400);
    assert.equal((await call('POST', 'users', { password: 'x' })).json[0].error_point, 'email');
    const pw = await call('POST', 'users/pipe@example.com/password', { password: 'new-secret-1' });
    assert.equal(pw.status, 200, pw.text);
    assert.equal((await new Client(srv.base, { email: 'pipe@example.com', password: 'new-secret-1' }).get('profile/')).status, 200);
    assert.equal((await call('POST', 'users/pipe@example.com/state', { state: 'guest' })).json.state, 'GUEST');
    assert.equal((await call('POST', 'users/pipe@example.com/state', { state: 'ADMIN' })).status, 400);
    assert.equal((await call('POST', 'users/nobody@example.com/password', {})).status, 404);
    assert.equal((await call('POST', 'users', [1, 2])).status, 400);
  });

  test('unlock ends login-protection locks', async () => {
    const u = await srv.user();
    const from = '127.0.0.77';
    for (let i = 0; i < 5; i++)
      await new Client(srv.base).request('GET', 'profile/', { headers: { authorization: basic(u.email, 'wrong') }, localAddress: from });
    const locked = await new Client(srv.base).request('GET', 'profile/', { headers: { authorization: basic(u.email, u.password) }, localAddress: from });
    assert.equal(locked.status, 429);
    assert.equal((await call('POST', 'unlock', {})).status, 400);
    assert.equal((await call('POST', 'unlock', { address: 'nope' })).status, 400);
    const res = await call('POST', 'unlock', { email: u.email });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.cleared, 2); // the account counter and its pair with the address
    const ok = await new Client(srv.base).request('GET', 'profile/', { headers: { authorization: basic(u.email, u.password) }, localAddress: from });
    assert.equal(ok.status, 200);
  });

  test('clock: show, advance (due work runs at once), set forward only', async () => {
    const u = await srv.user();
    const drive = await u.post('drives/', { name: 'd', size: 1 << 30, media: 'disk' });
    const uuid = drive.json.objects[0].uuid;
    assert.equal((await u.get(`drives/${uuid}/`)).json.status, 'creating');
    const before = (await call('GET', 'clock')).json;
    const moved = await call('POST', 'clock', { advance_ms: 60_000 });
    assert.equal(moved.status, 200, moved.text);
    assert.ok(moved.json.offset_ms >= before.offset_ms + 60_000);
    assert.ok(moved.json.ran >= 1);
    assert.equal((await u.get(`drives/${uuid}/`)).json.status, 'unmounted', 'the creation finished when the clock moved');
    const future = new Date(Date.parse(moved.json.now) + 3_600_000).toISOString();
    assert.equal((await call('POST', 'clock', { set: future })).status, 200);
    for (const bad of [{ advance_ms: -1 }, { advance_ms: 'soon' }, { set: '2001-01-01T00:00:00Z' }, { set: 'tomorrow' }, {}, { advance_ms: 1, set: future }]) {
      const res = await call('POST', 'clock', bad);
      assert.equal(res.status, 400, JSON.stringify(bad));
      assert.equal(res.json[0].error_type, 'validation');
    }
  });

  test('faults: the next N matching requests answer 503 or 500 in the API format; the next boot of a server fails', async () => {
    const u = await srv.user();
    assert.equal((await call('POST', 'faults', { type: 'http', method: 'GET', path: '/api/2.0/tags/', count: 2, error: 'backend' })).status, 201);
    assert.equal((await call('POST', 'faults', { type: 'http', method: 'POST', path: '/api/2.0/drives/' })).status, 201);
    assert.equal((await call('GET', 'faults')).json.objects.length, 2);
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await u.get('tags/')).status);
    assert.deepEqual(statuses, [500, 500, 200]);
    const busy = await u.post('drives/', { name: 'd', size: 1 << 30, media: 'disk' });
    assert.equal(busy.status, 503);
    assert.equal(busy.json[0].error_type, 'concurrency');
    assert.equal((await u.get('drives/')).json.meta.total_count, 0, 'nothing was created');
    assert.equal((await call('GET', 'faults')).json.objects.length, 0);
    for (const bad of [
      { type: 'http', method: 'GET', path: 'tags' },
      { type: 'http', method: 'FETCH', path: '/api/2.0/' },
      { type: 'http', method: 'GET', path: '/api/2.0/', count: 0 },
      { type: 'disk' },
    ])
      assert.equal((await call('POST', 'faults', bad)).status, 400, JSON.stringify(bad));
    assert.equal((await call('POST', 'faults', { type: 'boot', server: '00000000-0000-0000-0000-000000000000' })).status, 404);

    const server = await u.post('servers/', { name: 's', cpu: 1000, mem: 536870912, vnc_password: 'pw' });
    const sid = server.json.objects[0].uuid;
    assert.equal((await call('POST', 'faults', { type: 'boot', server: sid })).status, 201);
    assert.equal((await u.post(`servers/${sid}/action/?do=start`)).status, 202);
    await call('POST', 'clock', { advance_ms: 60_000 });
    assert.equal((await u.get(`servers/${sid}/`)).json.status, 'stopped', 'the boot failed');
  });

  test('reset empties every account and keeps the demo login working', async () => {
    const u = await srv.user();
    assert.equal((await u.post('tags/', { name: 't' })).status, 201);
    const res = await call('POST', 'reset', {});
    assert.equal(res.status, 200, res.text);
    assert.ok(res.json.deleted.users >= 2);
    assert.equal(res.json.demo_login, 'demo@example.com');
    assert.equal((await u.get('tags/')).status, 401, 'the account is gone');
    const demo = new Client(srv.base, { email: 'demo@example.com', password: 'demo-secret' });
    assert.equal((await demo.get('tags/')).json.meta.total_count, 0);
    assert.ok((await demo.get('libdrives/')).json.meta.total_count > 0, 'the drive library stays');
    assert.equal((await call('POST', 'reset', { account: 'x' })).status, 400);
  });
});

describe('the admin plane is off without a token, and loopback-only unless opened', () => {
  test('--admin-token off: 404; a non-loopback client: 403', async () => {
    const off = await startServer({ 'admin-token': 'off' });
    try {
      assert.equal((await new Client(off.base).request('GET', `${A}clock`, { headers: { authorization: `Bearer off` } })).status, 404);
    } finally {
      await off.close();
    }
    // The test server listens on 127.0.0.1 only; a request the guard sees from elsewhere is faked through inject.
    const res = await srv.app.inject({ method: 'GET', url: `${A}clock`, headers: { authorization: `Bearer ${TOKEN}` }, remoteAddress: '192.0.2.7' });
    assert.equal(res.statusCode, 403);
    assert.match(res.body, /only on loopback addresses/);
  });
});

describe('stratus reset', () => {
  test('the same reset from the command line, on the server database', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-reset-'));
    const url = engine === 'sqlite' ? join(dir, 'reset.db') : (await freshDatabase()).url;
    const other = await startServer({ db: url, 'demo-login': 'keep@example.com:keep-secret' });
    try {
      await ensureDemoLogin(other.services, 'unused', other.services.config.demoLogin);
      const u = await other.user();
      assert.equal((await u.post('tags/', { name: 't' })).status, 201);
      const res = await cli(['reset', '--db', url]);
      assert.equal(res.status, 0, res.stderr);
      assert.match(res.stdout, /^reset: 2 user\(s\) and \d+ other row\(s\) deleted; demo login keep@example\.com kept\n$/);
      // The server's verified-credentials cache keeps the deleted login up to 2 s: refused once that ends.
      await until('the deleted login refused', async () => (await u.get('tags/')).status === 401);
      assert.equal((await new Client(other.base, { email: 'keep@example.com', password: 'keep-secret' }).get('tags/')).json.meta.total_count, 0);
      assert.equal((await cli(['reset', 'now', '--db', url])).status, 2);
    } finally {
      await other.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
