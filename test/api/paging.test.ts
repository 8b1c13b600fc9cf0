import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { newDrive, newServer } from '../helpers/seed.js';

/**
 * Lists merge the caller's own rows with rows shared to them, page the merge, and take `total_count` from
 * kept per-owner counts: every page of every size must agree with the whole list, and the kept counts with
 * the rows, through creates, deletes (bulk, recursive), clones and shares coming and going.
 */

type User = Client & { uuid: string; email: string };
let srv: TestServer;
let alice: User, bob: User;

before(async () => {
  // Anchors every 3 positions: the deep-page path (anchors + merge) runs on lists this small.
  srv = await startServer({}, undefined, { anchorStep: 3 });
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

const one = async (c: Client, path: string, body: unknown) => {
  const res = await c.post(path, body);
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0];
};

/** The whole list (limit=0), then every page of `size`, which must add up to it with the same total. */
async function pagesAgree(c: Client, path: string, size: number): Promise<string[]> {
  const all = await c.get(`${path}?limit=0`);
  assert.equal(all.status, 200, all.text);
  const uuids: string[] = all.json.objects.map((o: { uuid: string }) => o.uuid);
  assert.equal(all.json.meta.total_count, uuids.length);
  const paged: string[] = [];
  for (let offset = 0; offset <= uuids.length + size; offset += size) {
    const res = await c.get(`${path}?limit=${size}&offset=${offset}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json.meta, { limit: size, offset, total_count: uuids.length }, `${path} at offset ${offset}`);
    paged.push(...res.json.objects.map((o: { uuid: string }) => o.uuid));
  }
  assert.deepEqual(paged, uuids, `${path}: pages of ${size} give the whole list in order`);
  return uuids;
}

/** The kept counts match a count of the rows, for every (kind, owner). */
async function countsMatchRows(): Promise<void> {
  const db = srv.services.store.db;
  const kept = await db.selectFrom('resource_counts').select(['kind', 'owner_uuid', 'n']).where('n', '!=', 0).execute();
  const counted = await db
    .selectFrom('resources')
    .select(['kind', sql<string>`coalesce(owner_uuid, '')`.as('owner_uuid'), (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy(['kind', sql`coalesce(owner_uuid, '')`])
    .execute();
  const norm = (rows: { kind: string; owner_uuid: string; n: number | string | bigint }[]) =>
    rows.map((r) => `${r.kind}/${r.owner_uuid}=${Number(r.n)}`).sort();
  assert.deepEqual(norm(kept), norm(counted));
}

describe('list pages and total_count', () => {
  test('own and shared servers interleave in creation order; every page size agrees with the whole list', async () => {
    const tag = await one(bob, 'tags/', { name: 'shared' });
    await one(bob, 'acls/', { name: 'to alice', grantees: [{ uuid: alice.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: tag.uuid }] });
    const made: string[] = [];
    for (let i = 0; i < 5; i++) {
      made.push(await newServer(alice, { name: `a${i}` }));
      made.push(await newServer(bob, { name: `b${i}`, tags: [tag.uuid] }));
    }
    await newServer(bob, { name: 'not shared' });
    for (const size of [1, 2, 3, 4, 7, 20]) assert.deepEqual(await pagesAgree(alice, 'servers/', size), made);
    await pagesAgree(alice, 'servers/detail/', 3);
    // Bob sees only his own, the unshared one included.
    assert.equal((await pagesAgree(bob, 'servers/', 4)).length, 6);
    await countsMatchRows();
  });

  test('a deep page when more shared rows than the offset come before every own row', async () => {
    const [carol, dave] = [await srv.user(), await srv.user()];
    const tag = await one(dave, 'tags/', { name: 'first' });
    await one(dave, 'acls/', { name: 'to carol', grantees: [{ uuid: carol.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: tag.uuid }] });
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push(await newServer(dave, { name: `d${i}`, tags: [tag.uuid] }));
    for (let i = 0; i < 3; i++) made.push(await newServer(carol, { name: `c${i}` }));
    for (const size of [1, 2, 3, 5]) assert.deepEqual(await pagesAgree(carol, 'servers/', size), made);
  });

  test('filters page and count the filtered set', async () => {
    const res = await alice.get('servers/?limit=2&name__contains=b');
    assert.equal(res.status, 200);
    assert.equal(res.json.meta.total_count, 5);
    assert.deepEqual(
      res.json.objects.map((o: { name: string }) => o.name),
      ['b0', 'b1'],
    );
    const deep = await alice.get('servers/?limit=2&offset=4&name__contains=b');
    assert.deepEqual([deep.json.meta.total_count, deep.json.objects.length], [5, 1]);
  });

  test('deletes, bulk deletes, recursive deletes and clones keep the counts', async () => {
    const drives = [await newDrive(alice), await newDrive(alice), await newDrive(alice)];
    await srv.advance(600_000); // created drives become unmounted
    const server = await newServer(alice, { name: 'with drive', drives: [{ boot_order: 1, dev_channel: '0:0', device: 'virtio', drive: drives[0] }] });
    const clone = await alice.post(`drives/${drives[1]}/action/?do=clone`, {});
    assert.ok([200, 202].includes(clone.status), clone.text);
    await srv.advance(600_000);
    assert.equal((await alice.request('DELETE', 'drives/', { body: { objects: [{ uuid: drives[2] }] } })).status, 204);
    assert.equal((await alice.delete(`servers/${server}/?recurse=all_drives`)).status, 204);
    await srv.advance(600_000);
    await pagesAgree(alice, 'drives/', 2);
    await pagesAgree(alice, 'servers/', 4);
    await countsMatchRows();
  });

  test('a share withdrawn leaves the list and its total at once', async () => {
    const before = await pagesAgree(alice, 'servers/', 3);
    const acls = await bob.get('acls/');
    for (const acl of acls.json.objects) assert.equal((await bob.delete(`acls/${acl.uuid}/`)).status, 204);
    const afterDrop = await pagesAgree(alice, 'servers/', 3);
    assert.equal(afterDrop.length, before.length - 5);
    await countsMatchRows();
  });
});
