import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import { startServer, type TestServer } from '../helpers/server.js';
import { Client } from '../helpers/client.js';
import { newDrive, newServer } from '../helpers/seed.js';
import { billingCommand } from '../../src/cli/billing.js';

let srv: TestServer;
before(async () => {
  srv = await startServer();
});
after(() => srv.close());

type Frame = { resource_type: string; resource_uri: string; uuid?: string };

/** A websocket client as pycloudsigma's: `authenticate_asynchronous`, then `/websocket` with the cookie. */
async function stream(server: TestServer, c: Client) {
  const res = await c.post('accounts/action/?do=authenticate_asynchronous');
  assert.equal(res.status, 200, res.text);
  const cookie = String(res.headers['set-cookie']).split(';')[0];
  assert.match(cookie, /^async_auth=/);
  const frames: Frame[] = [];
  const ws = new WebSocket(`ws://127.0.0.1:${server.port}/websocket`, { headers: { cookie } });
  ws.on('message', (m) => frames.push(JSON.parse(String(m)) as Frame));
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
  return { ws, frames, waitFor };
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
    // The test clock also follows real time, and the cookie's time is whole seconds: a few seconds of margin.
    await srv.advance(115_000);
    assert.equal(await connect(srv, first.cookie), 'open', 'within 120 s');
    await srv.advance(5_000);
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

describe('websocket event stream', () => {
  test('without the async_auth cookie the upgrade is refused', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${srv.port}/websocket`);
    const status = await new Promise<number>((resolve) => {
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('error', () => resolve(-1));
    });
    assert.equal(status, 401);
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

  test('changes made through another API process reach the socket (PostgreSQL)', async (t) => {
    if (srv.services.store.dialect !== 'postgres') return t.skip('one process on SQLite');
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

  test('a cookie one API process issued opens the socket on another (PostgreSQL: one shared secret)', async (t) => {
    if (srv.services.store.dialect !== 'postgres') return t.skip('one process on SQLite');
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
