import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { golden, sameShape } from '../helpers/golden.js';
import { withWidgets } from '../helpers/widgets.js';
import { newDrive, newServer } from '../helpers/seed.js';

type User = Client & { uuid: string; email: string };
let srv: TestServer;
let alice: User, bob: User, carol: User;

before(async () => {
  srv = await startServer({}, withWidgets);
  [alice, bob, carol] = [await srv.user(), await srv.user(), await srv.user()];
});
after(() => srv.close());

const one = async (c: Client, path: string, body: unknown) => {
  const res = await c.post(path, body);
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0];
};

/** Alice shares a fresh tagged widget with `grantee` holding `rules`. */
async function share(rules: string[], grantee: User) {
  const tag = await one(alice, 'tags/', { name: 'share' });
  const widget = await one(alice, 'widgets/', { name: 'shared-w', size: 5, tags: [tag.uuid] });
  const acl = await one(alice, 'acls/', {
    name: 'a',
    grantees: [{ uuid: grantee.uuid }],
    rules: rules.map((permission) => ({ permission })),
    tags: [{ uuid: tag.uuid }],
  });
  return { tag, widget, acl };
}

describe('ACL objects', () => {
  test('create an empty ACL (golden)', async () => {
    const res = await alice.post('acls/', golden('request_acls_create'));
    assert.equal(res.status, 201);
    sameShape(res.json, golden('response_acls_create'));
    const acl = res.json.objects[0];
    assert.deepEqual([acl.grantees, acl.rules, acl.tags, acl.meta, acl.name], [[], [], [], {}, 'test_acl']);
  });

  test('create with grantees, rules and tags (golden shape, nested grantee resource_uri)', async () => {
    const [t1, t2] = (await alice.post('tags/', [{ name: 't1' }, { name: 't2' }])).json.objects;
    const acl = await one(alice, 'acls/', {
      name: 'test_with_grantees',
      grantees: [{ email: bob.email.toUpperCase(), uuid: bob.uuid }],
      rules: [{ permission: 'LIST' }, { permission: 'EDIT' }],
      tags: [{ uuid: t1.uuid }, { uuid: t2.uuid }],
    });
    sameShape({ objects: [acl] }, golden('response_acls_create_with_grantees'));
    assert.deepEqual(acl.grantees, [{ email: bob.email, resource_uri: { resource_uri: `/api/2.0/user/${bob.uuid}/`, uuid: bob.uuid }, uuid: bob.uuid }]);
    assert.deepEqual(acl.rules, [{ permission: 'LIST' }, { permission: 'EDIT' }]);
    assert.deepEqual(
      acl.tags.map((t: any) => t.uuid),
      [t1.uuid, t2.uuid],
    );
    assert.equal(acl.tags[0].resource_uri, `/api/2.0/tags/${t1.uuid}/`);
  });

  test('an ACL PUT back as it was read (grantees with nested resource_uri) is accepted unchanged', async () => {
    const tag = await one(alice, 'tags/', { name: 'roundtrip' });
    const acl = await one(alice, 'acls/', { name: 'rt', grantees: [{ uuid: bob.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: tag.uuid }] });
    const read = (await alice.get(acl.resource_uri)).json;
    const res = await alice.put(acl.resource_uri, read);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json, read);
    // A grantee named only by its nested reference still resolves.
    const nested = await alice.put(acl.resource_uri, { grantees: [{ resource_uri: { resource_uri: `/api/2.0/user/${bob.uuid}/` } }] });
    assert.equal(nested.status, 200, nested.text);
    assert.deepEqual(
      nested.json.grantees.map((g: any) => g.uuid),
      [bob.uuid],
    );
  });

  test('PUT replaces grantees, rules and tags; keeps what is absent (golden update)', async () => {
    const tag = await one(alice, 'tags/', { name: 'u' });
    const acl = await one(alice, 'acls/', { name: 'test_acl', rules: [{ permission: 'LIST' }] });
    const body = { ...golden('request_acls_update'), grantees: [{ email: bob.email, uuid: bob.uuid }], tags: [{ uuid: tag.uuid }] };
    const res = await alice.put(acl.resource_uri, body);
    assert.equal(res.status, 200);
    sameShape(res.json, golden('response_acls_update'));
    assert.deepEqual(res.json.rules, [{ permission: 'LIST' }, { permission: 'EDIT' }]);
    const renamed = await alice.put(acl.resource_uri, { name: 'renamed' });
    assert.deepEqual(renamed.json.rules, res.json.rules);
    assert.equal(renamed.json.grantees.length, 1);
  });

  test('bad rules, grantees and tags are 400 on that field; nothing is written', async () => {
    const bobsTag = await one(bob, 'tags/', { name: 'bobs' });
    const before = (await alice.get('acls/?limit=0')).json.meta.total_count;
    for (const [body, point] of [
      [{ rules: [{ permission: 'FLY' }] }, 'rules'],
      [{ rules: [{ nope: 'LIST' }] }, 'rules'],
      [{ rules: 'LIST' }, 'rules'],
      [{ grantees: [{ uuid: crypto.randomUUID() }] }, 'grantees'],
      [{ grantees: [{ email: 'nobody@example.com' }] }, 'grantees'],
      [{ grantees: [{ uuid: bob.uuid, email: carol.email }] }, 'grantees'],
      [{ grantees: [{}] }, 'grantees'],
      [{ tags: [{ uuid: crypto.randomUUID() }] }, 'tags'],
      [{ tags: [{ uuid: bobsTag.uuid }] }, 'tags'],
    ] as const) {
      const res = await alice.post('acls/', { name: 'bad', ...body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json[0].error_type, 'validation');
      assert.equal(res.json[0].error_point, point);
    }
    assert.equal((await alice.get('acls/?limit=0')).json.meta.total_count, before);
  });

  test('a grantee can read the ACLs naming them but not change them; strangers see nothing', async () => {
    const { acl, tag } = await share(['LIST'], bob);
    const list = await bob.get('acls/?limit=0');
    const seen = list.json.objects.find((a: any) => a.uuid === acl.uuid);
    assert.ok(seen, 'listed for the grantee');
    assert.equal(seen.owner.uuid, alice.uuid);
    assert.deepEqual(seen.tags, [], "the owner's tags stay private");
    assert.ok(!JSON.stringify(seen).includes(tag.uuid));
    assert.equal((await bob.get(acl.resource_uri)).status, 200);
    assert.equal((await bob.put(acl.resource_uri, { name: 'mine' })).status, 403);
    assert.equal((await bob.delete(acl.resource_uri)).status, 403);
    for (const res of [await carol.get(acl.resource_uri), await carol.put(acl.resource_uri, {}), await carol.delete(acl.resource_uri)])
      assert.equal(res.status, 404);
    assert.ok(!(await carol.get('acls/?limit=0')).json.objects.some((a: any) => a.uuid === acl.uuid));
  });

  test('schema (golden, except list methods we do not offer)', async () => {
    const { allowed_list_http_methods, ...rest } = (await alice.get('acls/schema/')).json;
    const { allowed_list_http_methods: _skip, ...expected } = golden('response_acls_schema');
    // No `filtering` key, as recorded.
    assert.deepEqual(rest, expected);
    assert.deepEqual(allowed_list_http_methods, ['get', 'post']);
  });
});

