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

  test('shutdown closes open sockets cleanly', async () => {
    const own = await startServer();
    const u = await own.user();
    const s = await stream(own, u);
    const closed = new Promise<number>((resolve) => s.ws.on('close', (code) => resolve(code)));
    await own.close();
    assert.equal(await closed, 1001);
  });
});
