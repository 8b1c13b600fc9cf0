import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { golden, sameShape } from '../helpers/golden.js';
import { newServer } from '../helpers/seed.js';
import { ApiError } from '../../src/core/errors.js';
import type { Tx } from '../../src/store/db.js';
import { lockAttachable } from '../../src/core/permissions.js';
import { assignVlans, releaseVlan, setServerVlans } from '../../src/resources/vlans/vlans.js';

type User = Client & { uuid: string; email: string };

/** Rule 8 for VLANs: what a NIC's `vlan` is checked with. */
const usableVlan = (t: Tx, owner: string, vlan: string, point = 'vlan') =>
  lockAttachable(t, srv.services, { caller: owner, serverOwner: owner, kind: 'vlans', uuid: vlan, point, label: 'VLAN' });
let srv: TestServer;
let alice: User, bob: User;

before(async () => {
  srv = await startServer();
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

const tx = <T>(fn: (t: Tx) => Promise<T>) => srv.services.store.transaction(fn);
const assign = (u: User, count = 1, subscription?: number) => tx((t) => assignVlans(t, srv.services, u.uuid, count, { subscription }));

/** A stopped server of `owner`'s (no NICs: the VLAN functions under test attach it). */
const server = (owner: User): Promise<string> => newServer(owner);

async function failure(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ApiError, String(e));
    return e;
  }
  assert.fail('expected an ApiError');
}

async function share(uuid: string, grantee: User, rules: string[]) {
  const tag = (await alice.post('tags/', { name: 'vlan-share' })).json.objects[0];
  const current = (await alice.get(`vlans/${uuid}/`)).json.tags.map((t: { uuid: string }) => t.uuid);
  assert.equal((await alice.put(`vlans/${uuid}/`, { tags: [...current, tag.uuid] })).status, 200);
  const acl = await alice.post('acls/', { grantees: [{ uuid: grantee.uuid }], rules: rules.map((permission) => ({ permission })), tags: [tag.uuid] });
  assert.equal(acl.status, 201, acl.text);
}

describe('VLANs against the golden dumps', () => {
  test('list, detail, get, update and schema', async () => {
    const u = (await srv.user()) as User;
    const [uuid] = await assign(u, 1, 12);
    const swap = (o: any) => ({ ...o, owner: { resource_uri: `/api/2.0/user/${u.uuid}/`, uuid: u.uuid }, resource_uri: `/api/2.0/vlans/${uuid}/`, uuid });

    const list = await u.get('vlans/?limit=0');
    assert.equal(list.status, 200);
    sameShape(list.json, golden('response_vlan_list'));
    assert.deepEqual(list.json.objects, [swap(golden('response_vlan_list').objects[0])]);

    const detail = await u.get('vlans/detail/?limit=0');
    sameShape(detail.json, golden('response_vlan_list_detail'));
    assert.deepEqual(detail.json.objects, [swap(golden('response_vlan_list_detail').objects[0])]);

    const got = await u.get(`vlans/${uuid}/`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.json, swap(golden('response_vlan_get')));

    const put = await u.put(`vlans/${uuid}/`, golden('request_vlan_update'));
    assert.equal(put.status, 200);
    assert.deepEqual(put.json, swap(golden('response_vlan_update')));

    const schema = await u.get('vlans/schema/');
    assert.equal(schema.status, 200);
    assert.deepEqual(schema.json, golden('response_vlan_schema'));
  });

  test('no POST or DELETE: 405 with Allow', async () => {
    const [uuid] = await assign(alice);
    const post = await alice.post('vlans/', {});
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET');
    const del = await alice.delete(`vlans/${uuid}/`);
    assert.equal(del.status, 405);
    assert.equal(del.headers.allow, 'GET,PUT');
  });
});

