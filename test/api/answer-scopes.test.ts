import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';

/**
 * Kept answers scoped to what they are made of (src/store/answer-scopes.ts): a servers or tags answer is
 * kept while none of the owners whose rows the caller sees wrote, whatever other accounts, timers and
 * writers outside the API do; and every write the caller can see (their own object, a tag membership, an
 * ACL that shares with them, the shared objects, a row written without the API) is in the next answer.
 */
type User = Client & { uuid: string };
const MINIMAL = { cpu: 1000, mem: 536870912, name: 'scoped', vnc_password: 'testserver' };

let srv: TestServer;
before(async () => {
  srv = await startServer({ delays: 'server.boot=0,server.stop=0' });
});
after(() => srv.close());

const reused = () => srv.app.answerCache!.counts.reused;
const user = async () => (await srv.user()) as User;

async function server(c: Client, body: Record<string, unknown> = {}): Promise<{ uuid: string }> {
  const res = await c.post('servers/', { objects: [{ ...MINIMAL, ...body }] });
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0];
}

/** GETs `path` twice (the second from the cache) and returns the answer. */
async function kept(c: Client, path: string): Promise<string> {
  const first = (await c.get(path)).text;
  const was = reused();
  assert.equal((await c.get(path)).text, first);
  assert.equal(reused(), was + 1, `${path} is kept`);
  return first;
}

/** Renames a server outside the API, as a timer, an operator command or an import writes. */
async function renameDirectly(uuid: string, name: string): Promise<void> {
  const store = srv.services.store;
  await store.transaction((tx) => store.resources.patch(tx, srv.clock.now(), 'servers', uuid, (b) => ({ ...b, name })));
}

const names = (text: string): string[] => (JSON.parse(text) as { objects: { name: string }[] }).objects.map((o) => o.name).sort();

