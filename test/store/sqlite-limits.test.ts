import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { Store } from '../../src/store/db.js';
import { onlyOn } from '../helpers/skips.js';

/**
 * SQLite plans a bare `limit ?` with its bound value, and then prepares the statement again every time that
 * parameter is bound: a kept statement (store/statement-cache.ts) would be parsed and planned on every run.
 * The store's SQLite queries take their LIMIT as an expression instead, with the same meaning.
 */
let store: Store;
before(async () => {
  store = await Store.open(':memory:');
});
after(() => store?.close());

const numbers = () =>
  store.db
    .selectFrom(sql<{ n: number }>`(select value as n from json_each('[1,2,3,4,5]'))`.as('t'))
    .select('t.n')
    .orderBy('t.n');

test('a parameter LIMIT is compiled as an expression, so a kept statement is not planned again per run', { skip: onlyOn('sqlite') }, () => {
  const { sql: text, parameters } = numbers().limit(2).offset(1).compile();
  assert.match(text, /limit \(\? \+ 0\) offset \?$/);
  assert.deepEqual(parameters, [2, 1]);
  // A literal one stays as written.
  assert.match(numbers().limit(sql.lit(3)).compile().sql, /limit 3$/);
});

test('the LIMIT expression keeps its meaning: a page, none for 0, all after the offset for -1', { skip: onlyOn('sqlite') }, async () => {
  const values = async (q: ReturnType<typeof numbers>) => (await q.execute()).map((r) => Number(r.n));
  assert.deepEqual(await values(numbers().limit(2).offset(1)), [2, 3]);
  assert.deepEqual(await values(numbers().limit(0)), []);
  assert.deepEqual(await values(numbers().limit(-1).offset(3)), [4, 5]);
  // The same kept statement, bound again with other values.
  assert.deepEqual(await values(numbers().limit(3).offset(0)), [1, 2, 3]);
});
