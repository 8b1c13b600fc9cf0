import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { golden, sameShape } from '../helpers/golden.js';
import { newServer } from '../helpers/seed.js';
import { ApiError } from '../../src/core/errors.js';
import type { Tx } from '../../src/store/db.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { leaseAddress, releaseLeases } from '../../src/sim/network.js';
import { assertUsableStaticIp, assignIps, releaseIp, setServerStaticIps } from '../../src/resources/ips/ips.js';
import { parseIpPool, poolAddresses, poolSize } from '../../src/core/ip-pool.js';

type User = Client & { uuid: string; email: string };

/** Which addresses each server uses (`ip_servers`), as the tests inspect it. */
async function usesOf(t: Tx, servers: string[]): Promise<Map<string, { address: string; dynamic: boolean }[]>> {
  const rows = await t.selectFrom('ip_servers').select(['address', 'server_uuid', 'dynamic']).where('server_uuid', 'in', servers).orderBy('address').execute();
  const out = new Map<string, { address: string; dynamic: boolean }[]>();
  for (const r of rows) out.set(r.server_uuid, [...(out.get(r.server_uuid) ?? []), { address: r.address, dynamic: r.dynamic === 1 }]);
  return out;
}
let srv: TestServer;
let alice: User, bob: User;

before(async () => {
  srv = await startServer();
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

const tx = <T>(fn: (t: Tx) => Promise<T>) => srv.services.store.transaction(fn);
const assign = (u: User, count = 1, subscription?: number) => tx((t) => assignIps(t, srv.services, u.uuid, count, { subscription }));

/** A server of `owner`'s (only its owner matters here: the IP functions under test attach and lease). */
const server = (owner: User): Promise<string> => newServer(owner);

/** The ApiError a promise rejects with. */
async function failure(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ApiError, String(e));
    return e;
  }
  assert.fail('expected an ApiError');
}

/** Share a resource of alice's with `grantee` holding `rules`, through a fresh tag. */
async function share(kind: string, uuid: string, grantee: User, rules: string[]) {
  const tag = (await alice.post('tags/', { name: 'net' })).json.objects[0];
  const current = (await alice.get(`${kind}/${uuid}/`)).json.tags.map((t: { uuid: string }) => t.uuid);
  assert.equal((await alice.put(`${kind}/${uuid}/`, { tags: [...current, tag.uuid] })).status, 200);
  const acl = await alice.post('acls/', { grantees: [{ uuid: grantee.uuid }], rules: rules.map((permission) => ({ permission })), tags: [tag.uuid] });
  assert.equal(acl.status, 201, acl.text);
  return tag.uuid as string;
}

