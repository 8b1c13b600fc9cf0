import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import type { Ctx } from '../../src/core/context.js';
import { sortedJson } from '../../src/core/json.js';
import { FrozenClock } from '../helpers/clock.js';
import { listQuery, openServices, type ServiceFixture, value } from '../helpers/services.js';

/**
 * Objects served from kept JSON text (core/stored.ts `fragments`): kept per (row version, relations as the
 * caller reads them, the caller's side), so every change of what an object shows, through the services or
 * around them, shows in the next page and the next GET; and each answer is the answer made afresh.
 */
let fx: ServiceFixture;
before(async () => {
  // A clock that stands still: a running server's runtime is read twice per check (kept, afresh) and must not move between.
  fx = await openServices(undefined, undefined, { clock: new FrozenClock() });
});
after(() => fx.close());

type Obj = Record<string, unknown>;

/** The page and one object as the JSON routes get them (kept texts) and as made afresh: they must be the same text. */
async function served(ctx: Ctx, kind: string, uuid: string | null, fields?: string[]): Promise<Obj[]> {
  const svc = fx.collection(kind).service;
  const [kept, afresh] = [
    await svc.list(ctx, { ...listQuery({ limit: 20 }), fields, json: true }),
    await svc.list(ctx, { ...listQuery({ limit: 20 }), fields }),
  ];
  assert.equal(kept.cut, true, 'served from kept texts');
  const cut = (o: Obj) => (fields ? Object.fromEntries(fields.filter((k) => k in o).map((k) => [k, o[k]])) : o);
  assert.equal(sortedJson(kept.objects), sortedJson(afresh.objects.map(cut)), 'a kept page is the page made afresh');
  if (!fields && uuid)
    assert.equal(sortedJson(await svc.get(ctx, uuid, { json: true })), sortedJson(await svc.get(ctx, uuid)), 'a kept object is the object made afresh');
  return JSON.parse(sortedJson(kept.objects)) as Obj[];
}

const one = (objects: Obj[], uuid: string) => objects.find((o) => o.uuid === uuid)!;

test('a page of kept objects shows each change of tags, grants, drives and the body at once', async () => {
  const servers = fx.collection('servers').service;
  const drives = fx.collection('drives').service;
  const tags = fx.collection('tags').service;
  const acls = fx.collection('acls').service;
  const alice = await fx.user();
  const bob = await fx.user();
  const [s1, s2] = value(
    await servers.create!(
      alice,
      [1, 2].map((i) => ({ name: `s${i}`, cpu: 1000, mem: 1024 ** 3, vnc_password: 'secret-vnc' })),
    ),
  ).map((o) => String(o.uuid));
  const drive = String(value(await drives.create!(alice, [{ name: 'd', media: 'disk', size: 1024 ** 3 }]))[0].uuid);
  await served(alice, 'servers', s1);

  // Served again: the page's statement (it checks the kept shared rows itself), no object read again.
  const n0 = fx.services.store.statements;
  await servers.list(alice, { ...listQuery({ limit: 20 }), json: true });
  if (process.env.STRATUS_ANSWER_CACHE_VERIFY !== '1') assert.equal(fx.services.store.statements - n0, 1, 'the page only: its objects were kept');

  await servers.update!(alice, s1, { name: 'renamed' });
  assert.equal(one(await served(alice, 'servers', s1), s1).name, 'renamed', 'the body');

  const tag = String(value(await tags.create!(alice, [{ name: 't', resources: [s1] }]))[0].uuid);
  assert.deepEqual(
    (one(await served(alice, 'servers', s1), s1).tags as Obj[]).map((t) => t.uuid),
    [tag],
    'a tag given (the server’s row unchanged)',
  );
  assert.deepEqual(one(await served(alice, 'servers', s2), s2).tags, []);

  const acl = String(
    value(await acls.create!(alice, [{ name: 'share', grantees: [{ uuid: bob.caller.uuid }], rules: [{ permission: 'LIST' }], tags: [tag] }]))[0].uuid,
  );
  assert.equal((one(await served(alice, 'servers', s1), s1).grantees as Obj[]).length, 1, 'a grant, to the owner');
  assert.deepEqual(one(await served(bob, 'servers', s1), s1).permissions, ['LIST'], 'a grant, to the grantee');
  await acls.update!(alice, acl, { rules: [{ permission: 'LIST' }, { permission: 'EDIT' }] });
  assert.deepEqual(one(await served(bob, 'servers', s1), s1).permissions, ['EDIT', 'LIST'], 'a rule added');
  await sql`update users set email = ${'bob-renamed@example.com'} where uuid = ${bob.caller.uuid}`.execute(fx.services.store.db);
  const grantee = (one(await served(alice, 'servers', s1), s1).grantees as { user: Obj }[])[0].user;
  assert.equal(grantee.email, 'bob-renamed@example.com', 'a grantee’s email, changed around the services');

  await servers.update!(alice, s1, { drives: [{ boot_order: 1, dev_channel: '0:0', device: 'virtio', drive }] });
  assert.deepEqual(
    (one(await served(alice, 'servers', s1), s1).drives as { drive: Obj }[]).map((d) => d.drive.uuid),
    [drive],
    'a drive attached',
  );

  // Tag membership changed around the services (an operator, another process): the relations are part of the version.
  await sql`delete from tag_members where res_uuid = ${s1}`.execute(fx.services.store.db);
  assert.deepEqual(one(await served(alice, 'servers', s1), s1).tags, [], 'a membership row deleted directly');
  assert.equal(one(await served(bob, 'servers', null), s1), undefined, 'no longer shared');

  // Short forms and `fields=` are kept apart from the whole object.
  await served(alice, 'servers', s1, ['name', 'owner', 'resource_uri', 'runtime', 'status', 'uuid']);
  assert.deepEqual(Object.keys(one(await served(alice, 'servers', s1, ['name', 'uuid']), s1)), ['name', 'uuid']);

  // A tag's members are its relations too.
  await tags.update!(alice, tag, { name: 't', resources: [s1, s2] });
  assert.equal((one(await served(alice, 'tags', tag), tag).resources as Obj[]).length, 2, 'a member added');
  await servers.remove!(alice, s2);
  assert.equal((one(await served(alice, 'tags', tag), tag).resources as Obj[]).length, 1, 'a member deleted');
});

