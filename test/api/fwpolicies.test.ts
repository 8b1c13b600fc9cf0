import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { expectError } from '../helpers/errors.js';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { fixture, golden, sameShape } from '../helpers/golden.js';
import { setState } from '../../src/resources/users/users.js';
import { assignVlans } from '../../src/resources/vlans/vlans.js';

type User = Client & { uuid: string; email: string };
let srv: TestServer;
let alice: User, bob: User;

before(async () => {
  srv = await startServer();
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

const TICK = 30_000;
const get = async (c: Client, uri: string) => (await c.get(uri)).json;
const auditOf = (uuid: string) => srv.services.store.db.selectFrom('audit_log').selectAll().where('uuid', '=', uuid).orderBy('seq').execute();
async function policy(c: Client, body: Record<string, unknown> = {}): Promise<any> {
  const res = await c.post('fwpolicies/', body);
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0];
}
/** A server with one public DHCP NIC using `policy`, as the recorded exchange makes it. */
async function firewalled(c: Client, policyUuid: string): Promise<any> {
  const body = golden('request_fwpolicy_server_attach');
  body.objects[0].nics[0].firewall_policy = policyUuid;
  const res = await c.post('servers/', body);
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0];
}
async function start(c: Client, server: { resource_uri: string }) {
  assert.equal((await c.post(`${server.resource_uri}action/?do=start`, {})).status, 202);
  await srv.advance(5_000);
}
/** When the propagation tick runs next (ms since the epoch). */
async function nextTick(): Promise<number> {
  const row = await srv.services.store.db
    .selectFrom('timers')
    .select('due_ms')
    .where('kind', '=', 'firewall.propagate')
    .where('state', '=', 'pending')
    .executeTakeFirstOrThrow();
  return Number(row.due_ms);
}
const nicFirewall = async (c: Client, server: { resource_uri: string }) => (await get(c, server.resource_uri)).runtime.nics[0].firewall;

describe('firewall policies as recorded', () => {
  test('create with rules: 201, rules normalised (host suffixes, nulls); blank policy from {objects:[{}]}', async () => {
    const res = await alice.post('fwpolicies/', golden('request_fwpolicy_create_full'));
    assert.equal(res.status, 201, res.text);
    sameShape(res.json, golden('response_fwpolicy_create_full'));
    assert.deepEqual(res.json.objects[0].rules, golden('response_fwpolicy_create_full').objects[0].rules);
    assert.equal(res.headers.location, `${srv.base}${res.json.objects[0].resource_uri}`);
    const blank = await alice.post('fwpolicies/', golden('request_fwpolicy_create_minimal'));
    assert.equal(blank.status, 201, blank.text);
    sameShape(blank.json, golden('response_fwpolicy_create_minimal'));
    assert.deepEqual([blank.json.objects[0].name, blank.json.objects[0].rules, blank.json.objects[0].servers], [null, [], []]);
    assert.deepEqual(
      (await auditOf(res.json.objects[0].uuid)).map((e) => [e.category, e.action]),
      [['Firewall policies', 'create']],
    );
  });

  test('list is the short form, detail full; get; schema; fields=; XML; filters', async () => {
    const c = await srv.user();
    const b = await policy(c, {});
    const a = await policy(c, { name: 'alpha', rules: [{ action: 'drop', comment: 'no 23', direction: 'out', dst_ip: '23.0.0.0/32', ip_proto: 'tcp' }] });
    const list = await c.get('fwpolicies/?limit=0');
    sameShape(list.json, golden('response_fwpolicy_list'));
    assert.deepEqual(
      list.json.objects.map((o: any) => o.uuid),
      [b.uuid, a.uuid],
    );
    const detail = await c.get('fwpolicies/detail/?limit=0');
    sameShape(detail.json, golden('response_fwpolicy_list_detail'));
    // libcloud's recording predates `tags`; everything else it shows is there.
    const { tags: _tags, ...withoutTags } = detail.json.objects[1];
    sameShape(withoutTags, fixture('fwpolicies_detail.json').objects[1]);
    // Rule values differ in type between recordings (ip_proto null or tcp): the rule shape is checked above.
    sameShape({ ...(await c.get(a.resource_uri)).json, rules: [] }, { ...golden('response_fwpolicy_get'), rules: [] });
    assert.deepEqual((await c.get('fwpolicies/schema/')).json, golden('response_fwpolicy_schema'));
    assert.deepEqual(Object.keys((await c.get('fwpolicies/detail/?fields=name,rules')).json.objects[0]).sort(), ['name', 'rules']);
    assert.deepEqual(
      (await c.get('fwpolicies/?name=alpha')).json.objects.map((o: any) => o.uuid),
      [a.uuid],
    );
    assert.match((await c.get(`${a.resource_uri}?format=xml`)).text, /<dst_ip>23\.0\.0\.0\/32<\/dst_ip>/);
    assert.deepEqual((await bob.get('fwpolicies/')).json.objects, []);
    assert.equal((await bob.get(a.resource_uri)).status, 404);
    expectError(await c.put('fwpolicies/', {}), 405, 'validation', null);
  });

  test('PUT replaces the rules as recorded; null rules empty the list; a bad rule names its index and field', async () => {
    const p = await policy(alice, golden('request_fwpolicy_create_full').objects[0]);
    const res = await alice.put(p.resource_uri, golden('request_fwpolicy_update'));
    assert.equal(res.status, 200, res.text);
    sameShape(res.json, golden('response_fwpolicy_update'));
    assert.equal(res.json.rules.length, 1);
    assert.deepEqual((await alice.put(p.resource_uri, { name: 'kept' })).json.rules, res.json.rules, 'absent rules stay');
    assert.deepEqual((await alice.put(p.resource_uri, { rules: null })).json.rules, []);
    expectError(
      await alice.put(p.resource_uri, {
        rules: [
          { action: 'accept', direction: 'in' },
          { action: 'maybe', direction: 'in' },
        ],
      }),
      400,
      'validation',
      'rules.1.action',
    );
    expectError(await alice.post('fwpolicies/', { rules: [{ direction: 'in' }] }), 400, 'validation', 'rules.0.action');
    expectError(await alice.post('fwpolicies/', { rules: 'all' }), 400, 'validation', 'rules');
    expectError(await alice.post('fwpolicies/', { name: 5 }), 400, 'validation', 'name');
    assert.deepEqual((await get(alice, p.resource_uri)).rules, [], 'a refused PUT changes nothing');
  });

  test('libcloud fixtures: a policy with and without rules as the driver creates them', async () => {
    for (const name of ['fwpolicies_create_no_rules.json', 'fwpolicies_create_with_rules.json']) {
      const want = fixture(name);
      const body = { objects: want.objects.map((o: any) => ({ name: o.name, rules: o.rules })) };
      const res = await alice.post('fwpolicies/', body);
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(
        res.json.objects.map((o: any) => o.rules),
        want.objects.map((o: any) => o.rules),
      );
    }
  });
});