describe('sharing through ACLs', () => {
  test('LIST shows the resource to the grantee with its owner and their permissions (golden fields)', async () => {
    const { widget } = await share(['LIST', 'EDIT'], bob);
    const list = await bob.get('widgets/detail/?limit=0');
    const seen = list.json.objects.find((w: any) => w.uuid === widget.uuid);
    assert.ok(seen);
    assert.equal(seen.owner.uuid, alice.uuid);
    assert.deepEqual(seen.permissions, ['EDIT', 'LIST']);
    assert.deepEqual(seen.grantees, []);
    assert.deepEqual(seen.tags, []);
    const asGrantee = golden('response_foreign_drive_permissions');
    assert.deepEqual(seen.permissions, asGrantee.permissions);
    const own = (await alice.get(widget.resource_uri)).json;
    assert.deepEqual(own.permissions, []);
    assert.deepEqual(own.grantees, [{ permissions: ['EDIT', 'LIST'], user: { email: bob.email, resource_uri: `/api/2.0/user/${bob.uuid}/`, uuid: bob.uuid } }]);
    sameShape(
      own.grantees,
      golden('response_own_drive_grantees').grantees.map((g: any) => ({ ...g, user: { ...g.user, email: 'x' } })),
    );
  });

  test('without LIST the resource is invisible (404), with LIST but without EDIT a PUT is 403', async () => {
    const hidden = await share(['EDIT', 'DELETE'], bob);
    assert.equal((await bob.get(hidden.widget.resource_uri)).status, 404);
    assert.equal((await bob.put(hidden.widget.resource_uri, { name: 'x' })).status, 404);
    const readonly = await share(['LIST'], bob);
    const put = await bob.put(readonly.widget.resource_uri, { name: 'x' });
    assert.equal(put.status, 403);
    assert.equal(put.json[0].error_type, 'permission');
    assert.equal((await bob.delete(readonly.widget.resource_uri)).status, 403);
  });

  test('EDIT lets the grantee edit; tags they send are ignored', async () => {
    const { widget, tag } = await share(['LIST', 'EDIT'], bob);
    const bobsTag = await one(bob, 'tags/', { name: 'bob-tag' });
    const res = await bob.put(widget.resource_uri, { name: 'edited by bob', tags: [bobsTag.uuid] });
    assert.equal(res.status, 200);
    assert.equal(res.json.name, 'edited by bob');
    const own = (await alice.get(widget.resource_uri)).json;
    assert.equal(own.name, 'edited by bob');
    assert.deepEqual(
      own.tags.map((t: any) => t.uuid),
      [tag.uuid],
      "the owner's tags are untouched",
    );
    assert.deepEqual((await bob.get(bobsTag.resource_uri)).json.resources, []);
  });

  test('permissions are the union over ACLs and tags, only the applicable ones', async () => {
    const t1 = await one(alice, 'tags/', { name: 'u1' });
    const t2 = await one(alice, 'tags/', { name: 'u2' });
    const w = await one(alice, 'widgets/', { name: 'union', size: 1, tags: [t1.uuid, t2.uuid] });
    await one(alice, 'acls/', { grantees: [{ uuid: bob.uuid }], rules: [{ permission: 'LIST' }, { permission: 'START' }], tags: [{ uuid: t1.uuid }] });
    await one(alice, 'acls/', { grantees: [{ uuid: bob.uuid }], rules: [{ permission: 'ATTACH' }, { permission: 'STOP' }], tags: [{ uuid: t2.uuid }] });
    assert.deepEqual((await bob.get(w.resource_uri)).json.permissions, ['ATTACH', 'LIST']);
  });

  test('permissions are not transferable: a grantee cannot pass them on', async () => {
    const { widget } = await share(['LIST', 'EDIT', 'ATTACH', 'DELETE'], bob);
    const bobsTag = await one(bob, 'tags/', { name: 'relay' });
    const put = await bob.put(bobsTag.resource_uri, { resources: [widget.uuid] });
    assert.equal(put.status, 400, "a grantee's tag cannot hold the owner's resource");
    await one(bob, 'acls/', { grantees: [{ uuid: carol.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: bobsTag.uuid }] });
    assert.equal((await carol.get(widget.resource_uri)).status, 404);
  });

  test('revoking: removing the grantee, the tag from the resource, or deleting the tag or ACL ends sharing', async () => {
    const cases: [string, (s: Awaited<ReturnType<typeof share>>) => Promise<unknown>][] = [
      ['grantee removed', (s) => alice.put(s.acl.resource_uri, { grantees: [] })],
      ['rule removed', (s) => alice.put(s.acl.resource_uri, { rules: [] })],
      ['untagged', (s) => alice.put(s.widget.resource_uri, { tags: [] })],
      ['tag deleted', (s) => alice.delete(s.tag.resource_uri)],
      ['acl deleted', (s) => alice.delete(s.acl.resource_uri)],
    ];
    for (const [label, revoke] of cases) {
      const s = await share(['LIST'], bob);
      assert.equal((await bob.get(s.widget.resource_uri)).status, 200, label);
      await revoke(s);
      assert.equal((await bob.get(s.widget.resource_uri)).status, 404, label);
    }
  });

  test('lists count shared rows correctly and page in the database', async () => {
    const dave = await srv.user();
    const tag = await one(alice, 'tags/', { name: 'bulk' });
    await alice.post(
      'widgets/',
      Array.from({ length: 7 }, (_, i) => ({ name: `bulk-${i}`, size: 1, tags: [tag.uuid] })),
    );
    await one(alice, 'acls/', { grantees: [{ uuid: dave.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: tag.uuid }] });
    await dave.post(
      'widgets/',
      Array.from({ length: 3 }, (_, i) => ({ name: `own-${i}`, size: 1 })),
    );
    const page = await dave.get('widgets/?limit=4&offset=4');
    assert.deepEqual(page.json.meta, { limit: 4, offset: 4, total_count: 10 });
    assert.equal(page.json.objects.length, 4);
    assert.equal((await dave.get('widgets/?name__contains=bulk&limit=2')).json.meta.total_count, 7);
    assert.equal((await dave.get(`widgets/?tag=${tag.uuid}`)).json.meta.total_count, 0, "the owner's tag does not filter for a grantee");
  });
});

