import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Store } from '../../src/store/db.js';
import { pageOfItems } from '../../src/store/paging.js';
import type { Resource, SharedRows, VisibleSet } from '../../src/store/repository.js';
import { freshDatabase } from '../helpers/db.js';

/**
 * The counting and paging of store.resources (store/resources/counts.ts, pages.ts, anchors.ts) on the
 * engine under test: kept counts follow inserts, deletes and rollbacks; `countForLimit` sees the
 * transaction's own pending changes; every page of a visible set (own rows, shared rows, filtered, both
 * orders, deep pages from anchors) holds the rows and the total the in-memory rule (paging.ts) gives.
 * Anchors every 3 positions, so deep pages start on lists of a dozen rows.
 */
const STEP = 3;
let store: Store;
let drop: () => Promise<void>;
before(async () => {
  const db = await freshDatabase();
  drop = db.drop;
  store = await Store.open(db.url, { poolSize: 4, anchorStep: STEP });
});
after(async () => {
  await store.close();
  await drop();
});

const t0 = Date.parse('2030-01-01T00:00:00Z');
const insert = (kind: string, owner: string | null, name: string, at: number) =>
  store.transaction((tx) => store.resources.insert(tx, new Date(t0 + at * 1000), { kind, uuid: randomUUID(), owner, body: { name } }));

test('kept counts follow inserts and deletes, a rolled-back transaction changes none, countForLimit sees its own pending changes', async () => {
  const kind = 'count-test';
  const [a, b] = [randomUUID(), randomUUID()];
  for (let i = 0; i < 5; i++) await insert(kind, a, `a${i}`, i);
  await insert(kind, b, 'b0', 10);
  await insert(kind, null, 'lib', 11);
  assert.equal(await store.resources.countOf(store.db, kind, a), 5);
  assert.equal(await store.resources.countOf(store.db, kind, b), 1);
  assert.equal(await store.resources.countOf(store.db, kind, null), 1, 'the ownerless library is counted too');
  assert.equal(await store.resources.countOf(store.db, 'other-kind', a), 0);

  const rows = await store.resources.owned(store.db, kind, { owner: a });
  await store.transaction((tx) => store.resources.remove(tx, kind, [rows[0].uuid, rows[1].uuid]));
  assert.equal(await store.resources.countOf(store.db, kind, a), 3);

  await assert.rejects(
    store.transaction(async (tx) => {
      await store.resources.insert(tx, new Date(), { kind, uuid: randomUUID(), owner: a, body: {} });
      await store.resources.insert(tx, new Date(), { kind, uuid: randomUUID(), owner: a, body: {} });
      assert.equal(await store.resources.countForLimit(tx, kind, a), 5, 'two pending inserts');
      await store.resources.remove(tx, kind, rows[2].uuid);
      assert.equal(await store.resources.countForLimit(tx, kind, a), 4, 'and one pending delete');
      throw new Error('roll back');
    }),
    /roll back/,
  );
  assert.equal(await store.resources.countOf(store.db, kind, a), 3, 'a rollback changes no count');

  const inserted = await store.transaction(async (tx) => {
    const uuid = randomUUID();
    const first = await store.resources.insertIfAbsent(tx, new Date(), { kind, uuid, owner: a, body: {} });
    const again = await store.resources.insertIfAbsent(tx, new Date(), { kind, uuid, owner: a, body: {} });
    return [first, again];
  });
  assert.deepEqual(inserted, [true, false]);
  assert.equal(await store.resources.countOf(store.db, kind, a), 4, 'an insert that found its row counts nothing');
});