describe('policies on servers', () => {
  test('a NIC names a policy as recorded; the policy lists the server; unknown or foreign policies are refused', async () => {
    const c = await srv.user();
    const p = await policy(c, { name: 'web' });
    const server = await firewalled(c, p.uuid);
    sameShape(server.nics[0], golden('response_fwpolicy_server_attach').objects[0].nics[0]);
    assert.deepEqual(server.nics[0].firewall_policy, { resource_uri: p.resource_uri, uuid: p.uuid });
    assert.deepEqual((await get(c, p.resource_uri)).servers, [{ resource_uri: server.resource_uri, uuid: server.uuid }]);
    const other = await policy(bob, { name: 'not yours' });
    const nic = (fw: string) => ({ nics: [{ firewall_policy: fw, ip_v4_conf: { conf: 'dhcp', ip: null }, model: 'virtio' }] });
    expectError(await c.put(server.resource_uri, nic(crypto.randomUUID())), 400, 'validation', 'nics');
    expectError(await c.put(server.resource_uri, nic(other.uuid)), 400, 'validation', 'nics');
    // Moved to no policy: the policy no longer lists the server.
    const cleared = await c.put(server.resource_uri, { nics: [{ ...server.nics[0], firewall_policy: null }] });
    assert.equal(cleared.status, 200, cleared.text);
    assert.deepEqual((await get(c, p.resource_uri)).servers, []);
  });

  test("another user's policy answers exactly as a missing one (no existence oracle); shared with LIST only, 403", async () => {
    const c = await srv.user();
    const theirs = await policy(bob, { name: 'not yours' });
    const missing = crypto.randomUUID();
    const nic = (fw: string) => ({ nics: [{ firewall_policy: fw, ip_v4_conf: { conf: 'dhcp', ip: null }, model: 'virtio' }] });
    const server = await c.post('servers/', { name: 's', cpu: 1000, mem: 536870912, vnc_password: 'x' });
    assert.equal(server.status, 201, server.text);
    const uri = server.json.objects[0].resource_uri;
    for (const send of [
      (fw: string) => c.put(uri, nic(fw)),
      (fw: string) => c.post('servers/', { name: 's', cpu: 1000, mem: 536870912, vnc_password: 'x', ...nic(fw) }),
    ]) {
      const foreign = await send(theirs.uuid);
      const unknown = await send(missing);
      expectError(foreign, 400, 'validation', 'nics');
      assert.deepEqual(foreign.json, JSON.parse(unknown.text.replaceAll(missing, theirs.uuid)));
    }
    // Once bob lets the caller see it (LIST, not ATTACH), the refusal may say why.
    const tag = (await bob.post('tags/', { name: 'fw' })).json.objects[0];
    assert.equal((await bob.put(theirs.resource_uri, { tags: [tag.uuid] })).status, 200);
    const acl = await bob.post('acls/', { grantees: [{ uuid: c.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: tag.uuid }] });
    assert.equal(acl.status, 201, acl.text);
    expectError(await c.put(uri, nic(theirs.uuid)), 403, 'permission', 'nics');
  });

  test('delete: 204 when its servers are stopped (their NICs show null after); 403 while one runs', async () => {
    const c = await srv.user();
    const p = await policy(c, { name: 'to delete' });
    const s1 = await firewalled(c, p.uuid);
    const s2 = await firewalled(c, p.uuid);
    await start(c, s2);
    expectError(await c.delete(p.resource_uri), 403, 'permission', null);
    assert.equal((await get(c, s1.resource_uri)).nics[0].firewall_policy.uuid, p.uuid, 'a refused delete changes nothing');
    assert.equal((await c.post(`${s2.resource_uri}action/?do=stop`, {})).status, 202);
    await srv.advance(5_000);
    const res = await c.delete(p.resource_uri);
    assert.equal(res.status, 204, res.text);
    assert.equal((await c.get(p.resource_uri)).status, 404);
    for (const s of [s1, s2]) assert.equal((await get(c, s.resource_uri)).nics[0].firewall_policy, null);
    await start(c, s1); // boots without the policy
    assert.equal(await nicFirewall(c, s1), undefined);
    assert.deepEqual(
      (await auditOf(p.uuid)).map((e) => e.action),
      ['create', 'delete'],
    );
  });

  test('a changed policy reaches a running server at the next 30 s tick, never sooner; a boot applies the current rules', async () => {
    const c = await srv.user();
    const p = await policy(c, { name: 'prop', rules: [{ action: 'accept', direction: 'in', ip_proto: 'tcp', dst_port: '22' }] });
    const server = await firewalled(c, p.uuid);
    await start(c, server);
    assert.deepEqual(await nicFirewall(c, server), { applied_version: 1, pending: false, policy: { resource_uri: p.resource_uri, uuid: p.uuid }, version: 1 });

    await srv.advance(TICK); // a tick has run: the next is up to 30 s away
    assert.equal((await c.put(p.resource_uri, { rules: [{ action: 'drop', direction: 'in', ip_proto: 'tcp', dst_port: '22' }] })).status, 200);
    assert.deepEqual(await nicFirewall(c, server), { applied_version: 1, pending: true, policy: { resource_uri: p.resource_uri, uuid: p.uuid }, version: 2 });
    const untilTick = (await nextTick()) - srv.clock.now().getTime();
    assert.ok(untilTick > 0 && untilTick <= TICK, String(untilTick));
    await srv.advance(untilTick - 1_000);
    assert.equal((await nicFirewall(c, server)).pending, true, 'not before the tick');
    // A change of name or meta is no new version.
    await c.put(p.resource_uri, { name: 'renamed', meta: { a: '1' } });
    await srv.advance(2_000);
    assert.deepEqual(await nicFirewall(c, server), { applied_version: 2, pending: false, policy: { resource_uri: p.resource_uri, uuid: p.uuid }, version: 2 });

    // A stopped server does not apply; when it boots it takes the current version.
    assert.equal((await c.post(`${server.resource_uri}action/?do=stop`, {})).status, 202);
    await srv.advance(5_000);
    await c.put(p.resource_uri, { rules: [] });
    await start(c, server);
    assert.deepEqual(await nicFirewall(c, server), { applied_version: 3, pending: false, policy: { resource_uri: p.resource_uri, uuid: p.uuid }, version: 3 });
  });

  test("the simulated network puts a booting guest's DHCP request through its policy", async () => {
    const c = await srv.user();
    const closed = await policy(c, { rules: [{ action: 'drop', direction: 'out', ip_proto: 'udp' }] });
    const open = await policy(c, { rules: [{ action: 'drop', direction: 'out', ip_proto: 'udp', dst_port: '53' }] });
    const [s1, s2] = [await firewalled(c, closed.uuid), await firewalled(c, open.uuid)];
    await start(c, s1);
    await start(c, s2);
    const ip = async (s: { resource_uri: string }) => (await get(c, s.resource_uri)).runtime.nics[0].ip_v4;
    assert.equal(await ip(s1), null, 'outbound UDP dropped: no DHCP lease');
    assert.ok((await ip(s2))?.uuid, 'DHCP gets through');
    // A guest account may still ask DHCP for an address (its level allows DHCP out).
    await setState(srv.services, c.email, 'GUEST');
    const s3 = await firewalled(c, open.uuid);
    await start(c, s3);
    assert.ok((await ip(s3))?.uuid);
  });

  test('private NICs carry no firewall runtime', async () => {
    const c = await srv.user();
    const p = await policy(c, { rules: [{ action: 'drop', direction: 'in', ip_proto: 'tcp', dst_port: '22' }] });
    const [vlan] = await srv.services.store.transaction((tx) => assignVlans(tx, srv.services, c.uuid, 1));
    // One public NIC and one private NIC (on the owner's VLAN), both naming the policy.
    const server = await firewalled(c, p.uuid);
    const nics = [...server.nics, { firewall_policy: p.uuid, model: 'virtio', vlan }];
    const put = await c.put(server.resource_uri, { ...server, nics });
    assert.equal(put.status, 200, put.text);
    const privateMac = put.json.nics.find((n: any) => n.vlan).mac;
    await start(c, server);
    const runtime = (await get(c, server.resource_uri)).runtime.nics as any[];
    const priv = runtime.find((n) => n.mac === privateMac);
    const pub = runtime.find((n) => n.mac !== privateMac);
    assert.equal(priv.interface_type, 'private');
    assert.ok(!('firewall' in priv), `a private NIC shows a firewall: ${JSON.stringify(priv)}`);
    assert.equal(pub.interface_type, 'public');
    assert.deepEqual(pub.firewall, { applied_version: 1, pending: false, policy: { resource_uri: p.resource_uri, uuid: p.uuid }, version: 1 });
  });
});

