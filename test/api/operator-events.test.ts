import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { cli } from '../helpers/cli.js';
import { smtpSink } from '../helpers/auth.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';

/**
 * Operator commands change money and state as the API does, so they produce what the API's changes
 * produce: the events the notification worker turns into mail (the serving process delivers them), and
 * the changes a running server's event stream sends its sockets. The command runs as its own process
 * would (its own store on the server's database: a SQLite file, or the server's PostgreSQL schema).
 */
let dir: string;
let url: string;
let srv: TestServer;
let sink: Awaited<ReturnType<typeof smtpSink>>;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-operator-events-'));
  url = engine === 'sqlite' ? join(dir, 'stratus.db') : (await freshDatabase()).url;
  sink = await smtpSink();
  srv = await startServer({ db: url, 'smtp-url': sink.url });
});
after(async () => {
  await srv.close();
  await sink.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A websocket on the running server as pycloudsigma opens it; `waitFor` a frame for a URI (up to 5 s). */
async function stream(c: Client) {
  const res = await c.post('accounts/action/?do=authenticate_asynchronous');
  assert.equal(res.status, 200, res.text);
  const cookie = String(res.headers['set-cookie']).split(';')[0];
  const frames: { resource_uri: string }[] = [];
  const ws = new WebSocket(`ws://127.0.0.1:${srv.port}/websocket`, { headers: { cookie } });
  ws.on('message', (m) => frames.push(JSON.parse(String(m)) as { resource_uri: string }));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const waitFor = async (uri: string) => {
    for (let i = 0; i < 100; i++) {
      if (frames.some((f) => f.resource_uri === uri)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`no frame for ${uri}; got ${JSON.stringify(frames)}`);
  };
  return { ws, frames, waitFor };
}

describe('operator commands produce the events and notifications the API does', () => {
  test('stratus billing topup: a "Payment received" mail through the serving process, a balance frame on its websocket', async () => {
    const u = await srv.user();
    const s = await stream(u);
    try {
      const res = await cli(['billing', 'topup', u.email, '12.50', '--db', url]);
      assert.equal(res.status, 0, res.stderr);
      await s.waitFor('/api/2.0/balance/');
      // The serving process's notification worker fans the command's event out and sends it.
      await srv.app.notifier.runDue();
      const mail = sink.mails.find((m) => m.to.includes(u.email));
      assert.ok(mail, `a mail to ${u.email}; got ${JSON.stringify(sink.mails.map((m) => [m.to, m.subject]))}`);
      assert.match(mail.subject, /Payment received/);
      assert.match(mail.text, /12\.5/);
      const feed = await u.get('notifications/?type=payment');
      assert.equal(feed.status, 200, feed.text);
      assert.equal(feed.json.objects.length, 1, feed.text);
    } finally {
      s.ws.close();
    }
  });

  test("stratus vlans assign: the new VLAN's frame on the owner's websocket", async () => {
    const u = await srv.user();
    const s = await stream(u);
    try {
      const res = await cli(['vlans', 'assign', u.email, '--db', url]);
      assert.equal(res.status, 0, res.stderr);
      const vlans = (await u.get('vlans/')).json.objects as { uuid: string }[];
      assert.equal(vlans.length, 1);
      await s.waitFor(`/api/2.0/vlans/${vlans[0].uuid}/`);
    } finally {
      s.ws.close();
    }
  });
});
