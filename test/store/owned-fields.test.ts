import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';

/**
 * ResourceRepository.ownedFields (what billing polls read): named body fields without the bodies, in
 * creation order, read a chunk of rows per statement. Chunks of 2 here, so a wrong step between chunks
 * (a row read twice or skipped) shows on a handful of rows.
 */
let srv: TestServer;
before(async () => {
  srv = await startServer();
});
after(() => srv.close());

test('ownedFields reads named body fields in creation order across chunks, by owner and by a body field', async () => {
  const { store } = srv.services;
  const [a, b] = [srv.services.ids.uuid(), srv.services.ids.uuid()];
  const kind = 'owned-fields-test';
  const made: { uuid: string; owner: string; size: number; status: string }[] = [];
  await store.transaction(async (tx) => {
    for (let i = 0; i < 7; i++) {
      const row = { uuid: srv.services.ids.uuid(), owner: i % 3 === 2 ? b : a, size: 1000 + i, status: i % 2 ? 'running' : 'stopped' };
      made.push(row);
      await store.resources.insert(tx, new Date(), { kind, uuid: row.uuid, owner: row.owner, body: { size: row.size, status: row.status, list: [i] } });
    }
    // Ownerless rows (the library) are never billed.
    await store.resources.insert(tx, new Date(), { kind, uuid: srv.services.ids.uuid(), owner: null, body: { size: 1, status: 'running' } });
  });
  const read = async (opts: Parameters<typeof store.resources.ownedFields>[3]) => {
    const out = [];
    for await (const r of store.resources.ownedFields(store.db, kind, ['size', 'list', 'missing'], { ...opts, chunk: 2 })) out.push(r);
    return out;
  };
  const all = await read({});
  assert.deepEqual(
    all.map((r) => [r.uuid, r.owner_uuid, Number(r.fields.size), JSON.parse(String(r.fields.list)), r.fields.missing]),
    made.map((m, i) => [m.uuid, m.owner, m.size, [i], null]),
  );
  assert.ok(all.every((r) => typeof r.created_at === 'string' && r.created_at.length > 0));
  assert.deepEqual(
    (await read({ owner: a })).map((r) => r.uuid),
    made.filter((m) => m.owner === a).map((m) => m.uuid),
  );
  assert.deepEqual(
    (await read({ bodyIn: { key: 'status', values: ['running'] } })).map((r) => r.uuid),
    made.filter((m) => m.status === 'running').map((m) => m.uuid),
  );
  assert.deepEqual(await read({ owner: srv.services.ids.uuid() }), []);
});

test('ownedFields reads rows whose bodies hold a lone UTF-16 surrogate (PostgreSQL cannot parse those: the chunk is read whole)', async () => {
  const { store } = srv.services;
  const owner = srv.services.ids.uuid();
  const kind = 'owned-fields-surrogate';
  const made: { uuid: string; size: number; status: string }[] = [];
  await store.transaction(async (tx) => {
    for (let i = 0; i < 5; i++) {
      const row = { uuid: srv.services.ids.uuid(), size: 10 + i, status: i % 2 ? 'running' : 'stopped' };
      made.push(row);
      // What a client's `"name": "\udc00"` becomes: JSON.stringify writes the escape back.
      await store.resources.insert(tx, new Date(), {
        kind,
        uuid: row.uuid,
        owner,
        body: { size: row.size, status: row.status, name: i === 2 ? '\udc00x' : 'plain', list: [i] },
      });
    }
  });
  const read = async (opts: Parameters<typeof store.resources.ownedFields>[3]) => {
    const out = [];
    for await (const r of store.resources.ownedFields(store.db, kind, ['size', 'list'], { ...opts, chunk: 2 })) out.push(r);
    return out;
  };
  assert.deepEqual(
    (await read({ owner })).map((r) => [r.uuid, Number(r.fields.size), JSON.parse(String(r.fields.list))]),
    made.map((m, i) => [m.uuid, m.size, [i]]),
  );
  assert.deepEqual(
    (await read({ owner, bodyIn: { key: 'status', values: ['running'] } })).map((r) => r.uuid),
    made.filter((m) => m.status === 'running').map((m) => m.uuid),
  );
  // Inside a transaction too (a failed statement would abort it on PostgreSQL: /currentusage/ reads in a snapshot).
  const inSnapshot = await store.snapshot(async (tx) => {
    const out = [];
    for await (const r of store.resources.ownedFields(tx, kind, ['size'], { owner, chunk: 2 })) out.push(r.uuid);
    return out;
  });
  assert.deepEqual(
    inSnapshot,
    made.map((m) => m.uuid),
  );
});
