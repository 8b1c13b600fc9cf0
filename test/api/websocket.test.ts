import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { startServer, type TestServer } from '../helpers/server.js';
import { Client } from '../helpers/client.js';
import { newDrive, newServer } from '../helpers/seed.js';
import { billingCommand } from '../../src/cli/billing.js';
import { setPassword } from '../../src/resources/users/users.js';
import { setCookies } from '../helpers/auth.js';
import { onlyOn } from '../helpers/skips.js';
import { FrozenClock } from '../helpers/clock.js';

let srv: TestServer;
before(async () => {
  // Time moves only when a test moves it: the cookie's 120 s are checked to the second.
  srv = await startServer({}, undefined, { clock: new FrozenClock() });
});
after(() => srv.close());

type Frame = { resource_type: string; resource_uri: string; uuid?: string };

/**
 * A websocket client as pycloudsigma's: `authenticate_asynchronous`, then `/websocket` with the cookie.
 * `headers` authenticate the first step instead of the client's Basic header (a cookie session).
 */
async function stream(server: TestServer, c: Client, headers?: Record<string, string>) {
  const res = headers
    ? await server.anon().request('POST', 'accounts/action/?do=authenticate_asynchronous', { headers })
    : await c.post('accounts/action/?do=authenticate_asynchronous');
  assert.equal(res.status, 200, res.text);
  const cookie = String(res.headers['set-cookie']).split(';')[0];
  assert.match(cookie, /^async_auth=/);
  const frames: Frame[] = [];
  const ws = new WebSocket(`ws://127.0.0.1:${server.port}/websocket`, { headers: { cookie } });
  ws.on('message', (m) => frames.push(JSON.parse(String(m)) as Frame));
  const closing = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  /** How the server closed the socket (code and reason); fails after 5 s. */
  const closed = () =>
    Promise.race([
      closing,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still open; frames ${JSON.stringify(frames)}`)), 5000).unref()),
    ]);
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  /** Waits until a frame for `uri` arrives (counting from `from`), up to 5 s. */
  const waitFor = async (uri: string, from = 0) => {
    for (let i = 0; i < 100; i++) {
      const hit = frames.slice(from).find((f) => f.resource_uri === uri);
      if (hit) return hit;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`no frame for ${uri}; got ${JSON.stringify(frames)}`);
  };
  return { ws, frames, waitFor, closed, cookie };
}

/** The async_auth cookie (`name=value`) and the whole Set-Cookie line of one `authenticate_asynchronous`. */
async function asyncAuth(c: Client): Promise<{ cookie: string; line: string; value: string }> {
  const res = await c.post('accounts/action/?do=authenticate_asynchronous', {});
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.json, {});
  const line = String(res.headers['set-cookie']);
  const cookie = line.split(';')[0];
  return { cookie, line, value: cookie.slice('async_auth='.length) };
}

/** Opens /websocket with a Cookie header: 'open' (then closed again), or the refusing status. */
async function connect(server: TestServer, cookie: string): Promise<'open' | number> {
  const ws = new WebSocket(`ws://127.0.0.1:${server.port}/websocket`, { headers: { cookie } });
  const outcome = await new Promise<'open' | number>((resolve) => {
    ws.once('open', () => resolve('open'));
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    ws.on('error', () => resolve(-1));
  });
  if (outcome === 'open') {
    const closed = new Promise((r) => ws.once('close', r));
    ws.close();
    await closed;
  }
  return outcome;
}

describe('the async_auth cookie (reference §4.3)', () => {
  test('as recorded: <base64 of the user uuid>|<unix time>|<40 hex>, Max-Age=120 and expires 120 s on', async () => {
    const u = await srv.user();
    // The test clock also follows real time: the moment of issue is between these two readings.
    const before = srv.clock.now().getTime();
    const { line, value } = await asyncAuth(u);
    const after = srv.clock.now().getTime();
    const m = /^([A-Za-z0-9+/]+={0,2})\|(\d+)\|([0-9a-f]{40})$/.exec(value);
    assert.ok(m, value);
    assert.equal(Buffer.from(m[1], 'base64').toString('utf8'), u.uuid);
    const ts = Number(m[2]);
    assert.ok(ts >= Math.floor(before / 1000) && ts <= Math.floor(after / 1000), `${ts} is the unix time of issue`);
    assert.match(line, /; Max-Age=120;/);
    assert.match(line, /; Path=\//);
    const expires = Date.parse(/expires=([^;]+)/.exec(line)![1]);
    assert.ok(expires >= Math.floor(before / 1000) * 1000 + 120_000 && expires <= after + 120_000, line);
    // Stateless: no session row is made for it.
    assert.equal((await srv.services.store.db.selectFrom('sessions').select('user_uuid').where('user_uuid', '=', u.uuid).execute()).length, 0);
    // Every call issues a cookie of its moment.
    await srv.advance(5_000);
    const again = await asyncAuth(u);
    assert.ok(Number(again.value.split('|')[1]) >= ts + 5);
    // Without credentials there is no cookie.
    const anonymous = await new Client(srv.base).post('accounts/action/?do=authenticate_asynchronous', {});
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.headers['set-cookie'], undefined);
  });

  test('it opens the websocket for 120 s of the clock, not after; a fresh one does; an open socket outlives it', async () => {
    const u = await srv.user();
    const first = await asyncAuth(u);
    const held = await stream(srv, u); // connected at once, as pycloudsigma does
    // The clock stands still between moves (a whole second: the cookie's time is whole seconds).
    await srv.advance(119_000);
    assert.equal(await connect(srv, first.cookie), 'open', 'within 120 s');
    await srv.advance(1_000);
    assert.equal(await connect(srv, first.cookie), 401, 'from 120 s on');
    assert.equal(await connect(srv, (await asyncAuth(u)).cookie), 'open', 'a fresh cookie');
    // The socket opened with an older cookie still gets its frames.
    const drive = await newDrive(u);
    await held.waitFor(`/api/2.0/drives/${drive}/`);
    held.ws.close();
  });

  test('forged, altered or foreign-form cookies open nothing', async () => {
    const u = await srv.user();
    const other = await srv.user();
    const { value } = await asyncAuth(u);
    const [b64, ts, sig] = value.split('|');
    const otherB64 = Buffer.from(other.uuid).toString('base64');
    const flip = (hex: string) => (hex[0] === '0' ? '1' : '0') + hex.slice(1);
    for (const [what, v] of [
      ['another signature', `${b64}|${ts}|${flip(sig)}`],
      ['another user with the signature', `${otherB64}|${ts}|${sig}`],
      ['a later time with the signature', `${b64}|${Number(ts) + 100}|${sig}`],
      ['no signature', `${b64}|${ts}`],
      ['a session id (the old form)', 'a'.repeat(32)],
      ['empty', ''],
    ])
      assert.equal(await connect(srv, `async_auth=${v}`), 401, what);
    assert.equal(await connect(srv, `async_auth=${value}`), 'open', 'the genuine one');
  });
});

/** An upgrade the server refuses: its status and body. */
function refused(headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const ws = new WebSocket(`ws://127.0.0.1:${srv.port}/websocket`, { headers });
  return new Promise((resolve) => {
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d) => (body += String(d)));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.on('open', () => {
      ws.close();
      resolve({ status: 101, body: '' });
    });
    ws.on('error', () => undefined);
  });
}