describe('VLAN objects', () => {
  test("PUT changes meta and tags only; others' VLANs are 404", async () => {
    const [uuid] = await assign(alice);
    const tag = (await alice.post('tags/', { name: 'v' })).json.objects[0];
    const res = await alice.put(`vlans/${uuid}/`, {
      meta: { name: 'backend' },
      tags: [tag.uuid],
      bottom_vlan_tag: 7,
      servers: [randomUUID()],
      subscription: { id: 3 },
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      [res.json.meta, res.json.tags.map((t: any) => t.uuid), res.json.bottom_vlan_tag, res.json.servers, res.json.subscription],
      [{ name: 'backend' }, [tag.uuid], null, [], null],
    );
    assert.equal(res.json.name, undefined);
    assert.equal((await bob.get(`vlans/${uuid}/`)).status, 404);
    assert.equal((await bob.put(`vlans/${uuid}/`, {})).status, 404);
    assert.equal((await alice.get(`vlans/${randomUUID()}/`)).status, 404);
    assert.deepEqual(
      (await alice.get(`tags/${tag.uuid}/vlans/`)).json.objects.map((o: any) => o.uuid),
      [uuid],
    );
  });

  test('filters and paging', async () => {
    const u = (await srv.user()) as User;
    const ids = await assign(u, 4);
    assert.equal(new Set(ids).size, 4);
    const tag = (await u.post('tags/', { name: 't' })).json.objects[0];
    await u.put(`vlans/${ids[0]}/`, { meta: { name: 'Storage LAN' } });
    await u.put(`vlans/${ids[2]}/`, { tags: [tag.uuid] });
    const uuids = async (q: string) => (await u.get(`vlans/?${q}`)).json.objects.map((o: any) => o.uuid);
    assert.deepEqual(await uuids(`uuid=${ids[1]},${ids[3]}`), [ids[1], ids[3]]);
    assert.deepEqual(await uuids(`tag=${tag.uuid}`), [ids[2]]);
    assert.deepEqual(await uuids('name=Storage LAN'), [ids[0]]);
    assert.deepEqual(await uuids('name__contains=lan'), [ids[0]]);
    const page = await u.get('vlans/?limit=3&offset=1');
    assert.deepEqual(page.json.meta, { limit: 3, offset: 1, total_count: 4 });
    assert.deepEqual(
      page.json.objects.map((o: any) => o.uuid),
      ids.slice(1),
    );
    assert.equal((await u.get('vlans/')).json.meta.limit, 20);
  });
});

describe('VLANs and servers', () => {
  test('lockAttachable on VLANs: own VLAN, unknown 400, an unshared foreign one the same 400, LIST only 403, ATTACH through an ACL', async () => {
    const [mine] = await assign(alice);
    const [theirs] = await assign(bob);
    await tx((t) => usableVlan(t, alice.uuid, mine, 'nics'));
    const unknownUuid = randomUUID();
    const unknown = await failure(tx((t) => usableVlan(t, alice.uuid, unknownUuid, 'nics')));
    assert.deepEqual([unknown.status, unknown.type, unknown.point, unknown.message], [400, 'validation', 'nics', `VLAN ${unknownUuid} does not exist`]);
    const foreign = await failure(tx((t) => usableVlan(t, alice.uuid, theirs, 'nics')));
    assert.deepEqual([foreign.status, foreign.type, foreign.point, foreign.message], [400, 'validation', 'nics', `VLAN ${theirs} does not exist`]);
    assert.equal((await failure(tx((t) => usableVlan(t, bob.uuid, mine)))).point, 'vlan');

    await share(mine, bob, ['LIST', 'EDIT']);
    assert.equal((await failure(tx((t) => usableVlan(t, bob.uuid, mine)))).status, 403);
    await share(mine, bob, ['ATTACH']);
    await tx((t) => usableVlan(t, bob.uuid, mine));
    // The grantee sees the VLAN with the permissions it holds, the owner sees who holds what.
    assert.deepEqual((await bob.get(`vlans/${mine}/`)).json.permissions, ['ATTACH', 'EDIT', 'LIST']);
    const owner = (await alice.get(`vlans/${mine}/`)).json;
    assert.deepEqual(
      owner.grantees.map((g: any) => [g.user.uuid, g.permissions]),
      [[bob.uuid, ['ATTACH', 'EDIT', 'LIST']]],
    );
  });

  test('setServerVlans: servers show on the VLAN, a server in many VLANs, release refused while in use', async () => {
    const [v1, v2] = await assign(alice, 2);
    const [s1, s2] = [await server(alice), await server(bob)];
    await tx((t) => setServerVlans(t, s1, [v1, v2, v1]));
    await tx((t) => setServerVlans(t, s2, [v1]));
    const servers = (await alice.get(`vlans/${v1}/`)).json.servers;
    assert.deepEqual(
      servers,
      [s1, s2].sort().map((uuid) => ({ resource_uri: `/api/2.0/servers/${uuid}/`, uuid })),
    );
    assert.deepEqual((await alice.get(`vlans/detail/?uuid=${v2}`)).json.objects[0].servers, [{ resource_uri: `/api/2.0/servers/${s1}/`, uuid: s1 }]);
    const rows = await tx((t) => t.selectFrom('vlan_servers').select(['vlan_uuid', 'server_uuid']).where('server_uuid', 'in', [s1, s2]).execute());
    const map = new Map<string, string[]>();
    for (const r of rows) map.set(r.server_uuid, [...(map.get(r.server_uuid) ?? []), r.vlan_uuid]);
    assert.deepEqual([map.get(s1)!.sort(), map.get(s2)], [[v1, v2].sort(), [v1]]);

    assert.equal((await failure(tx((t) => releaseVlan(t, srv.services, v2)))).status, 403);
    await tx((t) => setServerVlans(t, s1, []));
    assert.deepEqual((await alice.get(`vlans/${v2}/`)).json.servers, []);
    await tx((t) => releaseVlan(t, srv.services, v2));
    assert.equal((await alice.get(`vlans/${v2}/`)).status, 404);
    assert.equal((await failure(tx((t) => releaseVlan(t, srv.services, v2)))).status, 404);
  });
});
