import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config.js';
import { AdjustableClock } from '../../src/core/clock.js';
import type { Services } from '../../src/core/context.js';
import { randomIds } from '../../src/core/ids.js';
import { copyOf, frozen, frozenBytes, sortedJson } from '../../src/core/json.js';
import { CredentialCache } from '../../src/http/auth/basic.js';
import { createUser } from '../../src/resources/users/users.js';
import { Store, type Db } from '../../src/store/db.js';
import { SharedSeqs } from '../../src/store/resources/shared-seqs.js';
import { VersionedCache } from '../../src/store/object-cache.js';
import { StatementCache } from '../../src/store/statement-cache.js';
import { freshDatabase } from '../helpers/db.js';
import { withSimulator } from '../../src/sim/index.js';
import { FUTURE_YEAR } from '../helpers/clock.js';

/** The in-process structures that grow with distinct keys stop at their bounds (found by bench/soak.ts). */

describe('object cache budget', () => {
  /** An object nested `depth` levels deep, each level with a few keys of text. */
  const nested = (depth: number): Record<string, unknown> => {
    let inner: Record<string, unknown> = { leaf: 'x'.repeat(200) };
    for (let i = 0; i < depth; i++) inner = { level: i, name: `level ${i}`, child: inner, list: [inner.leaf, i] };
    return { uuid: 'u', body: inner };
  };

  test('a frozen object is counted with the serialisation every nested level keeps', () => {
    const o = frozen(nested(6));
    // Each nested object and array keeps its own serialisation: the budget must count every one of them,
    // not a multiple of the top level's text (the old estimate, 3x, held ~3x its budget in a soak).
    let levels = 0;
    const walk = (v: unknown): void => {
      if (v === null || typeof v !== 'object') return;
      levels += sortedJson(v).length;
      Object.values(v).forEach(walk);
    };
    Object.values(o).forEach(walk);
    const text = sortedJson(o).length;
    assert.ok(levels > 3 * text, 'the nesting makes the kept texts outweigh three copies of the top level');
    assert.ok(frozenBytes(o) >= 2 * text + levels, `${frozenBytes(o)} counts the data, the parts and each level`);
    // The flattened texts are the same texts: copies serialise as before.
    const copy = copyOf(o);
    copy.extra = 1;
    assert.equal(sortedJson(copy), sortedJson({ ...nested(6), extra: 1 }));
  });

  test('the cache stops at its byte budget and evicts the least recently used', () => {
    const cache = new VersionedCache<Record<string, unknown>>(10 * frozenBytes(frozen(nested(3))));
    for (let i = 0; i < 30; i++) {
      const o = frozen(nested(3));
      cache.set(`k${i}`, 1, o, frozenBytes(o));
      if (i === 20) assert.ok(cache.get('k15', 1), 'k15 is still kept, and now recently used');
    }
    assert.equal(cache.size.entries, 10);
    assert.ok(cache.size.bytes <= cache.maxBytes);
    assert.equal(cache.get('k0', 1), undefined, 'the oldest went first');
    assert.ok(cache.get('k29', 1));
  });
});

describe('presented objects of a store', () => {
  test('objects and their served text share the --cache-mib budget', async () => {
    const store = await Store.open(':memory:', { cacheMiB: 2 });
    try {
      assert.equal(store.presented.maxBytes + store.fragments.maxBytes, 2 * 1024 * 1024);
      const text = 'x'.repeat(64 * 1024);
      for (let i = 0; i < 100; i++) {
        store.fragments.set(`servers/${i}|*|own`, '1', text, text.length);
        const o = frozen({ uuid: `u${i}`, text });
        store.presented.set(`servers/${i}`, 1, o, frozenBytes(o));
      }
      const held = store.presented.size.bytes + store.fragments.size.bytes;
      assert.ok(held <= 2 * 1024 * 1024, `${held} bytes held for a 2 MiB budget`);
    } finally {
      await store.close();
    }
  });
});