describe('sharing', () => {
  test('ACLs: LIST reads (no grantees/permissions shown), EDIT edits, ATTACH lets a server use it, DELETE deletes', async () => {
    const owner = await srv.user();
    const grantee = await srv.user();
    const p = await policy(owner, { name: 'shared' });
    const tag = (await owner.post('tags/', { name: 'fw' })).json.objects[0];
    assert.equal((await owner.put(p.resource_uri, { tags: [tag.uuid] })).status, 200);
    const acl = (await owner.post('acls/', { grantees: [{ uuid: grantee.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: tag.uuid }] })).json
      .objects[0];
    const seen = await grantee.get(p.resource_uri);
    assert.equal(seen.status, 200);
    assert.ok(!('grantees' in seen.json) && !('permissions' in seen.json));
    expectError(await grantee.put(p.resource_uri, { name: 'x' }), 403, 'permission', null);
    const body = golden('request_fwpolicy_server_attach');
    body.objects[0].nics[0].firewall_policy = p.uuid;
    expectError(await grantee.post('servers/', body), 403, 'permission', 'nics');
    const rules = ['LIST', 'EDIT', 'ATTACH', 'DELETE'].map((permission) => ({ permission }));
    assert.equal((await owner.put(acl.resource_uri, { rules })).status, 200);
    assert.equal((await grantee.put(p.resource_uri, { name: 'edited' })).status, 200);
    const theirs = await grantee.post('servers/', body);
    assert.equal(theirs.status, 201, theirs.text);
    assert.equal((await get(owner, p.resource_uri)).servers[0].uuid, theirs.json.objects[0].uuid);
    assert.equal((await grantee.delete(p.resource_uri)).status, 204);
    assert.equal((await get(grantee, theirs.json.objects[0].resource_uri)).nics[0].firewall_policy, null);
  });
});