test('a server whose runtime or jobs vary is never kept', async () => {
  const servers = fx.collection('servers').service;
  const alice = await fx.user();
  const [s] = value(await servers.create!(alice, [{ name: 'on', cpu: 1000, mem: 1024 ** 3, vnc_password: 'secret-vnc' }])).map((o) => String(o.uuid));
  await served(alice, 'servers', s);
  const kept = fx.services.store.fragments.size.entries;
  await sql`update resources set body = json_set(body, '$.status', 'running'), version = version + 1 where uuid = ${s}`
    .execute(fx.services.store.db)
    .catch(() =>
      sql`update resources set body = jsonb_set(body::jsonb, '{status}', '"running"')::text, version = version + 1 where uuid = ${s}`.execute(
        fx.services.store.db,
      ),
    );
  assert.equal(one(await served(alice, 'servers', s), s).status, 'running');
  assert.equal(fx.services.store.fragments.size.entries, kept, 'nothing more kept: a running server’s runtime changes with time');
});

/**
 * Each change is made right after the page was served and kept (so a kept text of the old state is there
 * to be wrongly reused), many of them around the services (an operator, another process, an import):
 * the next page must show it. On SQLite a page reads only the stamp of its rows' relations (answer_scopes
 * counters, migrations 0090 and 0140), so each of these must move it.
 */
