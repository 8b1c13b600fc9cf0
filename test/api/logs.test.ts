import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { golden, sameShape } from '../helpers/golden.js';
import { record as audit } from '../../src/core/events.js';
import { ApiError } from '../../src/core/errors.js';

type User = Client & { uuid: string; email: string };
let srv: TestServer;
let alice: User, bob: User;
const GiB = 1024 ** 3;

before(async () => {
  srv = await startServer();
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

async function drive(c: Client, name = 'log-drive', extra: Record<string, unknown> = {}) {
  const res = await c.post('drives/', { media: 'disk', name, size: GiB, ...extra });
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0];
}
const entries = async (c: Client, q = '') => {
  const res = await c.get(`logs/${q}`);
  assert.equal(res.status, 200, res.text);
  return res.json;
};

describe('audit log against the golden dumps', () => {
  test('entries have the recorded shape, newest first; schema as recorded', async () => {
    const u = (await srv.user()) as User;
    const d = await drive(u, 'golden', { meta: { k: 'v' } });
    await srv.advance(5_000);
    assert.equal((await u.put(`drives/${d.uuid}/`, { name: 'renamed' })).status, 200);
    assert.equal((await u.delete(`drives/${d.uuid}/`)).status, 204);

    const list = await entries(u, '?limit=5');
    sameShape(list, golden('response_audit_log_list'));
    assert.deepEqual(list.meta, { limit: 5, offset: 0, total_count: 3 });
    assert.deepEqual(
      list.objects.map((e: any) => e.action),
      ['delete', 'update', 'create'],
    );
    const [del, , create] = list.objects;
    const actor = { resource_uri: `/api/2.0/user/${u.uuid}/`, uuid: u.uuid };
    assert.deepEqual(del, { ...golden('response_audit_log_list').objects[0], actor, category: 'Drives', timestamp: del.timestamp, uuid: d.uuid });
    assert.equal(del.resource_uri, undefined);
    // A create's details are the call's parameters, as a JSON string.
    assert.deepEqual(JSON.parse(create.details), { media: 'disk', meta: { k: 'v' }, name: 'golden', size: GiB });
    for (const e of list.objects) assert.match(e.timestamp, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\+00:00$/);
    assert.ok(list.objects[0].timestamp > list.objects[2].timestamp, 'the clock moved between create and delete');

    const schema = await u.get('logs/schema/');
    assert.equal(schema.status, 200);
    assert.deepEqual(schema.json, golden('response_audit_log_schema'));
  });

  test('only GET on the list; no detail methods', async () => {
    const post = await alice.post('logs/', { action: 'create' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET');
    const del = await alice.delete('logs/');
    assert.equal(del.status, 405);
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const res = await alice.request(method, 'logs/1/', method === 'PUT' ? { body: {} } : {});
      assert.equal(res.status, 405, method);
      assert.equal(res.json[0].error_type, 'validation');
    }
    assert.equal((await srv.anon().get('logs/')).status, 401);
  });
});

describe('audit log queries', () => {
  test('default limit 20, limit=0, offset, total_count', async () => {
    const u = (await srv.user()) as User;
    const made = [];
    for (let i = 0; i < 23; i++) made.push((await drive(u, `d${i}`)).uuid);
    const first = await entries(u);
    assert.deepEqual(first.meta, { limit: 20, offset: 0, total_count: 23 });
    assert.deepEqual(
      first.objects.map((e: any) => e.uuid),
      made.slice(3).reverse(),
    );
    const rest = await entries(u, '?offset=20');
    assert.deepEqual(rest.meta, { limit: 20, offset: 20, total_count: 23 });
    assert.deepEqual(
      rest.objects.map((e: any) => e.uuid),
      made.slice(0, 3).reverse(),
    );
    const all = await entries(u, '?limit=0');
    assert.equal(all.objects.length, 23);
    assert.equal(all.meta.total_count, 23);
    const mid = await entries(u, '?limit=5&offset=5');
    assert.deepEqual(mid.meta, { limit: 5, offset: 5, total_count: 23 });
    assert.deepEqual(
      mid.objects.map((e: any) => e.uuid),
      made.slice(13, 18).reverse(),
    );
    assert.deepEqual((await entries(u, '?offset=50')).objects, []);
    const fields = await entries(u, '?limit=1&fields=action,uuid');
    assert.deepEqual(fields.objects, [{ action: 'create', uuid: made[22] }]);
    const bad = await u.get('logs/?limit=-1');
    assert.equal(bad.status, 400);
    assert.equal(bad.json[0].error_point, 'limit');
  });

  test('filters: uuid (the resource), name and name__contains (the action), tag; comma = OR, repeated = AND', async () => {
    const u = (await srv.user()) as User;
    const d1 = await drive(u, 'one');
    const d2 = await drive(u, 'two');
    await srv.advance(5_000);
    await u.put(`drives/${d1.uuid}/`, { name: 'one-b' });
    await u.post(`drives/${d2.uuid}/action/?do=clone`, {});
    const actions = async (q: string) =>
      (await entries(u, `?limit=0&${q}`)).objects.map((e: any) => `${e.action}:${e.uuid === d1.uuid ? 1 : e.uuid === d2.uuid ? 2 : 'x'}`);

    assert.deepEqual(await actions(`uuid=${d1.uuid}`), ['update:1', 'create:1']);
    assert.deepEqual(await actions(`uuid=${d1.uuid},${d2.uuid}`), ['clone_src:2', 'update:1', 'create:2', 'create:1']);
    assert.deepEqual(await actions('name=create'), ['create:2', 'create:1']);
    assert.deepEqual(await actions('name=update,clone_src'), ['clone_src:2', 'update:1']);
    assert.deepEqual(await actions('name__contains=CLONE'), ['clone_dst:x', 'clone_src:2']);
    assert.deepEqual(await actions(`name=create&uuid=${d2.uuid}`), ['create:2']);
    assert.deepEqual(await actions('name=create&name=update'), []);

    const tag = (await u.post('tags/', { name: 'logs' })).json.objects[0];
    await u.put(`drives/${d2.uuid}/`, { tags: [tag.uuid] });
    assert.deepEqual(await actions(`tag=${tag.uuid}`), ['update:2', 'clone_src:2', 'create:2']);
    // Someone else's tag filters nothing in.
    const foreign = (await bob.post('tags/', { name: 'x' })).json.objects[0];
    assert.deepEqual(await actions(`tag=${foreign.uuid}`), []);
    assert.equal((await entries(u, `?tag=${tag.uuid}&limit=1`)).meta.total_count, 3);
  });

  test('failures and system entries: success false with the error fields, actor null', async () => {
    const u = (await srv.user()) as User;
    const d = await drive(u);
    await srv.services.store.transaction(async (tx) => {
      await audit(tx, srv.services, { action: 'heal', category: 'Drives', uuid: d.uuid, owner: u.uuid, actor: null });
      await audit(tx, srv.services, {
        action: 'boot',
        category: 'Servers',
        uuid: d.uuid,
        owner: u.uuid,
        actor: u.uuid,
        error: new ApiError('backend', 'The guest failed to boot', 'drives'),
      });
    });
    const [boot, heal] = (await entries(u, '?limit=2')).objects;
    assert.deepEqual(
      [boot.success, boot.error_type, boot.error_point, boot.error_message, boot.actor.uuid],
      [false, 'backend', 'drives', 'The guest failed to boot', u.uuid],
    );
    assert.deepEqual([heal.success, heal.actor, heal.error_type, heal.error_point, heal.error_message, heal.details], [true, null, null, null, '', '']);
  });

  test('XML', async () => {
    const res = await alice.get('logs/?limit=1&format=xml');
    assert.equal(res.status, 200);
    assert.match(res.headers['content-type'] ?? '', /xml/);
  });
});
