import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { golden, sameShape } from '../helpers/golden.js';
import { bareResource, newDrive, newServer } from '../helpers/seed.js';
import { assignIps } from '../../src/resources/ips/ips.js';

let srv: TestServer;
let alice: Client & { uuid: string };
let bob: Client & { uuid: string };

before(async () => {
  srv = await startServer();
  alice = await srv.user();
  bob = await srv.user();
});
after(() => srv.close());

/** An IP of the user's, as the operator's `ips assign` hands them out. */
async function newIp(owner: string): Promise<string> {
  const [address] = await srv.services.store.transaction((tx) => assignIps(tx, srv.services, owner, 1));
  return address;
}

describe('tags', () => {
  test('create matches the golden dump', async () => {
    const res = await alice.post('tags/', { objects: [{ name: 'MyGroupOfThings' }] });
    assert.equal(res.status, 201);
    const expected = golden('response_tags_create');
    sameShape(res.json, expected);
    const tag = res.json.objects[0];
    assert.deepEqual(tag.meta, {});
    assert.deepEqual(tag.resources, []);
    assert.deepEqual(tag.owner, { resource_uri: `/api/2.0/user/${alice.uuid}/`, uuid: alice.uuid });
    assert.equal(tag.resource_uri, `/api/2.0/tags/${tag.uuid}/`);
  });

  test('name is required', async () => {
    const res = await alice.post('tags/', { objects: [{ meta: {} }] });
    assert.equal(res.status, 400);
    assert.equal(res.json[0].error_type, 'validation');
    assert.equal(res.json[0].error_point, 'name');
  });

  test('a name of "" is a name: tastypie\'s blank=False means the key may not be left out (acls pair it with a "" default)', async () => {
    const res = await alice.post('tags/', { name: '' });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.json.objects[0].name, '');
    assert.equal((await alice.get(res.json.objects[0].resource_uri)).json.name, '');
  });

  test('wrong field types are 400 with the field as error_point, and nothing is created', async () => {
    const before = (await alice.get('tags/?limit=0')).json.meta.total_count;
    for (const [body, point] of [
      [{ objects: [{ name: 'ok' }, { name: 5 }] }, 'name'],
      [{ name: 'x', meta: 'not a dict' }, 'meta'],
      [{ name: 'x', meta: { ['k'.repeat(33)]: 'v' } }, 'meta'],
      [{ name: 'x', meta: { k: { nested: 1 } } }, 'meta'],
      [{ name: 'x', resources: 'nope' }, 'resources'],
      [{ name: 'x', resources: [5] }, 'resources'],
    ] as const) {
      const res = await alice.post('tags/', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json[0].error_point, point);
    }
    assert.equal((await alice.get('tags/?limit=0')).json.meta.total_count, before);
  });

  test('resources: create with members, listed with owner and res_type (golden shape)', async () => {
    const drive = await newDrive(alice);
    const server = await newServer(alice);
    const ip = await newIp(alice.uuid);
    const res = await alice.post('tags/', { objects: [{ name: 'TagCreatedWithResource', resources: [drive, server, ip] }] });
    assert.equal(res.status, 201);
    sameShape(res.json, golden('response_tags_create_with_resource'));
    const members = res.json.objects[0].resources;
    assert.deepEqual(
      members.map((m: any) => [m.res_type, m.uuid, m.resource_uri]),
      [
        ['drives', drive, `/api/2.0/drives/${drive}/`],
        ['servers', server, `/api/2.0/servers/${server}/`],
        ['ips', ip, `/api/2.0/ips/${ip}/`],
      ],
    );
    for (const m of members) assert.equal(m.owner.uuid, alice.uuid);
  });

  test('resources: PUT replaces the member set; {uuid} and resource URIs are accepted', async () => {
    const d1 = await newDrive(alice);
    const d2 = await newDrive(alice);
    // A kind nothing creates yet: tag membership takes any resource of the caller's.
    const s1 = await bareResource(srv, 'snapshots', alice.uuid);
    const tag = (await alice.post('tags/', { name: 'swap', resources: [d1] })).json.objects[0];
    const res = await alice.put(tag.resource_uri, { name: 'swap', resources: [{ uuid: d2 }, `/api/2.0/snapshots/${s1}/`] });
    assert.equal(res.status, 200);
    sameShape(res.json, golden('response_tags_update_resources'));
    assert.deepEqual(
      res.json.resources.map((m: any) => m.uuid),
      [d2, s1],
    );
    const keep = await alice.put(tag.resource_uri, { name: 'renamed' });
    assert.deepEqual(
      keep.json.resources.map((m: any) => m.uuid),
      [d2, s1],
      'absent resources keep the set',
    );
    const cleared = await alice.put(tag.resource_uri, { resources: [] });
    assert.deepEqual(cleared.json.resources, []);
  });

  test("resources: unknown or another user's resources are a 400 on resources", async () => {
    const bobs = await newDrive(bob);
    for (const ref of [crypto.randomUUID(), bobs]) {
      const res = await alice.post('tags/', { name: 'bad', resources: [ref] });
      assert.equal(res.status, 400);
      assert.equal(res.json[0].error_point, 'resources');
    }
  });

  test('a deleted resource leaves its tags; a deleted tag frees its members', async () => {
    const d = await newDrive(alice);
    const tag = (await alice.post('tags/', { name: 'gone', resources: [d] })).json.objects[0];
    await srv.advance(60_000); // the drive is made (`unmounted`), so it may be deleted
    assert.equal((await alice.delete(`drives/${d}/`)).status, 204);
    assert.deepEqual((await alice.get(tag.resource_uri)).json.resources, []);
    assert.equal((await alice.delete(tag.resource_uri)).status, 204);
    const rows = await srv.services.store.db.selectFrom('tag_members').selectAll().where('tag_uuid', '=', tag.uuid).execute();
    assert.equal(rows.length, 0);
  });

  test('list and detail are full objects (golden list shape)', async () => {
    const list = await alice.get('tags/?limit=0');
    const detail = await alice.get('tags/detail/?limit=0');
    sameShape(list.json, golden('response_tags_list'));
    assert.deepEqual(list.json, detail.json);
  });

  test('get, update and delete', async () => {
    const tag = (await alice.post('tags/', { name: 'crud' })).json.objects[0];
    const got = await alice.get(`tags/${tag.uuid}/`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.json, tag);
    const put = await alice.put(`tags/${tag.uuid}/`, { name: 'crud2', meta: { k: 'v' } });
    assert.equal(put.status, 200);
    assert.equal(put.json.name, 'crud2');
    assert.equal((await alice.delete(`tags/${tag.uuid}/`)).status, 204);
    assert.equal((await alice.get(`tags/${tag.uuid}/`)).status, 404);
    assert.equal((await alice.delete(`tags/${tag.uuid}/`)).status, 404);
    assert.equal((await alice.put(`tags/${tag.uuid}/`, { name: 'x' })).status, 404);
  });

  test("tags are never shared: another user's tag is 404 for every method", async () => {
    const tag = (await alice.post('tags/', { name: 'private' })).json.objects[0];
    for (const res of [await bob.get(tag.resource_uri), await bob.put(tag.resource_uri, { name: 'x' }), await bob.delete(tag.resource_uri)]) {
      assert.equal(res.status, 404);
      assert.equal(res.json[0].error_type, 'notexist');
    }
    assert.equal((await alice.get(tag.resource_uri)).json.name, 'private');
  });

  test('a malformed uuid in the URL is a 404, not a crash', async () => {
    for (const id of ['not-a-uuid', "'; drop table resources; --", '%00', 'x'.repeat(150)]) {
      const res = await alice.get(`tags/${encodeURIComponent(id)}/`);
      assert.equal(res.status, 404, id);
    }
  });

  test('schema matches the golden dump exactly (no `filtering` key, as recorded)', async () => {
    const res = await alice.get('tags/schema/');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, golden('response_tags_schema'));
  });

  test('the standard filters work though the schema does not print them', async () => {
    const a = (await alice.post('tags/', { name: 'filter-probe-a' })).json.objects[0];
    await alice.post('tags/', { name: 'filter-probe-b' });
    assert.deepEqual(
      (await alice.get('tags/?name=filter-probe-a')).json.objects.map((t: any) => t.uuid),
      [a.uuid],
    );
    assert.equal((await alice.get('tags/?name__contains=filter-probe')).json.meta.total_count, 2);
    assert.deepEqual(
      (await alice.get(`tags/?uuid=${a.uuid}`)).json.objects.map((t: any) => t.uuid),
      [a.uuid],
    );
  });
});
