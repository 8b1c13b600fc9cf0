import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import type { Ctx } from '../../src/core/context.js';
import { listQuery, openServices, type ServiceFixture, value } from '../helpers/services.js';
import { Store } from '../../src/store/db.js';
import { onlyOn } from '../helpers/skips.js';

/**
 * What an ACL shares shows in the grantee's lists at once after any write that changes it: the shared
 * rows are kept between lists (store/resources/shared-seqs.ts) under a counter the database's triggers
 * raise, checked by the page's own statement, so a kept set must never outlive an ACL, membership or
 * deletion write, whoever makes it; on PostgreSQL also writes from another connection (as another API
 * process or host would make them).
 */
let fx: ServiceFixture;
before(async () => {
  fx = await openServices();
});
after(() => fx.close());

type Obj = Record<string, unknown>;
const uuids = (objs: Obj[]) => objs.map((o) => String(o.uuid));

test('a grantee’s list follows every write that changes what is shared, and reads the shared rows once', async () => {
  const servers = fx.collection('servers').service;
  const tags = fx.collection('tags').service;
  const acls = fx.collection('acls').service;
  const alice = await fx.user();
  const bob = await fx.user();
  const make = async (ctx: Ctx, name: string) =>
    String(value(await servers.create!(ctx, [{ name, cpu: 1000, mem: 1024 ** 3, vnc_password: 'secret-vnc' }]))[0].uuid);
  const [a1, a2, a3] = [await make(alice, 'a1'), await make(alice, 'a2'), await make(alice, 'a3')];
  const b1 = await make(bob, 'b1');
  const tag = String(value(await tags.create!(alice, [{ name: 'shared', resources: [a1, a2] }]))[0].uuid);
  const acl = String(
    value(await acls.create!(alice, [{ name: 'share', grantees: [{ uuid: bob.caller.uuid }], rules: [{ permission: 'LIST' }], tags: [tag] }]))[0].uuid,
  );

  const seen = async () => {
    const page = await servers.list(bob, listQuery({ limit: 20 }));
    return { total: page.total, uuids: uuids(page.objects).sort() };
  };
  assert.deepEqual(await seen(), { total: 3, uuids: [a1, a2, b1].sort() });
  // The same list again: the shared rows are not read again, the page checks them (one statement).
  const before = fx.services.store.statements;
  await seen();
  const once = fx.services.store.statements - before;
  const again = fx.services.store.statements;
  assert.deepEqual(await seen(), { total: 3, uuids: [a1, a2, b1].sort() });
  assert.equal(fx.services.store.statements - again, once);
  // (Verify mode reads them anyway, to compare.)
  if (process.env.STRATUS_ANSWER_CACHE_VERIFY !== '1') assert.equal(once, 1, 'the page checks the kept rows itself: one statement');

  await tags.update!(alice, tag, { name: 'shared', resources: [a1, a2, a3] });
  assert.deepEqual(await seen(), { total: 4, uuids: [a1, a2, a3, b1].sort() }, 'a member added');
  await servers.remove!(alice, a2);
  assert.deepEqual(await seen(), { total: 3, uuids: [a1, a3, b1].sort() }, 'a shared server deleted');
  await acls.update!(alice, acl, { rules: [{ permission: 'EDIT' }] });
  assert.deepEqual(await seen(), { total: 1, uuids: [b1] }, 'LIST no longer granted');
  await acls.update!(alice, acl, { rules: [{ permission: 'LIST' }] });
  assert.deepEqual(await seen(), { total: 3, uuids: [a1, a3, b1].sort() }, 'LIST granted again');
  await acls.update!(alice, acl, { grantees: [] });
  assert.deepEqual(await seen(), { total: 1, uuids: [b1] }, 'bob no longer a grantee');
  await acls.update!(alice, acl, { grantees: [{ uuid: bob.caller.uuid }] });
  assert.equal((await seen()).total, 3);
  // A write from outside the services (an operator's SQL, another process on the same file).
  await sql`delete from tag_members where res_uuid = ${a1}`.execute(fx.services.store.db);
  assert.deepEqual(await seen(), { total: 2, uuids: [a3, b1].sort() }, 'a membership row deleted directly');
  await acls.remove!(alice, acl);
  assert.deepEqual(await seen(), { total: 1, uuids: [b1] }, 'the ACL deleted');
});

// SQLite's `:memory:` is one connection; another process on a file is the first test's direct SQL.
test(
  'a grantee’s kept shared rows follow writes made through another connection (another process), at the very next request',
  { skip: onlyOn('postgres') },
  async (t) => {
    const other = await Store.open(fx.services.config.db, { poolSize: 2 });
    t.after(() => other.close());
    const servers = fx.collection('servers').service;
    const tags = fx.collection('tags').service;
    const acls = fx.collection('acls').service;
    const alice = await fx.user();
    const bob = await fx.user();
    // Alice writes through the other store: the services' own connections never see those writes happen.
    const aliceThere = { ...alice, store: other };
    const make = async (name: string) =>
      String(value(await servers.create!(aliceThere, [{ name, cpu: 1000, mem: 1024 ** 3, vnc_password: 'secret-vnc' }]))[0].uuid);
    const [a1, a2] = [await make('a1'), await make('a2')];
    const tag = String(value(await tags.create!(aliceThere, [{ name: 'shared', resources: [a1, a2] }]))[0].uuid);
    const acl = String(value(await acls.create!(aliceThere, [{ name: 'share', grantees: [], rules: [{ permission: 'LIST' }], tags: [tag] }]))[0].uuid);
    const seen = async () => {
      const page = await servers.list(bob, listQuery({ limit: 20 }));
      return { total: page.total, uuids: uuids(page.objects).sort() };
    };
    // Kept (and read again, so the next read is a hit) before each write.
    const kept = async (expected: { total: number; uuids: string[] }, why: string) => {
      assert.deepEqual(await seen(), expected, why);
      assert.deepEqual(await seen(), expected, `${why} (kept)`);
    };
    await kept({ total: 0, uuids: [] }, 'nothing granted');
    await acls.update!(aliceThere, acl, { grantees: [{ uuid: bob.caller.uuid }] });
    await kept({ total: 2, uuids: [a1, a2].sort() }, 'a grant added');
    await tags.update!(aliceThere, tag, { name: 'shared', resources: [a2] });
    await kept({ total: 1, uuids: [a2] }, 'a tag membership removed');
    await sql`insert into tag_members (tag_uuid, res_type, res_uuid) values (${tag}, 'servers', ${a1})`.execute(other.db);
    await kept({ total: 2, uuids: [a1, a2].sort() }, 'a membership row inserted by SQL');
    await sql`update resources set owner_uuid = ${bob.caller.uuid} where uuid = ${a1}`.execute(other.db);
    await kept({ total: 2, uuids: [a1, a2].sort() }, 'a shared row moved to the grantee (now their own)');
    await acls.remove!(aliceThere, acl);
    await kept({ total: 1, uuids: [a1] }, 'the ACL deleted');
    // A write rolled back raises nothing it keeps: the set stays right either way.
    await other.db
      .transaction()
      .execute(async (tx) => {
        await sql`insert into acl_grantees (acl_uuid, grantee_uuid, position) values (${acl}, ${bob.caller.uuid}, 0)`.execute(tx);
        throw new Error('rolled back');
      })
      .catch(() => {});
    await kept({ total: 1, uuids: [a1] }, 'after a rolled-back write');
  },
);
