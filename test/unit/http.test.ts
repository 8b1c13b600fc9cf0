import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { negotiate } from '../../src/http/negotiate.js';
import { listQuery, splitOr, fieldsParam, project } from '../../src/http/query.js';
import { sortedJson, truncateAtNul } from '../../src/http/json.js';
import { copyOf, frozen } from '../../src/core/json.js';
import { ApiError, STATUS_BY_TYPE } from '../../src/core/errors.js';
import { fromDatabaseError } from '../../src/store/errors.js';
import { money16 } from '../../src/core/money.js';
import { isoTimestamp } from '../../src/core/clock.js';

describe('negotiate', () => {
  test('q=0.0 excludes, parameters are ignored, case-insensitive', () => {
    assert.equal(negotiate(undefined, 'APPLICATION/XML; charset=utf-8'), 'xml');
    assert.equal(negotiate(undefined, 'application/json; q=0.0, application/xml'), 'xml');
    assert.equal(negotiate(undefined, 'application/*'), 'json');
    assert.throws(
      () => negotiate(undefined, 'application/xml;q=0'),
      (e: ApiError) => e.status === 406,
    );
  });
});

describe('query parsing', () => {
  test('splitOr honours escapes', () => {
    assert.deepEqual(splitOr('a,b'), ['a', 'b']);
    assert.deepEqual(splitOr('a\\,b'), ['a,b']);
    assert.deepEqual(splitOr('a\\\\,b'), ['a\\', 'b']);
    assert.deepEqual(splitOr(''), ['']);
    assert.deepEqual(splitOr('a\\b'), ['a\\b']);
  });
  test('listQuery: declared filters only, repeated = several groups', () => {
    const q = listQuery({ name: ['a,b', 'c'], other: 'x', limit: '5', offset: '2' }, 20, { name: 'exact' });
    assert.deepEqual([...q.filters], [['name', [['a', 'b'], ['c']]]]);
    assert.equal(q.limit, 5);
    assert.equal(q.offset, 2);
    assert.equal(listQuery({}, 7, {}).limit, 7);
    assert.equal(listQuery({ limit: ['3', '9'] }, 7, {}).limit, 9, 'last wins');
  });
  test('fields and projection', () => {
    assert.deepEqual(fieldsParam({ fields: ['a,b', 'c'] }), ['a', 'b', 'c']);
    assert.equal(fieldsParam({ fields: ' , ' }), undefined);
    assert.deepEqual(project({ a: 1, b: 2 }, ['b', 'zz']), { b: 2 });
  });
});

describe('json', () => {
  test('sortedJson sorts keys recursively and matches JSON.stringify otherwise', () => {
    const v = { b: [3, { d: 1, c: null }], a: 'x"y', u: undefined, n: NaN };
    assert.equal(sortedJson(v), '{"a":"x\\"y","b":[3,{"c":null,"d":1}],"n":null}');
    for (const sample of [[], {}, 'é☁', 0, -1.5, true, [null, [1, [2]]], { '': 1 }]) assert.deepEqual(JSON.parse(sortedJson(sample)), sample);
  });
  test('truncateAtNul cuts strings and keys', () => {
    assert.deepEqual(truncateAtNul({ 'a\0b': ['x\0y', 1], k: 'v' }), { a: ['x', 1], k: 'v' });
  });
});

describe('errors', () => {
  test('every error type has a status; wire types stay in the API vocabulary', () => {
    const vocabulary = new Set(['validation', 'notexist', 'backend', 'permission', 'database', 'concurrency', 'billing', 'payment']);
    for (const type of Object.keys(STATUS_BY_TYPE) as (keyof typeof STATUS_BY_TYPE)[]) {
      const wire = new ApiError(type, 'm').toWire();
      assert.ok(vocabulary.has(wire.error_type), `${type} -> ${wire.error_type}`);
    }
  });
  test('database errors map to 503 concurrency and 409 conflict', () => {
    assert.equal(fromDatabaseError({ code: 'SQLITE_BUSY' })?.status, 503);
    assert.equal(fromDatabaseError({ code: '40001' })?.status, 503);
    assert.equal(fromDatabaseError({ code: '23505' })?.status, 409);
    assert.equal(fromDatabaseError({ code: 'SQLITE_CONSTRAINT_UNIQUE' })?.toWire().error_type, 'concurrency');
    assert.equal(fromDatabaseError(new Error('x')), null);
  });
});

describe('formats', () => {
  test('money16 prints like Python Decimal quantized to 16 places', () => {
    assert.equal(money16(0), '0E-16');
    assert.equal(money16('0.000'), '0E-16');
    assert.equal(money16('12.5'), '12.5000000000000000');
    assert.equal(money16('-3'), '-3.0000000000000000');
    assert.equal(money16('0.1'), '0.1000000000000000');
  });
  test('a frozen object and its per-request copies serialise exactly as plain data does', () => {
    const plain = () => ({ b: { y: [1, { z: 'q' }], x: null }, a: 'é', m: [], d: 4, gone: 1, keep: { k: true } });
    const origin = frozen(plain());
    assert.throws(() => ((origin.b as { x: unknown }).x = 1), TypeError, 'frozen all the way down');
    assert.equal(sortedJson(origin), sortedJson(plain()));
    const copy = copyOf(origin);
    assert.equal(sortedJson(copy), sortedJson(plain()));
    // Keys added before, between and after the original's, one replaced, one removed, one set undefined.
    Object.assign(copy, { '0first': 1, c: [{ n: 2 }], zz: 'last', d: 5, keep: undefined });
    delete copy.gone;
    const expected = { ...plain(), '0first': 1, c: [{ n: 2 }], zz: 'last', d: 5, keep: undefined } as Record<string, unknown>;
    delete expected.gone;
    assert.equal(sortedJson(copy), sortedJson(JSON.parse(JSON.stringify(expected))));
    assert.equal(sortedJson(origin), sortedJson(plain()), 'the original is untouched');
  });

  test('isoTimestamp has microseconds and +00:00', () => {
    assert.equal(isoTimestamp(new Date('2014-06-05T00:27:12.890Z')), '2014-06-05T00:27:12.890000+00:00');
  });
});

describe('JSON request bodies', () => {
  // body.ts skips JSON.parse's reviver when the text cannot hold a `__proto__` key: spelled out or escaped, it is dropped.
  test('a __proto__ key is dropped however it is spelled; other bodies parse as JSON.parse does', async () => {
    const { default: Fastify } = await import('fastify');
    const { registerBodyParsers } = await import('../../src/http/body.js');
    const app = Fastify();
    registerBodyParsers(app);
    app.post('/', async (req) => ({ keys: Object.keys(req.body as object), proto: Object.getPrototypeOf(req.body) === Object.prototype, body: req.body }));
    const post = async (payload: string) => (await app.inject({ method: 'POST', url: '/', headers: { 'content-type': 'application/json' }, payload })).json();
    for (const text of ['{"__proto__":{"x":1},"a":1}', '{"\\u005f_proto__":{"x":1},"a":1}', '{"a":1,"\\u005F\\u005Fproto\\u005f\\u005f":{"x":1}}'])
      assert.deepEqual(await post(text), { keys: ['a'], proto: true, body: { a: 1 } }, text);
    assert.deepEqual((await post('{"a":[1,{"b":"c\\u00e9"}],"n":null}')).body, { a: [1, { b: 'cé' }], n: null });
    assert.deepEqual((await post('{"a":[1,{"b":"c"}],"n":null}')).body, { a: [1, { b: 'c' }], n: null });
    await app.close();
  });
});