test('a kept text never outlives a change of what it shows: tags, grants, e-mails, members', async () => {
  const servers = fx.collection('servers').service;
  const drives = fx.collection('drives').service;
  const tags = fx.collection('tags').service;
  const acls = fx.collection('acls').service;
  const db = fx.services.store.db;
  const alice = await fx.user();
  const bob = await fx.user();
  const [s1, s2] = value(
    await servers.create!(
      alice,
      [1, 2].map((i) => ({ name: `k${i}`, cpu: 1000, mem: 1024 ** 3, vnc_password: 'secret-vnc' })),
    ),
  ).map((o) => String(o.uuid));
  const drive = String(value(await drives.create!(alice, [{ name: 'disk-a', media: 'disk', size: 1024 ** 3 }]))[0].uuid);
  await servers.update!(alice, s1, { drives: [{ boot_order: 1, dev_channel: '0:0', device: 'virtio', drive }] });
  const tag = String(value(await tags.create!(alice, [{ name: 't', resources: [s1] }]))[0].uuid);
  const other = String(value(await tags.create!(alice, [{ name: 'u' }]))[0].uuid);
  const acl = String(
    value(await acls.create!(alice, [{ name: 'share', grantees: [{ uuid: bob.caller.uuid }], rules: [{ permission: 'LIST' }], tags: [tag] }]))[0].uuid,
  );
  const tagsOf = async (ctx: Ctx, uuid: string) => ((one(await served(ctx, 'servers', uuid), uuid).tags as Obj[]) ?? []).map((t) => t.uuid).sort();
  const membersOf = async () => ((one(await served(alice, 'tags', tag), tag).resources as Obj[]) ?? []).map((m) => m.uuid).sort();
  const grantees = async () => (one(await served(alice, 'servers', s1), s1).grantees as { user: Obj }[]).map((g) => g.user.email);
  const held = async () => one(await served(bob, 'servers', null), s1)?.permissions;

  // A drive renamed: a server shows its drives as references, and the page made afresh agrees.
  await served(alice, 'servers', s1);
  await drives.update!(alice, drive, { name: 'disk-b', media: 'disk', size: 1024 ** 3 });
  assert.deepEqual(
    (one(await served(alice, 'servers', s1), s1).drives as { drive: Obj }[]).map((d) => d.drive.uuid),
    [drive],
  );

  // A membership added and removed around the services.
  assert.deepEqual(await tagsOf(alice, s2), []);
  await sql`insert into tag_members (tag_uuid, res_type, res_uuid) values (${other}, 'servers', ${s2})`.execute(db);
  assert.deepEqual(await tagsOf(alice, s2), [other], 'a membership inserted directly');
  await sql`delete from tag_members where tag_uuid = ${other}`.execute(db);
  assert.deepEqual(await tagsOf(alice, s2), [], 'a membership deleted directly');

  // A tag renamed leaves its servers' references alone; a tag deleted leaves them.
  await tagsOf(alice, s1);
  await tags.update!(alice, tag, { name: 't-renamed' });
  assert.deepEqual(await tagsOf(alice, s1), [tag], 'a tag renamed');
  await sql`insert into tag_members (tag_uuid, res_type, res_uuid) values (${other}, 'servers', ${s1})`.execute(db);
  assert.deepEqual(await tagsOf(alice, s1), [tag, other].sort());
  await sql`delete from resources where uuid = ${other}`.execute(db);
  assert.deepEqual(await tagsOf(alice, s1), [tag], 'a tag row deleted directly (its memberships left behind)');

  // Grants: a rule changed directly, a grantee's e-mail changed, the ACL's tags changed.
  assert.deepEqual(await held(), ['LIST']);
  assert.equal((await grantees()).length, 1);
  await sql`insert into acl_rules (acl_uuid, permission) values (${acl}, 'EDIT')`.execute(db);
  assert.deepEqual(await held(), ['EDIT', 'LIST'], 'a rule inserted directly, to the grantee');
  assert.equal((await grantees()).length, 1);
  await sql`update users set email = ${`bob-${process.pid}-renamed@example.com`} where uuid = ${bob.caller.uuid}`.execute(db);
  assert.deepEqual(await grantees(), [`bob-${process.pid}-renamed@example.com`], 'a grantee’s e-mail changed directly, to the owner');
  await acls.update!(alice, acl, { tags: [] });
  assert.deepEqual(one(await served(alice, 'servers', s1), s1).grantees, [], 'the ACL’s tags changed');
  assert.equal(await held(), undefined, 'no longer shared');

  // A tag's members: a member row deleted or inserted around the services (its membership stays or comes first).
  await tags.update!(alice, tag, { resources: [s1, s2] });
  assert.deepEqual(await membersOf(), [s1, s2].sort());
  const row = (await sql<Obj>`select * from resources where uuid = ${s2}`.execute(db)).rows[0];
  await sql`delete from resources where uuid = ${s2}`.execute(db);
  assert.deepEqual(await membersOf(), [s1], 'a member row deleted directly');
  await db
    .insertInto('resources')
    .values(row as never)
    .execute();
  assert.deepEqual(await membersOf(), [s1, s2].sort(), 'a member row inserted directly');
});