describe('evaluate and restriction levels', () => {
  const recorded = () => golden('request_fwpolicy_create_full').objects[0];
  const ssh = (src_ip: string) => ({ direction: 'in', ip_proto: 'tcp', src_ip, src_port: 40000, dst_ip: '185.12.5.10', dst_port: 22 });
  const out = (ip_proto: string, dst_port: number | null) => ({
    direction: 'out',
    ip_proto,
    src_ip: '185.12.5.10',
    src_port: 40000,
    dst_ip: '8.8.4.4',
    dst_port,
  });

  test('do=evaluate: first matching rule decides, else accept; the answer names the rule, the version and the level', async () => {
    const c = await srv.user();
    const p = await policy(c, recorded());
    const ask = async (packet: Record<string, unknown>) => {
      const res = await c.post(`${p.resource_uri}action/?do=evaluate`, packet);
      assert.equal(res.status, 200, res.text);
      return res.json;
    };
    const fromOffice = await ask(ssh('172.66.32.7'));
    assert.deepEqual([fromOffice.verdict, fromOffice.rule, fromOffice.decided_by, fromOffice.level, fromOffice.version], ['accept', 1, 'policy', 'regular', 1]);
    assert.deepEqual(fromOffice.policy, { resource_uri: p.resource_uri, uuid: p.uuid });
    assert.deepEqual([(await ask(ssh('10.0.0.1'))).verdict, (await ask(ssh('10.0.0.1'))).rule], ['drop', 2]);
    assert.deepEqual([(await ask(out('tcp', 80))).verdict, (await ask(out('tcp', 80))).rule], ['accept', null]);
    const to23 = await ask({ ...out('tcp', 80), dst_ip: '23.0.0.0' });
    assert.deepEqual([to23.verdict, to23.rule], ['drop', 0]);
    await c.put(p.resource_uri, { rules: [] });
    assert.deepEqual([(await ask(ssh('10.0.0.1'))).verdict, (await ask(ssh('10.0.0.1'))).version], ['accept', 2]);
    // Bad packets are 400s on the field; another user's policy is 404; an unknown action is 400 on `do`.
    expectError(await c.post(`${p.resource_uri}action/?do=evaluate`, { ...ssh('10.0.0.1'), src_ip: 'nope' }), 400, 'validation', 'src_ip');
    expectError(await c.post(`${p.resource_uri}action/?do=evaluate`, { ...ssh('10.0.0.1'), direction: 'sideways' }), 400, 'validation', 'direction');
    assert.equal((await bob.post(`${p.resource_uri}action/?do=evaluate`, ssh('10.0.0.1'))).status, 404);
  });

  test('levels follow the account state at once: profile and evaluate agree; the policy is evaluated first', async () => {
    const c = await srv.user();
    const p = await policy(c, { rules: [{ action: 'drop', direction: 'out', ip_proto: 'tcp', dst_port: '443' }] });
    const ask = async (packet: Record<string, unknown>) => (await c.post(`${p.resource_uri}action/?do=evaluate`, packet)).json;
    assert.equal((await get(c, 'profile/')).network_restrictions, null);
    assert.deepEqual([(await ask(out('tcp', 22))).verdict, (await ask(out('tcp', 22))).level], ['accept', 'regular']);

    await setState(srv.services, c.email, 'TRIAL');
    assert.equal((await get(c, 'profile/')).network_restrictions, 'trial');
    const trial = await ask(out('tcp', 22));
    assert.deepEqual([trial.verdict, trial.decided_by, trial.level], ['drop', 'restriction', 'trial']);
    assert.equal((await ask(out('tcp', 8080))).verdict, 'accept');

    await setState(srv.services, c.email, 'GUEST');
    assert.equal((await get(c, 'profile/')).network_restrictions, 'guest');
    assert.deepEqual(
      [(await ask(out('tcp', 80))).verdict, (await ask(out('tcp', 8080))).verdict, (await ask(out('udp', 53))).verdict],
      ['accept', 'drop', 'accept'],
    );
    // The policy drops 443 before the level would allow it.
    const https = await ask(out('tcp', 443));
    assert.deepEqual([https.verdict, https.decided_by, https.rule], ['drop', 'policy', 0]);
    // Inbound traffic is the policy's alone.
    assert.equal((await ask({ ...out('tcp', 8080), direction: 'in' })).verdict, 'accept');

    await setState(srv.services, c.email, 'REGULAR');
    assert.equal((await ask(out('tcp', 8080))).verdict, 'accept');
    const broadcast = await ask({ ...out('udp', 9), dst_ip: '255.255.255.255' });
    assert.deepEqual([broadcast.verdict, broadcast.rate_limit], ['accept', { burst: 100, pps: 5 }]);
  });
});