describe('attach and clone rules (functions for the server and drive services)', () => {
  /** A server, disk or cdrom of `owner`'s, made through the API. */
  async function row(kind: 'servers' | 'drives', owner: User, fields: Record<string, unknown> = {}) {
    const uuid = kind === 'servers' ? await newServer(owner, fields) : await newDrive(owner, fields);
    return { uuid, owner_uuid: owner.uuid };
  }
  async function grant(owner: User, grantee: User, uuids: string[], rules: string[]) {
    const tag = await one(owner, 'tags/', { name: 'g', resources: uuids });
    await one(owner, 'acls/', { grantees: [{ uuid: grantee.uuid }], rules: rules.map((permission) => ({ permission })), tags: [{ uuid: tag.uuid }] });
  }

  test('rule 8: the server owner must own the resource or hold ATTACH on it; one it may not see is missing', async () => {
    const { lockAttachable } = await import('../../src/core/permissions.js');
    const assertCanAttach = (owner: string, kind: string, uuid: string, point: string) =>
      srv.services.store.transaction((t) => lockAttachable(t, srv.services, { caller: owner, serverOwner: owner, kind, uuid, point }));
    const own = await one(alice, 'widgets/', { name: 'mine', size: 1 });
    await assertCanAttach(alice.uuid, 'widgets', own.uuid, 'drives');
    const bobs = await one(bob, 'widgets/', { name: 'bobs', size: 1 });
    // Not shared at all: the same 400 as a uuid nobody has (no existence oracle).
    await assert.rejects(
      assertCanAttach(alice.uuid, 'widgets', bobs.uuid, 'drives'),
      (e: any) => e.status === 400 && e.point === 'drives' && e.message === `widgets ${bobs.uuid} does not exist`,
    );
    const bobTag = await one(bob, 'tags/', { name: 'attachable', resources: [bobs.uuid] });
    await one(bob, 'acls/', { grantees: [{ uuid: alice.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: bobTag.uuid }] });
    await assert.rejects(assertCanAttach(alice.uuid, 'widgets', bobs.uuid, 'drives'), (e: any) => e.status === 403, 'LIST is not ATTACH');
    await one(bob, 'acls/', { grantees: [{ uuid: alice.uuid }], rules: [{ permission: 'ATTACH' }], tags: [{ uuid: bobTag.uuid }] });
    await assertCanAttach(alice.uuid, 'widgets', bobs.uuid, 'drives');
    await assert.rejects(assertCanAttach(alice.uuid, 'widgets', crypto.randomUUID(), 'drives'), (e: any) => e.status === 400 && e.point === 'drives');
  });

  test('rule 5: cloning needs CLONE on the server and its disks, ATTACH on its cdroms', async () => {
    const { assertCanCloneServer, declareApplicable } = await import('../../src/core/permissions.js');
    declareApplicable('servers', ['LIST', 'EDIT', 'CLONE', 'START', 'STOP', 'OPEN_VNC', 'DELETE']);
    declareApplicable('drives', ['LIST', 'EDIT', 'CLONE', 'ATTACH', 'DELETE']);
    const db = srv.services.store.db;
    const server = await row('servers', alice);
    const disk = await row('drives', alice);
    const cdrom = await row('drives', alice, { media: 'cdrom' });
    const drives = [
      { ...disk, media: 'disk' },
      { ...cdrom, media: 'cdrom' },
    ];
    await assertCanCloneServer(db, alice.uuid, server, drives);
    await assert.rejects(assertCanCloneServer(db, carol.uuid, server, drives), (e: any) => e.status === 403);
    await grant(alice, carol, [server.uuid], ['LIST', 'CLONE']);
    await assert.rejects(assertCanCloneServer(db, carol.uuid, server, drives), (e: any) => e.status === 403 && e.point === 'drives');
    await grant(alice, carol, [disk.uuid], ['CLONE']);
    await assert.rejects(assertCanCloneServer(db, carol.uuid, server, drives), (e: any) => e.status === 403, 'cdrom needs ATTACH');
    await grant(alice, carol, [cdrom.uuid], ['CLONE']);
    await assert.rejects(assertCanCloneServer(db, carol.uuid, server, drives), (e: any) => e.status === 403, 'CLONE on a cdrom is not ATTACH');
    await grant(alice, carol, [cdrom.uuid], ['ATTACH']);
    await assertCanCloneServer(db, carol.uuid, server, drives);
  });
});