/** A cookie login (reference 4.3): the cookies a browser then sends, and its CSRF header. */
async function cookieLogin(u: { email: string; password: string }) {
  const res = await srv.anon().post('accounts/action/?do=login', { username: u.email, password: u.password });
  assert.equal(res.status, 200, res.text);
  const jar = setCookies(res);
  const csrf = jar.get('csrftoken')!.value;
  return { cookie: `csrftoken=${csrf}; sessionid=${jar.get('sessionid')!.value}`, headers: { 'x-csrftoken': csrf } };
}

/** Whether nothing closes the socket within `ms`. */
const staysOpen = (ws: WebSocket, ms = 300) =>
  new Promise<boolean>((resolve) => {
    ws.once('close', () => resolve(false));
    setTimeout(() => resolve(ws.readyState === WebSocket.OPEN), ms);
  });

describe('websocket event stream', () => {
  test('without the async_auth cookie the upgrade is refused', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${srv.port}/websocket`);
    const status = await new Promise<number>((resolve) => {
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('error', () => resolve(-1));
    });
    assert.equal(status, 401);
    const r = await refused({ cookie: 'async_auth=0123456789abcdef0123456789abcdef' });
    assert.equal(r.status, 401);
    assert.equal(JSON.parse(r.body)[0].error_type, 'permission');
  });

  test("a page of another origin is refused (403, error array) the cookie's upgrade; its own origin and non-browser clients are not", async () => {
    const u = await srv.user();
    const res = await u.post('accounts/action/?do=authenticate_asynchronous');
    const cookie = String(res.headers['set-cookie']).split(';')[0];
    for (const origin of ['http://evil.example', `http://127.0.0.1.evil.example:${srv.port}`, `http://127.0.0.1:${srv.port + 1}`, 'null', 'not a url']) {
      const r = await refused({ cookie, origin });
      assert.equal(r.status, 403, origin);
      const body = JSON.parse(r.body);
      assert.deepEqual(Object.keys(body[0]).sort(), ['error_message', 'error_point', 'error_type']);
      assert.equal(body[0].error_type, 'permission');
    }
    assert.equal((await refused({ cookie, origin: `http://127.0.0.1:${srv.port}` })).status, 101);
    assert.equal((await refused({ cookie, origin: `HTTP://127.0.0.1:${srv.port}` })).status, 101);
    assert.equal((await refused({ cookie })).status, 101, 'no Origin: not a browser');
  });

  test('a new password closes the sockets of the account (every credential of it ended); others stay', async () => {
    const u = await srv.user();
    const other = await srv.user();
    const mine = await stream(srv, u);
    const login = await cookieLogin(u);
    const browser = await stream(srv, u, { cookie: login.cookie, ...login.headers });
    const theirs = await stream(srv, other);
    await setPassword(srv.services, u.email, 'a-new-password-1');
    for (const s of [mine, browser]) assert.deepEqual(await s.closed(), { code: 1008, reason: 'session ended: authenticate again' });
    // The other account's socket still gets its frames.
    const drive = await newDrive(other);
    await theirs.waitFor(`/api/2.0/drives/${drive}/`);
    assert.equal(await staysOpen(theirs.ws), true);
    theirs.ws.close();
  });

  test('logout closes the socket opened from that session; a socket of another session stays', async () => {
    const u = await srv.user();
    const login = await cookieLogin(u);
    const session = await stream(srv, u, { cookie: login.cookie, ...login.headers });
    // A cookie names its user and second of issue (the recorded form): one of another second is another credential.
    srv.clock.advance(1_100);
    const basicOne = await stream(srv, u);
    // A browser sends every cookie it holds: the session's and the stream's.
    const out = await srv.anon().post('accounts/action/?do=logout', {}, { cookie: `${login.cookie}; ${session.cookie}`, ...login.headers });
    assert.equal(out.status, 200, out.text);
    assert.equal(setCookies(out).get('async_auth')?.attrs['max-age'], '0');
    assert.deepEqual(await session.closed(), { code: 1008, reason: 'session ended: authenticate again' });
    const drive = await newDrive(u);
    await basicOne.waitFor(`/api/2.0/drives/${drive}/`);
    assert.equal(await staysOpen(basicOne.ws), true);
    basicOne.ws.close();
  });

  test('a new password voids the async_auth cookies issued before it: they open nothing, a fresh one does', async () => {
    const u = await srv.user();
    const res = await u.post('accounts/action/?do=authenticate_asynchronous');
    const old = String(res.headers['set-cookie']).split(';')[0];
    assert.equal((await refused({ cookie: old })).status, 101);
    await setPassword(srv.services, u.email, 'a-new-password-3');
    assert.equal((await refused({ cookie: old })).status, 401, 'signed before the change');
    const fresh = new Client(srv.base, { email: u.email, password: 'a-new-password-3' });
    const again = await fresh.post('accounts/action/?do=authenticate_asynchronous');
    assert.equal((await refused({ cookie: String(again.headers['set-cookie']).split(';')[0] })).status, 101);
  });

  test('a password changed through another API process closes the socket (PostgreSQL)', { skip: onlyOn('postgres') }, async () => {
    const second = await startServer({ db: srv.dbUrl }, undefined, { clock: srv.clock });
    try {
      const u = await srv.user();
      const mine = await stream(srv, u);
      await setPassword(second.services, u.email, 'a-new-password-2');
      assert.equal((await mine.closed()).code, 1008);
    } finally {
      await second.close();
    }
  });

  test("a drive's create -> unmounted and a server's start -> running -> stop, only to the owner", async () => {
    const u = await srv.user();
    const other = await srv.user();
    const mine = await stream(srv, u);
    const theirs = await stream(srv, other);

    const drive = await newDrive(u);
    const uri = `/api/2.0/drives/${drive}/`;
    const created = await mine.waitFor(uri);
    assert.equal(created.resource_type, 'drives');
    let mark = mine.frames.length;
    await srv.advance(60_000);
    await mine.waitFor(uri, mark);
    assert.equal((await u.get(`drives/${drive}/`)).json.status, 'unmounted');

    const server = await newServer(u);
    const suri = `/api/2.0/servers/${server}/`;
    await mine.waitFor(suri);
    mark = mine.frames.length;
    assert.equal((await u.post(`servers/${server}/action/?do=start`)).status, 202);
    await mine.waitFor(suri, mark);
    mark = mine.frames.length;
    await srv.advance(60_000);
    await mine.waitFor(suri, mark);
    assert.equal((await u.get(`servers/${server}/`)).json.status, 'running');
    mark = mine.frames.length;
    assert.equal((await u.post(`servers/${server}/action/?do=stop`)).status, 202);
    await srv.advance(60_000);
    await mine.waitFor(suri, mark);

    // A balance change (a ledger entry: here a payment) is a frame for the balance.
    await billingCommand(srv.services, ['topup', u.email, '5'], {}, 'usage');
    assert.equal((await mine.waitFor('/api/2.0/balance/')).resource_type, 'balance');

    // Another user's socket saw none of it.
    assert.deepEqual(theirs.frames, []);
    mine.ws.close();
    theirs.ws.close();
  });

  test('changes made through another API process reach the socket (PostgreSQL)', { skip: onlyOn('postgres') }, async () => {
    const second = await startServer({ db: srv.dbUrl }, undefined, { clock: srv.clock });
    try {
      const u = await srv.user();
      const mine = await stream(srv, u);
      const via = new Client(second.base, { email: u.email, password: u.password });
      const drive = await newDrive(via);
      await mine.waitFor(`/api/2.0/drives/${drive}/`);
      mine.ws.close();
    } finally {
      await second.close();
    }
  });

  test('a cookie one API process issued opens the socket on another (PostgreSQL: one shared secret)', { skip: onlyOn('postgres') }, async () => {
    const second = await startServer({ db: srv.dbUrl }, undefined, { clock: srv.clock });
    try {
      const u = await srv.user();
      const { cookie } = await asyncAuth(u);
      assert.equal(await connect(second, cookie), 'open');
      await srv.advance(120_000);
      assert.equal(await connect(second, cookie), 401);
    } finally {
      await second.close();
    }
  });

  test('shutdown closes open sockets cleanly', async () => {
    const own = await startServer();
    const u = await own.user();
    const s = await stream(own, u);
    const closed = new Promise<number>((resolve) => s.ws.on('close', (code) => resolve(code)));
    await own.close();
    assert.equal(await closed, 1001);
  });
});
