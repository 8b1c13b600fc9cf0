import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';

/**
 * How many statements the GETs clients poll most cost when the answer is made afresh (no kept answers):
 * on PostgreSQL each statement is a round trip, and the goal is one per request at most (issue 31). The
 * credential check reads the user row again every few seconds (http/auth/basic.ts), so each figure is the
 * fewest over a few requests.
 */
let s: TestServer;
before(async () => {
  s = await startServer({ 'answer-cache-mib': '0' });
});
after(() => s.close());

type Client = Awaited<ReturnType<TestServer['user']>>;

async function statementsOf(c: Client, path: string): Promise<number> {
  let fewest = Infinity;
  for (let i = 0; i < 3; i++) {
    const n0 = s.services.store.statements;
    const res = await c.request('GET', path);
    assert.equal(res.status, 200, `${path}: ${res.text}`);
    fewest = Math.min(fewest, s.services.store.statements - n0);
  }
  return fewest;
}

test('a GET made afresh is one statement, a grantee’s page included', async () => {
  // Verify mode reads kept shared rows again, to compare: nothing to count there.
  if (process.env.STRATUS_ANSWER_CACHE_VERIFY === '1') return;
  const alice = await s.user();
  const bob = await s.user();
  const server = async (c: Client, name: string) =>
    String((await c.request('POST', 'servers/', { body: { name, cpu: 1000, mem: 1024 ** 3, vnc_password: 'secret-vnc' } })).json.objects[0].uuid);
  const own = await server(alice, 'own');
  const shared = [await server(bob, 'b1'), await server(bob, 'b2')];
  const tag = String((await bob.request('POST', 'tags/', { body: { name: 'shared', resources: shared } })).json.objects[0].uuid);
  await alice.request('POST', 'tags/', { body: { name: 'mine', resources: [own] } });
  await bob.request('POST', 'acls/', { body: { name: 'share', grantees: [{ uuid: alice.uuid }], rules: [{ permission: 'LIST' }], tags: [tag] } });
  // Alice sees her own server and Bob's two (the kept shared rows warm up on the first list).
  assert.equal((await alice.request('GET', 'servers/?limit=20')).json.meta.total_count, 3);

  const paths = ['servers/?limit=20', 'servers/detail/?limit=20', `servers/${own}/`, `servers/${shared[0]}/`, 'tags/?limit=20', 'capabilities/'];
  const counts: Record<string, number> = {};
  for (const p of paths) counts[p] = await statementsOf(alice, p);
  // The kept shared rows are checked by the page itself (its `sharing` counter column), on both stores.
  const lists = 1;
  assert.deepEqual(counts, {
    'servers/?limit=20': lists,
    'servers/detail/?limit=20': lists,
    [`servers/${own}/`]: 1,
    [`servers/${shared[0]}/`]: 1,
    'tags/?limit=20': 1,
    'capabilities/': 1,
  });
});