describe('kept answers scoped to their owners', () => {
  test("another account's writes, through the API or not, leave my answers kept", async () => {
    const [alice, bob] = [await user(), await user()];
    await server(alice, { name: 'a1' });
    const theirs = await server(bob, { name: 'b1' });
    const paths = ['servers/detail/?limit=20', 'servers/?limit=50', 'tags/?limit=20'];
    const answers = new Map<string, string>();
    for (const p of paths) answers.set(p, await kept(alice, p));
    // Bob writes: a PUT, a create, a tag, a delete; a row of his written without the API; time passes
    // (timers run). None of it is alice's or shared with her.
    assert.equal((await bob.put(`servers/${theirs.uuid}/`, { ...MINIMAL, name: 'b1-renamed' })).status, 200);
    const other = await server(bob, { name: 'b2' });
    assert.equal((await bob.post('tags/', { name: 'bobs', resources: [other.uuid] })).status, 201);
    assert.equal((await bob.delete(`servers/${other.uuid}/`)).status, 204);
    await renameDirectly(theirs.uuid, 'b1-direct');
    await srv.advance(60_000);
    for (const p of paths) {
      const was = reused();
      assert.equal((await alice.get(p)).text, answers.get(p), p);
      assert.equal(reused(), was + 1, `${p} is still kept after bob's writes`);
    }
    // An answer that is not scoped (the balance) is made afresh after any write, as before.
    await kept(alice, 'balance/');
    await bob.put(`servers/${theirs.uuid}/`, { ...MINIMAL, name: 'b1-again' });
    const was = reused();
    await alice.get('balance/');
    assert.equal(reused(), was);
  });

  test('my own writes are in the next answer: through the API, without it, a tag membership', async () => {
    const alice = await user();
    const s = await server(alice, { name: 'mine' });
    await kept(alice, `servers/${s.uuid}/`);
    await kept(alice, 'servers/detail/?limit=20');
    // A single object is its own scope: a write of another of mine leaves it kept.
    const other = await server(alice, { name: 'other' });
    const one = await kept(alice, `servers/${other.uuid}/`);
    assert.equal((await alice.put(`servers/${s.uuid}/`, { ...MINIMAL, name: 'mine-put' })).status, 200);
    let was = reused();
    assert.equal((await alice.get(`servers/${other.uuid}/`)).text, one);
    assert.equal(reused(), was + 1, 'one object is kept through a write of another');
    assert.equal((await alice.get(`servers/${s.uuid}/`)).json.name, 'mine-put');
    await renameDirectly(s.uuid, 'mine-direct');
    assert.equal((await alice.get(`servers/${s.uuid}/`)).json.name, 'mine-direct');
    assert.deepEqual(names(await kept(alice, 'servers/detail/?limit=20')), ['mine-direct', 'other']);
    was = reused();
    assert.equal((await alice.get(`servers/${other.uuid}/`)).text, one);
    assert.equal(reused(), was + 1);
    // A tag's membership is written without writing the server: its answer shows the tag at once.
    const tag = (await alice.post('tags/', { name: 't' })).json.objects[0] as { uuid: string };
    await kept(alice, `servers/${s.uuid}/`);
    await kept(alice, `tags/${tag.uuid}/`);
    assert.equal((await alice.put(`tags/${tag.uuid}/`, { name: 't', resources: [s.uuid] })).status, 200);
    assert.deepEqual(
      (await alice.get(`servers/${s.uuid}/`)).json.tags.map((t: { uuid: string }) => t.uuid),
      [tag.uuid],
    );
    assert.deepEqual(
      (await alice.get(`tags/${tag.uuid}/`)).json.resources.map((r: { uuid: string }) => r.uuid),
      [s.uuid],
    );
    // A member's delete drops it from the tag's answer (the tag's row is not written).
    await kept(alice, `tags/${tag.uuid}/`);
    await kept(alice, `tags/${tag.uuid}/servers/`);
    assert.equal((await alice.delete(`servers/${s.uuid}/`)).status, 204);
    assert.deepEqual((await alice.get(`tags/${tag.uuid}/`)).json.resources, []);
    assert.deepEqual((await alice.get(`tags/${tag.uuid}/servers/`)).json.objects, []);
  });

  test("what an ACL shares with me: the grant, the shared objects, the tag's membership, the revocation", async () => {
    const [alice, bob] = [await user(), await user()];
    await server(alice, { name: 'a' });
    const shared = await server(bob, { name: 'b-shared' });
    const tag = (await bob.post('tags/', { name: 'share', resources: [] })).json.objects[0] as { uuid: string };
    const list = 'servers/detail/?limit=0';
    assert.deepEqual(names(await kept(alice, list)), ['a']);
    // Bob shares his tag (still empty) with alice: then puts his server in it.
    const acl = (await bob.post('acls/', { name: 'share', grantees: [alice.uuid], rules: [{ permission: 'LIST' }], tags: [tag.uuid] })).json.objects[0] as {
      uuid: string;
    };
    assert.deepEqual(names(await kept(alice, list)), ['a']);
    assert.equal((await bob.put(`tags/${tag.uuid}/`, { name: 'share', resources: [shared.uuid] })).status, 200);
    assert.deepEqual(names(await kept(alice, list)), ['a', 'b-shared']);
    await kept(alice, `servers/${shared.uuid}/`);
    // Bob writes the shared server, through the API and without it. Alice's tags are hers alone (tags are
    // never shared): their answer stays kept.
    const tags = await kept(alice, 'tags/?limit=20');
    assert.equal((await bob.put(`servers/${shared.uuid}/`, { ...MINIMAL, name: 'b-renamed' })).status, 200);
    const was = reused();
    assert.equal((await alice.get('tags/?limit=20')).text, tags);
    assert.equal(reused(), was + 1, "alice's tags are kept through bob's write");
    assert.deepEqual(names(await kept(alice, list)), ['a', 'b-renamed']);
    assert.equal((await alice.get(`servers/${shared.uuid}/`)).json.name, 'b-renamed');
    await renameDirectly(shared.uuid, 'b-direct');
    assert.deepEqual(names(await kept(alice, list)), ['a', 'b-direct']);
    // The ACL's rules change (LIST gone): the server is no longer alice's to see.
    await kept(alice, `servers/${shared.uuid}/`);
    assert.equal((await bob.put(`acls/${acl.uuid}/`, { rules: [{ permission: 'EDIT' }] })).status, 200);
    assert.deepEqual(names(await kept(alice, list)), ['a']);
    assert.equal((await alice.get(`servers/${shared.uuid}/`)).status, 404);
    assert.equal((await bob.put(`acls/${acl.uuid}/`, { rules: [{ permission: 'LIST' }] })).status, 200);
    assert.deepEqual(names(await kept(alice, list)), ['a', 'b-direct']);
    // The membership goes, then the grant itself.
    await kept(alice, `servers/${shared.uuid}/`);
    assert.equal((await bob.put(`tags/${tag.uuid}/`, { name: 'share', resources: [] })).status, 200);
    assert.deepEqual(names(await kept(alice, list)), ['a']);
    assert.equal((await alice.get(`servers/${shared.uuid}/`)).status, 404);
    assert.equal((await bob.put(`tags/${tag.uuid}/`, { name: 'share', resources: [shared.uuid] })).status, 200);
    assert.deepEqual(names(await kept(alice, list)), ['a', 'b-direct']);
    assert.equal((await bob.delete(`acls/${acl.uuid}/`)).status, 204);
    assert.deepEqual(names(await kept(alice, list)), ['a']);
    assert.equal((await alice.get(`servers/${shared.uuid}/`)).status, 404);
  });

  test('rows and memberships written without the API, then shared: in the next answer', async () => {
    const [alice, carol] = [await user(), await user()];
    await server(alice, { name: 'a' });
    const list = 'servers/?limit=0';
    assert.deepEqual(names(await kept(alice, list)), ['a']);
    // Carol's server and tag are made outside the API (an import, an operator command), then shared.
    const store = srv.services.store;
    const now = srv.clock.now();
    const [s, t] = ['srv', 'tag'].map((x) => `${x}-${carol.uuid}`);
    await store.transaction(async (tx) => {
      await store.resources.insert(tx, now, { kind: 'servers', uuid: s, owner: carol.uuid, body: { ...MINIMAL, name: 'c', status: 'stopped' } });
      await store.resources.insert(tx, now, { kind: 'tags', uuid: t, owner: carol.uuid, body: { name: 't' } });
      await store.resources.setTagMembers(tx, t, [{ kind: 'servers', uuid: s }]);
    });
    assert.deepEqual(names(await kept(alice, list)), ['a']);
    const acls = (await carol.post('acls/', { name: 'x', grantees: [alice.uuid], rules: [{ permission: 'LIST' }], tags: [t] })).json;
    assert.ok(acls.objects, JSON.stringify(acls));
    assert.deepEqual(names((await alice.get(list)).text), ['a', 'c']);
  });
});