test('pages of a visible set: rows and total_count as the in-memory rule gives them, for own, shared, filtered, both orders, deep pages', async () => {
  const kind = 'page-test';
  const [me, other] = [randomUUID(), randomUUID()];
  // Interleaved, so the shared rows fall between the caller's own in both orders; `recent` reverses creation.
  const made: { owner: string; name: string }[] = [];
  for (let i = 0; i < 14; i++) {
    const owner = i % 4 === 1 ? other : me;
    const name = `${owner === me ? 'mine' : 'theirs'}-${i % 3 === 0 ? 'x' : 'y'}-${i}`;
    made.push({ owner, name });
    await insert(kind, owner, name, i);
  }
  const names = (rows: Resource[]) => rows.map((r) => r.body.name);
  const shared: SharedRows = Object.assign(() => store.resources.ownedUuids(store.db, kind, other), { key: 'test.shared-other' });
  const sets: { label: string; set: () => VisibleSet; expected: string[] }[] = [
    { label: 'own', set: () => store.resources.visible(store.db, kind, me), expected: made.filter((m) => m.owner === me).map((m) => m.name) },
    { label: 'own + shared', set: () => store.resources.visible(store.db, kind, me, shared), expected: made.map((m) => m.name) },
    {
      label: 'filtered',
      set: () => {
        const set = store.resources.visible(store.db, kind, me, shared);
        set.where.push(() => store.resources.like('resources.name', '-x-', { contains: true }));
        return set;
      },
      expected: made.filter((m) => m.name.includes('-x-')).map((m) => m.name),
    },
  ];
  for (const { label, set, expected } of sets)
    for (const order of ['created', 'recent'] as const) {
      const all = order === 'created' ? expected : [...expected].reverse();
      for (const limit of [0, 1, 2, 3, 5, 20])
        for (const offset of [0, 1, 2, 3, 4, 6, 7, 9, 10, 13, 14, 15, 30]) {
          const want = pageOfItems(all, limit, offset);
          const got = await store.resources.listPage(set(), { order, limit, offset });
          const at = `${label}, ${order}, limit ${limit}, offset ${offset}`;
          assert.deepEqual(names(got.rows), want.rows, `rows: ${at}`);
          assert.equal(got.total, want.total, `total: ${at}`);
        }
    }
});

test('a deep page is read from anchors (several statements in one snapshot) and agrees with the shallow read', async () => {
  const kind = 'deep-test';
  const me = randomUUID();
  for (let i = 0; i < 11; i++) await insert(kind, me, `d${i}`, i);
  const set = () => store.resources.visible(store.db, kind, me);
  const p = { order: 'created', limit: 2, offset: 7 } as const;
  assert.equal(store.resources.pagesInSteps(set(), p), true, `offset >= ${STEP} pages in steps`);
  assert.equal(store.resources.pagesInSteps(set(), { ...p, offset: STEP - 1 }), false);
  const deep = await store.snapshot((db) => store.resources.listPage(store.resources.visible(db, kind, me), p));
  assert.deepEqual(
    deep.rows.map((r) => r.body.name),
    ['d7', 'd8'],
  );
  assert.equal(deep.total, 11);
  // The kept anchors follow the count's version: a row deleted before the page moves it.
  const first = (await store.resources.owned(store.db, kind, { owner: me }))[0];
  await store.transaction((tx) => store.resources.remove(tx, kind, first.uuid));
  const moved = await store.snapshot((db) => store.resources.listPage(store.resources.visible(db, kind, me), p));
  assert.deepEqual(
    moved.rows.map((r) => r.body.name),
    ['d8', 'd9'],
  );
  assert.equal(moved.total, 10);
});

test('page(): limit 0 is every row, an offset alone skips (SQLite needs LIMIT -1 for it)', async () => {
  const kind = 'raw-page-test';
  const me = randomUUID();
  for (let i = 0; i < 5; i++) await insert(kind, me, `r${i}`, i);
  const read = async (limit: number, offset: number) =>
    (await store.resources.page(store.db.selectFrom('resources').select('name').where('kind', '=', kind).orderBy('seq'), limit, offset).execute()).map(
      (r) => r.name,
    );
  assert.deepEqual(await read(0, 0), ['r0', 'r1', 'r2', 'r3', 'r4']);
  assert.deepEqual(await read(0, 2), ['r2', 'r3', 'r4']);
  assert.deepEqual(await read(2, 0), ['r0', 'r1']);
  assert.deepEqual(await read(2, 4), ['r4']);
  assert.deepEqual(await read(2, 9), []);
});
