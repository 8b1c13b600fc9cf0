import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { fixture, golden, sameShape } from '../helpers/golden.js';
import { expectError } from '../helpers/errors.js';
import { newDrive, newServer } from '../helpers/seed.js';

/**
 * Availability groups (reference §5.1, §6.1): the simulator places running servers on `--sim-hosts`
 * hosts and drives on as many storage nodes; the API groups the caller's objects by what they share.
 * Also the location's own endpoints, `/locations/` and `/cloud_status/` (reference §19).
 */
type User = Client & { uuid: string };
const UUID = /^[0-9a-f-]{36}$/;

async function start(srv: TestServer, c: Client, uuid: string, avoid?: string[]) {
  const q = avoid ? `&avoid=${avoid.join(',')}` : '';
  const res = await c.request('POST', `servers/${uuid}/action/?do=start${q}`, { headers: { 'content-type': 'application/json' } });
  assert.equal(res.status, 202, res.text);
  await srv.advance(3_000);
}
const stop = async (srv: TestServer, c: Client, uuid: string) => {
  assert.equal((await c.request('POST', `servers/${uuid}/action/?do=stop`, { headers: { 'content-type': 'application/json' } })).status, 202);
  await srv.advance(3_000);
};
const sortedGroups = (groups: string[][]) => groups.map((g) => [...g].sort()).sort((a, b) => a[0].localeCompare(b[0]));

describe('availability groups on one host', () => {
  let srv: TestServer;
  let alice: User, bob: User;
  before(async () => {
    srv = await startServer({ 'sim-hosts': '1' });
    [alice, bob] = [await srv.user(), await srv.user()];
  });
  after(() => srv.close());

  test('no running servers: an empty list; running servers share the one host; stopped ones leave', async () => {
    assert.deepEqual((await alice.get('servers/availability_groups/')).json, []);
    const [a, b, c] = [await newServer(alice), await newServer(alice), await newServer(alice)];
    await start(srv, alice, a);
    await start(srv, alice, b);
    const res = await alice.get('servers/availability_groups/');
    assert.equal(res.status, 200);
    assert.match(res.headers['content-type'] ?? '', /^application\/json/);
    sameShape(res.json, fixture('servers_avail_groups.json'));
    assert.deepEqual(sortedGroups(res.json), [[a, b].sort()]);
    // One server's group includes itself; a stopped server is in none.
    assert.deepEqual([...(await alice.get(`servers/availability_groups/${a}/`)).json].sort(), [a, b].sort());
    assert.deepEqual((await alice.get(`servers/availability_groups/${c}/`)).json, []);
    await stop(srv, alice, b);
    assert.deepEqual((await alice.get('servers/availability_groups/')).json, [[a]]);
    // Another user's servers are not the caller's groups; their uuid is a 404 (no existence leak).
    assert.deepEqual((await bob.get('servers/availability_groups/')).json, []);
    expectError(await bob.get(`servers/availability_groups/${a}/`), 404, 'notexist', null);
  });

  test('drives share the one storage node; library drives and deleted drives are in none', async () => {
    const [d1, d2] = [await newDrive(alice), await newDrive(alice)];
    const res = await alice.get('drives/availability_groups/');
    assert.equal(res.status, 200);
    sameShape(res.json, fixture('drives_avail_groups.json'));
    assert.equal(res.json.length, 1);
    assert.ok([d1, d2].every((d) => res.json[0].includes(d)));
    assert.ok((await alice.get(`drives/availability_groups/${d1}/`)).json.includes(d2));
    assert.equal((await alice.delete(`drives/${d2}/`)).status, 204);
    assert.ok(!(await alice.get(`drives/availability_groups/${d1}/`)).json.includes(d2));
    const lib = (await alice.get('libdrives/?limit=1')).json.objects[0].uuid;
    assert.deepEqual((await alice.get(`drives/availability_groups/${lib}/`)).json, []);
  });

  test('bad input: a malformed uuid is a 404, a bad avoid a 400, other methods a 405', async () => {
    expectError(await alice.get('servers/availability_groups/not-a-uuid/'), 404, 'notexist', null);
    const s = await newServer(alice);
    const res = await alice.request('POST', `servers/${s}/action/?do=start&avoid=nope`, { headers: { 'content-type': 'application/json' } });
    expectError(res, 400, 'validation', 'avoid');
    assert.equal((await alice.get(`servers/${s}/`)).json.status, 'stopped');
    const post = await alice.request('POST', 'servers/availability_groups/', { body: {} });
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET');
  });

  test('XML: a list of lists', async () => {
    const res = await alice.get('servers/availability_groups/?format=xml');
    assert.equal(res.status, 200);
    assert.match(res.headers['content-type'] ?? '', /xml/);
  });
});

