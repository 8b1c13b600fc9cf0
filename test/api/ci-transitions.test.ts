import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';

/**
 * Under `--ci` every simulated duration is 0, and a transition of zero length is done before the write that
 * started it answers: a client acting on the answer without polling finds the object in its next state
 * (issue 29: "cannot clone snapshot in state creating"). The server runs no polling loop here (tests drive
 * time), so only the write's own settling can finish a transition; its scheduler is wired as `serve` wires it.
 */
let srv: TestServer;
before(async () => {
  srv = await startServer({ ci: 'true' });
  srv.app.schedulerProbe = srv.scheduler;
});
after(() => srv.close());

describe('--ci: zero-length transitions are done when the write answers', () => {
  test('create a drive, snapshot it, clone the snapshot: each right after the answer, no polling', async () => {
    const u = await srv.user();
    const drive = await u.post('drives/', { media: 'disk', name: 'd', size: 1024 ** 3 });
    assert.equal(drive.status, 201, drive.text);
    const uuid = drive.json.objects[0].uuid;
    assert.equal((await u.get(`drives/${uuid}/`)).json.status, 'unmounted');
    const snap = await u.post('snapshots/', { drive: uuid, name: 's' });
    assert.equal(snap.status, 201, snap.text);
    const sid = snap.json.objects[0].uuid;
    const clone = await u.post(`snapshots/${sid}/action/?do=clone`, {});
    assert.ok(clone.status >= 200 && clone.status < 300, `${clone.status} ${clone.text}`);
    assert.equal((await u.get(`drives/${clone.json.uuid}/`)).json.status, 'unmounted', 'the clone is done too');
  });

  test('start a server: it is running at the next request', async () => {
    const u = await srv.user();
    const made = await u.post('servers/', { name: 's', cpu: 1000, mem: 536870912, vnc_password: 'pw' });
    assert.equal(made.status, 201, made.text);
    const sid = made.json.objects[0].uuid;
    assert.equal((await u.post(`servers/${sid}/action/?do=start`, {})).status, 202);
    assert.equal((await u.get(`servers/${sid}/`)).json.status, 'running');
    assert.equal((await u.post(`servers/${sid}/action/?do=stop`, {})).status, 202);
    assert.equal((await u.get(`servers/${sid}/`)).json.status, 'stopped');
  });

  test('without --ci a transition takes its time: the next request still sees it under way', async () => {
    const slow = await startServer({});
    slow.app.schedulerProbe = slow.scheduler;
    try {
      const u = await slow.user();
      const sid = (await u.post('servers/', { name: 's', cpu: 1000, mem: 536870912, vnc_password: 'pw' })).json.objects[0].uuid;
      assert.equal((await u.post(`servers/${sid}/action/?do=start`, {})).status, 202);
      assert.equal((await u.get(`servers/${sid}/`)).json.status, 'starting');
    } finally {
      await slow.close();
    }
  });
});
