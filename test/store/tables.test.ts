import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Store } from '../../src/store/db.js';
import { TABLE_NAMES, TABLES } from '../../src/store/tables.js';
import { freshDatabase } from '../helpers/db.js';

/**
 * store/tables.ts describes every table once; reset, export/import and the answer announcements read it.
 * A table a migration adds without a description (or a description of a table no migration makes) fails here.
 */
let store: Store;
before(async () => {
  store = await Store.open((await freshDatabase()).url);
});
after(() => store.close());

test('the description names exactly the tables of the schema', async () => {
  const inDb = (await store.state.tableNames(store.db)).sort();
  // tableNames lists what state files carry; the others (drive data, trigger-kept counters) are there too.
  assert.deepEqual(inDb, TABLE_NAMES.filter((t) => TABLES[t].exported).sort());
  assert.deepEqual(TABLE_NAMES.filter((name) => !TABLES[name].exported).sort(), [
    'announce_pending',
    'answer_scopes',
    'change_counters',
    'change_relay',
    'data_blocks',
    'data_maps',
    'upload_chunks',
  ]);
  for (const t of TABLE_NAMES.filter((n) => !TABLES[n].exported)) await store.db.selectFrom(t).selectAll().limit(1).execute();
});

test('a whole reset empties what the description says and keeps the rest', async () => {
  const now = new Date();
  await store.transaction(async (tx) => {
    await store.resources.insert(tx, now, { kind: 'libdrives', uuid: 'lib-1', owner: null, body: {} });
    await store.resources.insert(tx, now, { kind: 'drives', uuid: 'own-1', owner: 'u-1', body: {} });
  });
  const { deleted } = await store.transaction((tx) => store.state.emptyAll(tx));
  for (const [name, info] of Object.entries(TABLES)) assert.equal(name in deleted, info.reset !== 'keep', name);
  assert.equal(deleted.resources, 1);
  assert.ok(await store.resources.get(store.db, 'libdrives', 'lib-1'), 'the library stays');
  assert.equal(await store.resources.get(store.db, 'drives', 'own-1'), undefined);
});