describe('availability groups on several hosts', () => {
  let srv: TestServer;
  let alice: User;
  before(async () => {
    srv = await startServer({ 'sim-hosts': '4' });
    alice = await srv.user();
  });
  after(() => srv.close());

  test('avoid puts a server on another host than the servers it names; every running server is in one group', async () => {
    const servers: string[] = [];
    for (let i = 0; i < 4; i++) {
      const s = await newServer(alice);
      await start(srv, alice, s, servers.length ? servers : undefined);
      servers.push(s);
    }
    // Four hosts and each start avoided every earlier server: four groups of one.
    const groups = (await alice.get('servers/availability_groups/')).json as string[][];
    assert.deepEqual(
      sortedGroups(groups),
      [...servers].sort().map((s) => [s]),
    );
    // A fifth server avoiding all four: no host is free, it runs anyway and shares one.
    const fifth = await newServer(alice);
    await start(srv, alice, fifth, servers);
    const all = (await alice.get('servers/availability_groups/')).json as string[][];
    assert.equal(all.length, 4);
    assert.deepEqual(all.flat().sort(), [...servers, fifth].sort());
    assert.ok(all.every((g) => g.every((u) => UUID.test(u))));
    assert.equal((await alice.get(`servers/availability_groups/${fifth}/`)).json.length, 2);
  });

  test('placement lives in the simulator table, not in the API body', async () => {
    const s = await newServer(alice);
    await start(srv, alice, s);
    const body = (await alice.get(`servers/${s}/`)).json;
    assert.ok(!JSON.stringify(body).includes('placement'));
    const row = await srv.services.store.db.selectFrom('sim_state').selectAll().where('kind', '=', 'placement').where('uuid', '=', s).executeTakeFirst();
    assert.ok(row);
    assert.ok(JSON.parse(row.state).at < 4);
  });
});

describe('the location', () => {
  let srv: TestServer;
  let alice: User;
  before(async () => {
    srv = await startServer({ location: 'FRA' });
    alice = await srv.user();
  });
  after(() => srv.close());

  test('GET /locations/: the configured location, in the recorded shape', async () => {
    const res = await alice.get('locations/?limit=0');
    assert.equal(res.status, 200);
    sameShape(res.json, golden('response_locations'));
    assert.equal(res.json.meta.total_count, 1);
    const [fra] = res.json.objects;
    assert.equal(fra.id, 'FRA');
    assert.equal(fra.display_name, 'Frankfurt, Germany');
    assert.equal(fra.country_code, 'DE');
    assert.equal(fra.api_endpoint, 'https://fra.cloudsigma.com/api/2.0/');
    assert.equal(fra.websocket_url, 'wss://direct.fra.cloudsigma.com/websocket');
    assert.equal((await srv.anon().get('locations/')).status, 401);
  });

  test('GET /cloud_status/: the feature flags the Go SDK reads', async () => {
    const res = await alice.get('cloud_status/');
    assert.equal(res.status, 200);
    for (const k of ['guest', 'host_availability_zones', 'remote_snapshots', 'signup', 'trial', 'vmware', 'vpc'])
      assert.equal(typeof res.json[k], 'boolean', k);
    assert.ok(Array.isArray(res.json.sso));
    assert.deepEqual(Object.keys(res.json.free_tier).sort(), ['dssd', 'mem']);
    assert.deepEqual(Object.keys(res.json.free_tier_monthly), ['tx']);
    assert.equal(res.json.signup, true);
  });
});