describe('statement cache', () => {
  test('keeps at most its bound, least recently used out; 0 keeps none', () => {
    let compiled = 0;
    const cache = new StatementCache((text) => ({ text, n: ++compiled }), 3);
    // `in (?, ?, …)` lists of every length are distinct texts: the cache must not grow with them.
    for (let n = 1; n <= 50; n++) cache.prepare(`select 1 where x in (${Array(n).fill('?').join(', ')})`);
    assert.equal(cache.size, 3);
    const a = cache.prepare('select a');
    cache.prepare('select b');
    assert.equal(cache.prepare('select a'), a, 'a kept statement is reused');
    cache.prepare('select c');
    cache.prepare('select d');
    assert.equal(cache.prepare('select a'), a, 'used last, so kept while b went');
    const before = compiled;
    cache.prepare('select b');
    assert.equal(compiled, before + 1, 'b was evicted and is compiled again');
    const none = new StatementCache((text) => ({ text }), 0);
    none.prepare('select 1');
    assert.equal(none.size, 0);
  });

  test('the store keeps the configured number of SQLite statements', async () => {
    const store = await Store.open(':memory:', { statementCache: 4 });
    try {
      for (let n = 1; n <= 20; n++)
        await store.db
          .selectFrom('users')
          .select('uuid')
          .where(
            'uuid',
            'in',
            Array.from({ length: n }, (_, i) => `u${i}`),
          )
          .execute();
      assert.equal(store.preparedStatements?.size, 4);
      assert.equal(loadConfig({}, {}).statementCache, 500);
    } finally {
      await store.close();
    }
  });
});

describe('credential cache', () => {
  let db: { url: string; drop: () => Promise<void> };
  let services: Services;
  const clock = new AdjustableClock();
  before(async () => {
    db = await freshDatabase();
    clock.set(new Date(Date.UTC(FUTURE_YEAR, 0, 1)));
    const config = loadConfig({ db: db.url, 'credential-cache': '3' }, {});
    services = withSimulator({ store: await Store.open(db.url, { poolSize: 2 }), clock, ids: randomIds, config });
  });
  after(async () => {
    await services.store.close();
    await db.drop();
  });

  test('keeps --credential-cache logins, the least recently verified out', async () => {
    const cache = new CredentialCache(services);
    assert.equal(cache.maxEntries, 3);
    const users = [];
    for (let i = 0; i < 5; i++) {
      const email = `bound-${i}-${Date.now()}@example.com`;
      await createUser(services, { email, password: `pw-${i}` });
      users.push({ email, password: `pw-${i}` });
    }
    for (const u of users.slice(0, 3)) assert.ok(await cache.verify(u.email, u.password, '10.0.0.1'));
    // users[0] was verified first, but is in use: once its entry is no longer fresh it is verified again,
    // which makes users[1] the least recently verified.
    clock.advance(2_001);
    assert.equal(cache.fresh(users[0].email, users[0].password, '10.0.0.1'), null);
    assert.ok(await cache.verify(users[0].email, users[0].password, '10.0.0.1'));
    for (const u of users.slice(3)) assert.ok(await cache.verify(u.email, u.password, '10.0.0.1'));
    assert.equal(cache.size, 3);
    assert.equal(cache.fresh(users[1].email, users[1].password, '10.0.0.1'), null);
    assert.equal(cache.fresh(users[2].email, users[2].password, '10.0.0.1'), null);
    assert.ok(cache.fresh(users[0].email, users[0].password, '10.0.0.1'));
    assert.ok(cache.fresh(users[4].email, users[4].password, '10.0.0.1'));
  });
});

describe('kept shared rows', () => {
  test('a set is kept per list shape and caller: new callers stop at the bound of sets, empty ones too', async () => {
    const shared = new SharedSeqs(null as never, 1000, 5);
    const db = {} as Db;
    // Each new account lists once and is shared nothing: an empty set per caller, which no row bound counts.
    for (let i = 0; i < 50; i++) await shared.at(db, 1, `visible.theirs:servers:acl.servers|user-${i}`, async () => []);
    assert.deepEqual(shared.size, { sets: 5, rows: 0 });
    let reads = 0;
    const read = async () => (reads++, [{ seq: 3 }, { seq: 1 }]);
    await shared.at(db, 1, 'k', read);
    assert.deepEqual(await shared.at(db, 1, 'k', read), [{ seq: 1 }, { seq: 3 }]);
    assert.equal(reads, 1, 'a kept set is reused while the counter holds');
    assert.deepEqual(shared.size, { sets: 5, rows: 2 });
    // The row bound still holds: sets of 200 rows (within a quarter of 1,000) push the oldest out.
    for (let i = 0; i < 10; i++) await shared.at(db, 1, `big-${i}`, async () => Array.from({ length: 200 }, (_, seq) => ({ seq })));
    assert.ok(shared.size.rows <= 1000 && shared.size.sets <= 5, JSON.stringify(shared.size));
  });
});