describe('IPs against the golden dumps', () => {
  test('list, detail, get, update and schema', async () => {
    const u = (await srv.user()) as User;
    const [address] = await tx((t) => assignIps(t, srv.services, u.uuid, 1, { subscription: 7273 }));
    assert.match(address, /^185\.12\.6\.\d+$/);

    const list = await u.get('ips/?limit=0');
    assert.equal(list.status, 200);
    sameShape(list.json, golden('response_ip_list'));
    assert.deepEqual(list.json.objects, [
      { owner: { resource_uri: `/api/2.0/user/${u.uuid}/`, uuid: u.uuid }, resource_uri: `/api/2.0/ips/${address}/`, server: null, uuid: address },
    ]);

    const detail = await u.get('ips/detail/?limit=0');
    sameShape(detail.json, golden('response_ip_list_detail'));

    // Everything but the address and owner is what the recorded service shows for its default pool.
    const got = await u.get(`ips/${address}/`);
    assert.equal(got.status, 200);
    const expected = golden('response_ip_get');
    const swap = (o: any) => ({
      ...o,
      owner: { resource_uri: `/api/2.0/user/${u.uuid}/`, uuid: u.uuid },
      resource_uri: `/api/2.0/ips/${address}/`,
      uuid: address,
    });
    assert.deepEqual(got.json, swap(expected));

    const req = golden('request_ip_update');
    const put = await u.put(`ips/${address}/`, req);
    assert.equal(put.status, 200);
    assert.deepEqual(put.json, swap(golden('response_ip_update')));

    const schema = await u.get('ips/schema/');
    assert.equal(schema.status, 200);
    assert.deepEqual(schema.json, golden('response_ip_schema'));
  });

  test('no POST or DELETE: 405 with Allow', async () => {
    const [address] = await assign(alice);
    const post = await alice.post('ips/', { uuid: '1.2.3.4' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET');
    assert.equal(post.json[0].error_type, 'validation');
    const del = await alice.delete(`ips/${address}/`);
    assert.equal(del.status, 405);
    assert.equal(del.headers.allow, 'GET,PUT');
    const bulk = await alice.request('DELETE', 'ips/', { body: { objects: [{ uuid: address }] } });
    assert.equal(bulk.status, 405);
    assert.equal((await alice.get(`ips/${address}/`)).status, 200);
  });
});

describe('IP objects', () => {
  test("PUT changes meta and tags only; read-only keys are ignored; others' IPs are 404", async () => {
    const [address] = await assign(alice);
    const tag = (await alice.post('tags/', { name: 'ip-tag' })).json.objects[0];
    const res = await alice.put(`ips/${address}/`, {
      meta: { name: 'web' },
      tags: [tag.uuid],
      gateway: '1.1.1.1',
      netmask: 8,
      nameservers: [],
      server: randomUUID(),
      subscription: { id: 1 },
      uuid: '9.9.9.9',
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      [res.json.meta, res.json.tags, res.json.gateway, res.json.netmask, res.json.nameservers.length, res.json.server, res.json.subscription, res.json.uuid],
      [{ name: 'web' }, [{ resource_uri: `/api/2.0/tags/${tag.uuid}/`, uuid: tag.uuid }], '185.12.6.1', 24, 3, null, null, address],
    );
    assert.equal(res.json.name, undefined, 'the name mirror stays hidden');
    const bad = await alice.put(`ips/${address}/`, { meta: { [`k${'x'.repeat(40)}`]: 'v' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.json[0].error_point, 'meta');

    assert.equal((await bob.get(`ips/${address}/`)).status, 404);
    assert.equal((await bob.put(`ips/${address}/`, { meta: {} })).status, 404);
    assert.equal((await alice.get('ips/10.9.9.9/')).status, 404);
    assert.equal((await alice.get('ips/not-an-ip/')).status, 404);
    assert.ok(!(await bob.get('ips/?limit=0')).json.objects.some((o: any) => o.uuid === address));
    const tagged = await alice.get(`tags/${tag.uuid}/ips/`);
    assert.deepEqual(
      tagged.json.objects.map((o: any) => o.uuid),
      [address],
    );
  });

  test('filters (uuid, tag, name = meta name) and paging', async () => {
    const u = (await srv.user()) as User;
    const addrs = await assign(u, 5);
    assert.equal(new Set(addrs).size, 5);
    const tag = (await u.post('tags/', { name: 't' })).json.objects[0];
    await u.put(`ips/${addrs[1]}/`, { meta: { name: 'Web Front' }, tags: [tag.uuid] });
    await u.put(`ips/${addrs[3]}/`, { meta: { name: 'db' }, tags: [tag.uuid] });
    const uuids = async (q: string) => (await u.get(`ips/?${q}`)).json.objects.map((o: any) => o.uuid);

    assert.deepEqual(await uuids(`uuid=${addrs[0]},${addrs[4]}`), [addrs[0], addrs[4]]);
    assert.deepEqual(await uuids(`tag=${tag.uuid}`), [addrs[1], addrs[3]]);
    assert.deepEqual(await uuids('name=db'), [addrs[3]]);
    assert.deepEqual(await uuids('name__contains=front'), [addrs[1]]);
    assert.deepEqual(await uuids(`tag=${tag.uuid}&name=db`), [addrs[3]]);
    // Replacing meta without a name drops it from the name filters.
    await u.put(`ips/${addrs[3]}/`, { meta: { role: 'db' } });
    assert.deepEqual(await uuids('name=db'), []);

    const page = await u.get('ips/?limit=2&offset=2');
    assert.deepEqual(page.json.meta, { limit: 2, offset: 2, total_count: 5 });
    assert.deepEqual(
      page.json.objects.map((o: any) => o.uuid),
      addrs.slice(2, 4),
    );
    const dflt = await u.get('ips/');
    assert.equal(dflt.json.meta.limit, 20);
    const fields = await u.get('ips/?fields=uuid,netmask&limit=1');
    assert.deepEqual(fields.json.objects, [{ netmask: 24, uuid: addrs[0] }]);
  });

  test('an IP shared with EDIT can be edited by the grantee; LIST only is 403', async () => {
    const [address] = await assign(alice);
    const carol = (await srv.user()) as User;
    await share('ips', address, bob, ['LIST', 'EDIT']);
    await share('ips', address, carol, ['LIST']);
    const seen = await bob.get(`ips/${address}/`);
    assert.equal(seen.status, 200);
    assert.deepEqual([seen.json.permissions, seen.json.grantees], [['EDIT', 'LIST'], []]);
    assert.equal((await bob.put(`ips/${address}/`, { meta: { by: 'bob' } })).status, 200);
    const denied = await carol.put(`ips/${address}/`, { meta: { by: 'carol' } });
    assert.equal(denied.status, 403);
    assert.equal(denied.json[0].error_type, 'permission');
    assert.deepEqual((await alice.get(`ips/${address}/`)).json.meta, { by: 'bob' });
  });
});

describe('static IPs and the server relation', () => {
  test('assertUsableStaticIp: own IP, unknown address 400, an unshared foreign one the same 400, ATTACH through an ACL, in use elsewhere 403', async () => {
    const [mine] = await assign(alice);
    const [theirs] = await assign(bob);
    const s1 = await server(alice);
    const s2 = await server(alice);
    await tx((t) => assertUsableStaticIp(t, srv.services, alice.uuid, mine, { point: 'nics', server: s1 }));
    await tx((t) => assertUsableStaticIp(t, srv.services, alice.uuid, mine));

    for (const address of ['185.12.6.250', '10.1.2.3']) {
      const e = await failure(tx((t) => assertUsableStaticIp(t, srv.services, alice.uuid, address, { point: 'nics' })));
      assert.deepEqual([e.status, e.type, e.point], [400, 'validation', 'nics']);
    }
    const malformed = await failure(tx((t) => assertUsableStaticIp(t, srv.services, alice.uuid, '1.2.3', { point: 'nics' })));
    assert.deepEqual([malformed.status, malformed.point], [400, 'nics']);
    const foreign = await failure(tx((t) => assertUsableStaticIp(t, srv.services, alice.uuid, theirs, { point: 'nics' })));
    const unknown = await failure(tx((t) => assertUsableStaticIp(t, srv.services, alice.uuid, '185.12.6.250', { point: 'nics' })));
    assert.deepEqual([foreign.status, foreign.type, foreign.point], [400, 'validation', 'nics']);
    assert.equal(foreign.message, unknown.message.replace('185.12.6.250', theirs));

    // ATTACH through an ACL lets bob use alice's IP; LIST alone does not.
    const [lent] = await assign(alice);
    await share('ips', lent, bob, ['LIST']);
    assert.equal((await failure(tx((t) => assertUsableStaticIp(t, srv.services, bob.uuid, lent)))).status, 403);
    await share('ips', lent, bob, ['ATTACH']);
    await tx((t) => assertUsableStaticIp(t, srv.services, bob.uuid, lent, { server: null }));

    // In use by s1: fine for s1 itself, 403 for s2.
    await tx((t) => setServerStaticIps(t, s1, [mine]));
    await tx((t) => assertUsableStaticIp(t, srv.services, alice.uuid, mine, { server: s1 }));
    const busy = await failure(tx((t) => assertUsableStaticIp(t, srv.services, alice.uuid, mine, { point: 'nics', server: s2 })));
    assert.deepEqual([busy.status, busy.point], [403, 'nics']);
    const shown = await alice.get(`ips/${mine}/`);
    assert.deepEqual(shown.json.server, { resource_uri: `/api/2.0/servers/${s1}/`, uuid: s1 });
    assert.deepEqual((await alice.get(`ips/?uuid=${mine}`)).json.objects[0].server, { resource_uri: `/api/2.0/servers/${s1}/`, uuid: s1 });
    const released = await failure(tx((t) => releaseIp(t, srv.services, mine)));
    assert.equal(released.status, 403, 'an IP in use cannot be taken back');

    await tx((t) => setServerStaticIps(t, s1, []));
    assert.equal((await alice.get(`ips/${mine}/`)).json.server, null);
    await tx((t) => assertUsableStaticIp(t, srv.services, alice.uuid, mine, { server: s2 }));
  });

  test("a NIC's static IP of another user answers exactly as an address nobody holds (no existence oracle)", async () => {
    const [theirs] = await assign(bob);
    const nobodys = '185.12.6.251';
    const s = await server(alice);
    const nic = (ip: string) => ({ nics: [{ ip_v4_conf: { conf: 'static', ip }, model: 'virtio' }] });
    const foreign = await alice.put(`servers/${s}/`, nic(theirs));
    const unknown = await alice.put(`servers/${s}/`, nic(nobodys));
    assert.equal(foreign.status, 400, foreign.text);
    assert.equal(foreign.json[0].error_type, 'validation');
    assert.equal(foreign.json[0].error_point, 'nics');
    assert.deepEqual(foreign.json, JSON.parse(unknown.text.replaceAll(nobodys, theirs)));
    // Alice's own IP is fine.
    const [mine] = await assign(alice);
    assert.equal((await alice.put(`servers/${s}/`, nic(mine))).status, 200);
  });

  test('setServerStaticIps replaces a server set; a stop of the hypervisor frees its leases', async () => {
    const [a, b, c] = await assign(alice, 3);
    const s = await server(alice);
    await tx((t) => setServerStaticIps(t, s, [a, b, a]));
    assert.deepEqual(
      (await tx((t) => usesOf(t, [s]))).get(s),
      [a, b].sort().map((address) => ({ address, dynamic: false })),
    );
    await tx((t) => setServerStaticIps(t, s, [c]));
    const now = await tx((t) => usesOf(t, [s, randomUUID()]));
    assert.deepEqual(now.get(s), [{ address: c, dynamic: false }]);
    assert.equal(now.size, 1);
    const leased = await tx(async (t) => (await leaseAddress(t, srv.services, s))!);
    assert.equal((await tx((t) => usesOf(t, [s]))).get(s)!.length, 2);
    await tx(async (t) => {
      await setServerStaticIps(t, s, []);
      await releaseLeases(t, srv.services, s);
    });
    assert.equal((await tx((t) => usesOf(t, [s]))).size, 0);
    assert.equal((await alice.get(`ips/${leased}/`)).status, 404);
    assert.equal((await alice.get(`ips/${c}/`)).json.server, null);
  });
});

describe('DHCP leases', () => {
  test("a lease shows in the server owner's list without subscription and goes at release", async () => {
    const u = (await srv.user()) as User;
    const [owned] = await tx((t) => assignIps(t, srv.services, u.uuid, 1, { subscription: 5 }));
    const s = await server(u);
    const address = await tx(async (t) => (await leaseAddress(t, srv.services, s))!);
    assert.notEqual(address, owned);

    const list = (await u.get('ips/detail/?limit=0')).json;
    assert.equal(list.meta.total_count, 2);
    const lease = list.objects.find((o: any) => o.uuid === address);
    assert.deepEqual(
      [lease.owner, lease.subscription, lease.server, lease.gateway, lease.netmask, lease.permissions],
      [null, null, { resource_uri: `/api/2.0/servers/${s}/`, uuid: s }, '185.12.6.1', 24, []],
    );
    const short = (await u.get(`ips/?uuid=${address}`)).json.objects[0];
    assert.deepEqual(Object.keys(short).sort(), ['owner', 'resource_uri', 'server', 'uuid']);
    assert.equal(list.objects.find((o: any) => o.uuid === owned).subscription.id, 5);
    assert.equal((await u.get(`ips/${address}/`)).status, 200);
    // The lease is the pool's: visible to the server owner, not editable, invisible to others.
    assert.equal((await u.put(`ips/${address}/`, { meta: { a: 'b' } })).status, 403);
    assert.equal((await bob.get(`ips/${address}/`)).status, 404);
    // A lease is not an IP anyone may configure statically.
    assert.equal((await failure(tx((t) => assertUsableStaticIp(t, srv.services, u.uuid, address)))).status, 400);

    // A second lease never hands out an address in use.
    const dave = (await srv.user()) as User;
    const s2 = await server(dave);
    const other = await tx(async (t) => (await leaseAddress(t, srv.services, s2))!);
    assert.ok(![address, owned].includes(other));
    assert.deepEqual(
      (await dave.get('ips/?limit=0')).json.objects.map((o: any) => o.uuid),
      [other],
    );

    assert.deepEqual(await tx((t) => releaseLeases(t, srv.services, s)), [address]);
    assert.deepEqual(await tx((t) => releaseLeases(t, srv.services, s)), []);
    assert.equal((await u.get(`ips/${address}/`)).status, 404);
    assert.deepEqual(
      (await u.get('ips/?limit=0')).json.objects.map((o: any) => o.uuid),
      [owned],
    );
    await tx((t) => releaseLeases(t, srv.services, s2));
  });

  test('concurrent assignments and leases never hand out one address twice', async () => {
    const users = [await srv.user(), await srv.user(), await srv.user()] as User[];
    const servers = await Promise.all(users.map((u) => server(u)));
    const got = await Promise.all([
      ...users.map((u) => assign(u, 3)),
      ...servers.map((s) => tx(async (t) => (await leaseAddress(t, srv.services, s))!).then((a) => [a])),
    ]);
    const all = got.flat();
    assert.equal(all.length, 12);
    assert.equal(new Set(all).size, 12);
    for (const s of servers) await tx((t) => releaseLeases(t, srv.services, s));
  });
});

describe('a small pool', () => {
  test('exhaustion: assignments are all or nothing, a lease with no free address is 503', async () => {
    const small = await startServer({ 'ip-pool': '10.0.0.0/29@10.0.0.6', nameservers: '10.0.0.53' });
    try {
      assert.deepEqual([...poolAddresses(small.services.config.ipPool)], ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4', '10.0.0.5']);
      const u = await small.user();
      const run = <T>(fn: (t: Tx) => Promise<T>) => small.services.store.transaction(fn);
      const too = await failure(run((t) => assignIps(t, small.services, u.uuid, 6)));
      assert.equal(too.status, 503);
      assert.equal((await u.get('ips/')).json.meta.total_count, 0, 'nothing was assigned');
      const got = await run((t) => assignIps(t, small.services, u.uuid, 4));
      assert.deepEqual(got, ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4']);
      const ip = (await u.get('ips/10.0.0.2/')).json;
      assert.deepEqual([ip.gateway, ip.netmask, ip.nameservers], ['10.0.0.6', 29, ['10.0.0.53']]);
      const s = await newServer(u, { name: 's' });
      assert.equal(await run((t) => leaseAddress(t, small.services, s)), '10.0.0.5');
      // An exhausted pool leaves the NIC without an address (as a real DHCP server would).
      assert.equal(await run((t) => leaseAddress(t, small.services, s)), null);
      // Released addresses come back to the pool.
      await run((t) => releaseIp(t, small.services, '10.0.0.3'));
      assert.equal(await run((t) => leaseAddress(t, small.services, s)), '10.0.0.3');
      assert.deepEqual((await run((t) => releaseLeases(t, small.services, s))).sort(), ['10.0.0.3', '10.0.0.5']);
    } finally {
      await small.close();
    }
  });
});

describe('pool settings', () => {
  test('defaults: 185.12.6.0/24 with gateway .1 and the recorded nameservers', () => {
    const c = loadConfig({}, {});
    assert.deepEqual(c.ipPool, [{ cidr: '185.12.6.0/24', network: 3104572928, prefix: 24, gateway: '185.12.6.1' }]);
    assert.deepEqual(c.nameservers, ['69.194.139.62', '178.22.66.167', '178.22.71.56']);
    assert.equal(poolSize(c.ipPool), 253);
    const first = poolAddresses(c.ipPool).next().value;
    assert.equal(first, '185.12.6.2');
  });

  test('several blocks, gateways, environment variables; bad values stop start-up', () => {
    const c = loadConfig({}, { STRATUS_IP_POOL: '10.0.0.0/24, 10.0.1.0/30@10.0.1.2', STRATUS_NAMESERVERS: '1.1.1.1' });
    assert.deepEqual(
      c.ipPool.map((b) => [b.cidr, b.gateway, b.prefix]),
      [
        ['10.0.0.0/24', '10.0.0.1', 24],
        ['10.0.1.0/30', '10.0.1.2', 30],
      ],
    );
    assert.deepEqual([...poolAddresses(parseIpPool('10.0.1.0/30@10.0.1.2'))], ['10.0.1.1']);
    assert.deepEqual(c.nameservers, ['1.1.1.1']);
    assert.equal(loadConfig({ 'ip-pool': '192.168.0.0/16' }, { STRATUS_IP_POOL: 'junk' }).ipPool[0].prefix, 16, 'flags win');
    for (const bad of [
      '',
      'junk',
      '10.0.0.1/24',
      '10.0.0.0/31',
      '10.0.0.0/7',
      '10.0.0.0/24@10.0.1.1',
      '10.0.0.0/24@10.0.0.255',
      '10.0.0.0/24,10.0.0.128/25',
      '300.0.0.0/24',
    ])
      assert.throws(
        () => loadConfig({ 'ip-pool': bad }, {}),
        (e: unknown) => e instanceof ConfigError && /ip-pool/.test((e as Error).message),
        bad,
      );
    assert.throws(
      () => loadConfig({ nameservers: '1.1.1.1,dns.example' }, {}),
      (e: unknown) => e instanceof ConfigError && /nameservers/.test((e as Error).message),
    );
  });
});
