import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { engine } from '../helpers/db.js';
import { openServices, type ServiceFixture, value } from '../helpers/services.js';
import { onlyOn } from '../helpers/skips.js';
import { Client } from '../helpers/client.js';
import { startPeer, startServer } from '../helpers/server.js';

/**
 * What a write costs the store (issue 31, part 3): statements per `POST /servers/` (one server with a DHCP
 * NIC, as the bench's) and per `PUT /servers/<uuid>/` (a new name and meta), and on PostgreSQL the round
 * trips (store/pg-client.ts: `begin` and the writes nobody reads an answer of travel with the next statement
 * waited for). Exact: a change that adds one fails here, one that saves one lowers the figure.
 */
let fx: ServiceFixture;
before(async () => {
  fx = await openServices();
});
after(() => fx.close());

type Obj = Record<string, unknown>;
const newServer = (n: number) => ({
  name: `w-${n}`,
  cpu: 1000,
  mem: 1024 ** 3,
  vnc_password: 'bench-vnc',
  nics: [{ ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' }],
});

async function cost<T>(fn: () => Promise<T>): Promise<{ statements: number; roundTrips: number; result: T }> {
  const store = fx.services.store;
  const [s0, r0] = [store.statements, store.roundTrips];
  const result = await fn();
  return { statements: store.statements - s0, roundTrips: store.roundTrips - r0, result };
}

test('a POST and a PUT of a server: statements and round trips per write', async () => {
  const servers = fx.collection('servers').service;
  const alice = await fx.user();
  // The first write of a kind compiles its shapes and counts the owner's first row: not what is measured.
  const first = value(await servers.create!(alice, [newServer(0)]))[0] as Obj;
  await servers.update!(alice, String(first.uuid), { name: 'warm', meta: { revision: '0' } });

  const post = await cost(async () => value(await servers.create!(alice, [newServer(1)]))[0] as Obj);
  assert.equal(post.result.name, 'w-1');
  // begin, the row, its audit entry, the owner's count, commit
  assert.equal(post.statements, 5, 'statements per POST');
  // PostgreSQL: everything travels with the commit.
  assert.equal(post.roundTrips, engine === 'postgres' ? 1 : 5, 'round trips per POST');

  const put = await cost(async () => value(await servers.update!(alice, String(post.result.uuid), { name: 'renamed', meta: { revision: '1' } })) as Obj);
  assert.equal(put.result.name, 'renamed');
  // begin, the row locked with its relations, the audit entry, the new body, commit
  assert.equal(put.statements, 5, 'statements per PUT');
  // PostgreSQL: begin travels with the lock, the audit entry and the new body with the commit.
  assert.equal(put.roundTrips, engine === 'postgres' ? 2 : 5, 'round trips per PUT');

  // A PUT sets only the indexed mirror that changed (rows.ts `write`): the columns still follow the body.
  const columns = async () =>
    fx.services.store.db.selectFrom('resources').select(['name', 'status', 'body']).where('uuid', '=', String(post.result.uuid)).executeTakeFirstOrThrow();
  for (const change of [{ meta: { revision: '2' } }, { name: 'again' }, { name: 'again', meta: {} }]) {
    value(await servers.update!(alice, String(post.result.uuid), change));
    const row = await columns();
    const body = JSON.parse(row.body) as Obj;
    assert.deepEqual([row.name, row.status], [body.name, body.status], JSON.stringify(change));
  }
  assert.equal((await columns()).name, 'again');
  assert.equal((await servers.list!(alice, { filters: new Map([['name', [['again']]]]), limit: 0, offset: 0 })).objects.length, 1);
});

test('a write sent ahead that fails fails its transaction, and the store goes on', { skip: onlyOn('postgres') }, async () => {
  const store = fx.services.store;
  const alice = await fx.user();
  const entry = (action: string) => ({
    owner_uuid: alice.caller.uuid,
    actor_uuid: null,
    action,
    category: 'Servers',
    uuid: '',
    details: '',
    success: 1,
    error_type: null,
    error_point: null,
    error_message: '',
    timestamp: '2026-11-29 00:00:00',
  });
  // An action longer than its column: the insert is sent ahead, and its failure comes back from the commit.
  await assert.rejects(
    store.transaction(async (tx) => {
      await store.audit.insert(tx, entry('first'));
      await store.audit.insert(tx, entry('x'.repeat(100)));
      return 'committed';
    }),
    (err: { code?: string }) => err.code === '22001',
  );
  const logged = async () =>
    (await store.db.selectFrom('audit_log').select('action').where('owner_uuid', '=', alice.caller.uuid).execute()).map((r) => r.action);
  assert.deepEqual(await logged(), [], 'nothing of the failed transaction was kept');
  // The connection is usable again, and a good transaction commits.
  await store.transaction((tx) => store.audit.insert(tx, entry('second')));
  assert.deepEqual(await logged(), ['second']);
});

test(
  'a serving process on PostgreSQL: its collected announcements and the simulator’s writes cost no round trips of their own',
  { skip: onlyOn('postgres') },
  async () => {
    // Last in this file: from here on the store announces after its commits (store/db.ts `announcedAfter`).
    await fx.services.store.enableAnswerReuse();
    const servers = fx.collection('servers');
    const alice = await fx.user();
    const first = value(await servers.service.create!(alice, [newServer(10)]))[0] as Obj;
    const post = await cost(async () => value(await servers.service.create!(alice, [newServer(11)]))[0] as Obj);
    // The announcements are read with the commit (shapes.ts `readWithCommit`): still one round trip.
    assert.equal(post.roundTrips, 1, 'round trips per POST of a serving process');
    const put = await cost(() => servers.service.update!(alice, String(post.result.uuid), { name: 'served' }));
    assert.equal(put.roundTrips, 2, 'round trips per PUT of a serving process');
    // A start: the row's lock, the funds (balance, burst levels), the guest's state read; its new state, body,
    // audit entry and boot timer travel with the commit.
    const act = (uuid: string, action: string) => servers.actions![action].run(alice, uuid, {}, {});
    await act(String(first.uuid), 'start');
    const start = await cost(() => act(String(post.result.uuid), 'start'));
    assert.equal(start.roundTrips, 5, 'round trips per start');
  },
);

/**
 * A serving process on PostgreSQL collects its transaction's announcements for after the commit (store/db.ts
 * `announcedAfter`): the read of them travels with the commit (pg-client.ts), so a POST is still one round
 * trip and a PUT two; what a write announced is heard (the next GET of another process's kept answer moves).
 */
test('a serving process: the announcements are read in the commit round trip, and still announced', { skip: onlyOn('postgres') }, async () => {
  const srv = await startServer();
  const peer = await startPeer(srv);
  try {
    const alice = await srv.user();
    const first = await alice.post('servers/', { objects: [newServer(0)] });
    assert.equal(first.status, 201, first.text);
    const uuid = String(first.json.objects[0].uuid);
    assert.equal((await alice.put(`servers/${uuid}/`, { name: 'warm', meta: { revision: '0' } })).status, 200);
    const viaPeer = new Client(peer.base, { email: alice.email, password: alice.password });
    assert.equal((await viaPeer.get(`servers/${uuid}/`)).json.name, 'warm');
    const store = srv.services.store;
    // The store counts every round trip of the process: work of its own (a pool connection opened, its
    // settings sent) may fall within a write's. It only adds: the fewest of a few writes is the write's.
    const trips = async (write: (i: number) => Promise<{ status: number; text: string }>, status: number) => {
      let fewest = Infinity;
      for (let i = 1; i <= 5; i++) {
        const r0 = store.roundTrips;
        const res = await write(i);
        assert.equal(res.status, status, res.text);
        fewest = Math.min(fewest, store.roundTrips - r0);
      }
      return fewest;
    };
    assert.equal(await trips((i) => alice.post('servers/', { objects: [newServer(i)] }), 201), 1, 'round trips per POST');
    assert.equal(await trips((i) => alice.put(`servers/${uuid}/`, { name: 'renamed', meta: { revision: String(i) } }), 200), 2, 'round trips per PUT');
    // The other process kept the object's answer: the announcement of the PUT moved it.
    assert.equal((await viaPeer.get(`servers/${uuid}/`)).json.name, 'renamed');
  } finally {
    await peer.close();
    await srv.close();
  }
});
