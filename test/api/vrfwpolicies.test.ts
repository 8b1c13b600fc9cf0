import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { expectError } from '../helpers/errors.js';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { golden, sameShape } from '../helpers/golden.js';
import { appliedOf } from '../../src/resources/vrfwpolicies/router.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { timerHandlers } from '../../src/registry.js';

type User = Client & { uuid: string; email: string };
let srv: TestServer;
let alice: User, bob: User;

before(async () => {
  srv = await startServer();
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

/** A recorded exchange of the virtual-router family (test/data/golden/dumps/vrouters/). */
const rec = (name: string) => golden(`vrouters/${name}`);
/** `vrouter.firewall`, the default delay of a router job. */
const DELAY = 5_000;
/**
 * The test clock also follows real time: "before the delay" is checked this long before it ends, so a slow
 * machine does not reach the end by itself.
 */
const EARLY = 2_000;
const LAN = '9b183b90-84cf-46fb-b3d8-12d2e5383eae';
const LAN_URI = `/api/2.0/lans/${LAN}/`;

const get = async (c: Client, uri: string) => (await c.get(uri)).json;
const applied = (uuid: string) => appliedOf(srv.services, srv.services.store.db, uuid);
const auditOf = (uuid: string) => srv.services.store.db.selectFrom('audit_log').selectAll().where('uuid', '=', uuid).orderBy('seq').execute();
const actionsOf = async (uuid: string) => (await auditOf(uuid)).map((e) => e.action);
const jobState = async (c: Client, job: { resource_uri: string }) => (await get(c, job.resource_uri)).state;

/** A filter as the recorded requests send it (`*_op` as "="). */
const filter = (order: number, extra: Record<string, unknown> = {}) => ({
  action: 'deny',
  dst: `10.0.1.${order}`,
  dst_addr_op: '=',
  dst_port: '22',
  dst_port_op: '=',
  icmp_type: 'Echo reply',
  log: false,
  order,
  protocol: 'tcp',
  src: `10.0.2.${order}`,
  src_addr_op: '=',
  src_port: '',
  src_port_op: '=',
  ...extra,
});

async function policy(c: Client, body: Record<string, unknown> = {}): Promise<any> {
  const res = await c.post('vrfwpolicies/', { active: false, filters: [], lan_interface: LAN, name: 'p', order: 1, ...body });
  assert.equal(res.status, 202, res.text);
  return res.json.objects[0];
}
/** A policy whose create job has ended. */
async function settled(c: Client, body: Record<string, unknown> = {}): Promise<any> {
  const p = await policy(c, body);
  await srv.advance(DELAY);
  return get(c, p.resource_uri);
}
/** The rule keys of a filter as the router keeps them, for comparisons. */
const ruleOf = (f: any) => ({ action: f.action, dst: f.dst, dst_port: f.dst_port, order: f.order, protocol: f.protocol, src: f.src });

describe('virtual-router firewall policies as recorded', () => {
  test('schema/ of both kinds exactly as recorded', async () => {
    assert.deepEqual((await alice.get('vrfwpolicies/schema/')).json, rec('response_vrfwpolicy_schema'));
    assert.deepEqual((await alice.get('vrfwfilters/schema/')).json, rec('response_vrfwfilter_schema'));
  });

  test('create as recorded: 202 {objects} with a job, the LAN as a reference, no owner; the job ends after the delay', async () => {
    const res = await alice.post('vrfwpolicies/', rec('request_vrfwpolicy_create'));
    assert.equal(res.status, 202, res.text);
    sameShape(res.json, rec('response_vrfwpolicy_create'));
    const p = res.json.objects[0];
    assert.deepEqual(p.lan_interface, { resource_uri: LAN_URI, uuid: LAN });
    assert.deepEqual([p.active, p.filters, p.name, p.order, p.upstream_interface], [false, [], 'Policy two', 2, null]);
    assert.equal(p.jobs.length, 1);
    const job = await get(alice, p.jobs[0].resource_uri);
    assert.deepEqual([job.state, job.operation, job.resources], ['started', 'vrfwpolicy_create', [p.resource_uri]]);
    await srv.advance(DELAY - EARLY);
    assert.equal(await jobState(alice, p.jobs[0]), 'started');
    await srv.advance(EARLY);
    assert.equal(await jobState(alice, p.jobs[0]), 'success');
    assert.equal(await applied(p.uuid), null, 'an inactive policy applies nothing');
    assert.deepEqual(await actionsOf(p.uuid), ['create', 'firewall_removed']);
    const [create] = await auditOf(p.uuid);
    assert.deepEqual(
      [create.category, create.actor_uuid, JSON.parse(create.details)],
      ['VRouter firewall', alice.uuid, rec('request_vrfwpolicy_create').objects[0]],
    );
  });

  test('PUT as recorded (activate with a filter): 202 with the filter nested and a new job; the router applies it after the delay', async () => {
    const p = await settled(alice, { name: 'before' });
    const res = await alice.put(p.resource_uri, rec('request_vrfwpolicy_update'));
    assert.equal(res.status, 202, res.text);
    sameShape(res.json, rec('response_vrfwpolicy_update'));
    const recorded = rec('response_vrfwpolicy_update').filters[0];
    const { uuid: _u, resource_uri: _r, jobs: _j, ...values } = res.json.filters[0];
    const { uuid: _u2, resource_uri: _r2, jobs: _j2, ...recordedValues } = recorded;
    assert.deepEqual(values, recordedValues, '"=" operators answered as true, unset icmp_type null');
    assert.deepEqual(res.json.filters[0].resource_uri, { resource_uri: `/api/2.0/vrfwfilters/${res.json.filters[0].uuid}/`, uuid: res.json.filters[0].uuid });
    assert.deepEqual([res.json.active, res.json.name, res.json.jobs.length], [true, 'Policy one', 2]);
    const job = res.json.jobs[1];
    assert.equal((await get(alice, job.resource_uri)).operation, 'vrfwpolicy_update');
    // The router has not heard of it yet.
    assert.equal(await applied(p.uuid), null);
    await srv.advance(DELAY - EARLY);
    assert.equal(await applied(p.uuid), null);
    assert.equal(await jobState(alice, job), 'started');
    await srv.advance(EARLY);
    const now = await applied(p.uuid);
    assert.deepEqual(
      now?.filters.map((f) => [f.action, f.src, f.dst, f.dst_port, f.src_addr_op]),
      [['deny', '192.168.1.10', '192.168.2.108', '22', true]],
    );
    assert.deepEqual([now?.lan_interface, now?.order], [LAN, 1]);
    assert.equal(await jobState(alice, job), 'success');
    assert.deepEqual(await actionsOf(p.uuid), ['create', 'firewall_removed', 'update', 'firewall_applied']);
    assert.deepEqual(await actionsOf(res.json.filters[0].uuid), ['create']);
  });

  test('GET as recorded: filters in full, in order, resource_uri nested; each filter at its own URI', async () => {
    const shuffled = [3, 1, 8, 2, 7, 4, 6, 5].map((n) => filter(n));
    const p = await settled(alice, { active: true, filters: shuffled, name: 'WEB POLICY FILTERS ACTIVATE' });
    await srv.advance(DELAY);
    sameShape(p, rec('response_vrfwpolicy_get'));
    assert.deepEqual(
      p.filters.map((f: any) => f.order),
      [1, 2, 3, 4, 5, 6, 7, 8],
    );
    assert.deepEqual(
      p.filters.map((f: any) => f.dst),
      [1, 2, 3, 4, 5, 6, 7, 8].map((n) => `10.0.1.${n}`),
    );
    for (const f of p.filters) assert.deepEqual(f.resource_uri, { resource_uri: `/api/2.0/vrfwfilters/${f.uuid}/`, uuid: f.uuid });
    const one = await alice.get(p.filters[0].resource_uri.resource_uri);
    assert.equal(one.status, 200, one.text);
    const { jobs: _jobs, ...recorded } = rec('response_vrfwfilter_get');
    const { jobs, ...mine } = one.json;
    sameShape(mine, { ...recorded, icmp_type: 'Echo reply' });
    assert.deepEqual(jobs, [], 'filters made with their policy carry no job of their own (recorded)');
    // The router tries them in the same order.
    assert.deepEqual(
      (await applied(p.uuid))?.filters.map((f) => f.order),
      [1, 2, 3, 4, 5, 6, 7, 8],
    );
  });

  test('safe update as recorded: what GET shows PUT back (booleans, nested references, jobs) on an inactive policy: 200, no job, filters kept', async () => {
    const p = await settled(alice, { filters: [filter(1), filter(2)], name: 'Policy one' });
    const before = await get(alice, p.resource_uri);
    const res = await alice.put(p.resource_uri, { ...before, name: 'WEB POLICY' });
    assert.equal(res.status, 200, res.text);
    sameShape(res.json, rec('response_vrfwpolicy_safe_update_get'));
    assert.equal(res.json.name, 'WEB POLICY');
    assert.deepEqual(res.json.jobs, before.jobs, 'no new job: the router is not involved');
    assert.deepEqual(
      res.json.filters.map((f: any) => f.uuid),
      before.filters.map((f: any) => f.uuid),
      'filters named by their resource_uri are the same filters',
    );
    // The recorded PUT: new filters (no uuids), the LAN as {resource_uri, uuid}, read-only keys sent back.
    const body = rec('request_vrfwpolicy_safe_update_valid_order');
    const again = await alice.put(p.resource_uri, body);
    assert.equal(again.status, 200, again.text);
    // The recorded answer shows its filters as Python object names (a fault of the real service); the rest is its shape.
    sameShape({ ...again.json, filters: [] }, { ...rec('response_vrfwpolicy_safe_update_valid_order'), filters: [] });
    sameShape(again.json.filters, rec('response_vrfwpolicy_safe_update_get').filters);
    assert.deepEqual(again.json.lan_interface, body.lan_interface);
    assert.deepEqual(
      again.json.filters.map((f: any) => [f.order, f.src, f.icmp_type, f.dst_addr_op]),
      [
        [1, '10.0.2.1', 'Echo reply', true],
        [2, '10.0.2.2', 'Echo reply', true],
      ],
    );
    assert.equal(again.json.jobs.length, 1);
    for (const old of before.filters) assert.equal((await alice.get(old.resource_uri.resource_uri)).status, 404, 'replaced filters are deleted');
    assert.deepEqual(await actionsOf(before.filters[0].uuid), ['create', 'delete']);
    assert.deepEqual(await actionsOf(p.uuid), ['create', 'firewall_removed', 'update', 'update']);
  });

  test('enable / disable as recorded: 202 with a job; active at once, the router follows after the delay', async () => {
    const p = await settled(alice, { filters: [filter(1), filter(2)] });
    const on = await alice.post(`${p.resource_uri}action/?do=enable`, {});
    assert.equal(on.status, 202, on.text);
    sameShape(on.json, rec('response_vrfwpolicy_enable'));
    assert.deepEqual([on.json.action, on.json.result, on.json.uuid], ['enable', 'success', p.uuid]);
    assert.equal((await get(alice, p.resource_uri)).active, true);
    assert.deepEqual(
      (await get(alice, p.resource_uri)).jobs.map((j: any) => j.uuid),
      [p.jobs[0].uuid, on.json.job.uuid],
    );
    assert.equal((await get(alice, on.json.job.resource_uri)).operation, 'vrfwpolicy_enable');
    assert.equal(await applied(p.uuid), null);
    await srv.advance(DELAY / 2);
    const progress = (await get(alice, on.json.job.resource_uri)).data.progress;
    assert.ok(progress >= 50 && progress < 100, `progress ${progress}`);
    assert.equal(await applied(p.uuid), null);
    await srv.advance(DELAY / 2);
    assert.deepEqual((await applied(p.uuid))?.filters.map(ruleOf), p.filters.map(ruleOf));
    assert.equal(await jobState(alice, on.json.job), 'success');

    const off = await alice.post(`${p.resource_uri}action/?do=disable`);
    assert.equal(off.status, 202, off.text);
    sameShape(off.json, rec('response_vrfwpolicy_disable'));
    assert.equal((await get(alice, p.resource_uri)).active, false);
    await srv.advance(DELAY - EARLY);
    assert.equal((await applied(p.uuid))?.filters.length, 2, 'still enforced until the job ends');
    await srv.advance(EARLY);
    assert.equal(await applied(p.uuid), null);
    assert.deepEqual(await actionsOf(p.uuid), ['create', 'firewall_removed', 'enable', 'firewall_applied', 'disable', 'firewall_removed']);
  });

  test('DELETE as recorded: 202 {job, uuid}; gone at once with its filters; the router drops it when the job ends', async () => {
    const p = await settled(alice, { active: true, filters: [filter(1)] });
    assert.equal((await applied(p.uuid))?.filters.length, 1);
    const res = await alice.delete(p.resource_uri);
    assert.equal(res.status, 202, res.text);
    sameShape(res.json, rec('response_vrfwpolicy_delete'));
    assert.equal(res.json.uuid, p.uuid);
    const job = await get(alice, res.json.job.resource_uri);
    assert.deepEqual([job.operation, job.state, job.resources], ['vrfwpolicy_delete', 'started', [p.resource_uri]]);
    assert.equal((await alice.get(p.resource_uri)).status, 404);
    assert.equal((await alice.get(p.filters[0].resource_uri.resource_uri)).status, 404);
    assert.equal((await alice.delete(p.resource_uri)).status, 404);
    assert.equal((await applied(p.uuid))?.filters.length, 1, 'the router still enforces it while the job runs');
    await srv.advance(DELAY);
    assert.equal(await applied(p.uuid), null);
    assert.equal(await jobState(alice, res.json.job), 'success');
    assert.deepEqual(await actionsOf(p.uuid), ['create', 'firewall_applied', 'delete', 'firewall_removed']);
    assert.deepEqual(await actionsOf(p.filters[0].uuid), ['create', 'delete']);
  });
});

describe('virtual-router firewall filters as recorded', () => {
  test('create 202 {objects} with the policy and a job; get without the policy; logging on and off; delete 202 {job, uuid}', async () => {
    const p = await settled(alice);
    const body = rec('request_vrfwfilter_create');
    body.objects[0].policy = p.uuid;
    const res = await alice.post('vrfwfilters/', body);
    assert.equal(res.status, 202, res.text);
    sameShape(res.json, rec('response_vrfwfilter_create'));
    const f = res.json.objects[0];
    const { jobs: _j, resource_uri: _r, uuid: _u, ...values } = f;
    const { jobs: _j2, resource_uri: _r2, uuid: _u2, ...recorded } = rec('response_vrfwfilter_create').objects[0];
    assert.deepEqual(values, { ...recorded, policy: p.uuid });
    const got = await alice.get(f.resource_uri);
    assert.equal(got.status, 200, got.text);
    sameShape(got.json, rec('response_vrfwfilter_get'));
    assert.deepEqual(got.json.jobs, f.jobs);
    assert.equal((await get(alice, f.jobs[0].resource_uri)).operation, 'vrfwfilter_create');
    const pol = await get(alice, p.resource_uri);
    assert.deepEqual(
      pol.filters.map((x: any) => x.uuid),
      [f.uuid],
    );
    assert.ok(
      pol.jobs.some((j: any) => j.uuid === f.jobs[0].uuid),
      'the policy lists the job too',
    );

    const on = await alice.post(`${f.resource_uri}action/?do=enable_logging`, {});
    assert.equal(on.status, 202, on.text);
    assert.deepEqual(on.json, { ...rec('response_vrfwfilter_enable_logging'), uuid: f.uuid });
    assert.equal((await get(alice, f.resource_uri)).log, true);
    const off = await alice.post(`${f.resource_uri}action/?do=disable_logging`, {});
    assert.deepEqual([off.status, off.json], [202, { ...rec('response_vrfwfilter_disable_logging'), uuid: f.uuid }]);
    assert.equal((await get(alice, f.resource_uri)).log, false);

    const del = await alice.delete(f.resource_uri);
    assert.equal(del.status, 202, del.text);
    sameShape(del.json, rec('response_vrfwfilter_delete'));
    assert.equal(del.json.uuid, f.uuid);
    assert.equal((await get(alice, del.json.job.resource_uri)).operation, 'vrfwfilter_delete');
    assert.equal((await alice.get(f.resource_uri)).status, 404);
    assert.deepEqual((await get(alice, p.resource_uri)).filters, []);
    assert.deepEqual(await actionsOf(f.uuid), ['create', 'enable_logging', 'disable_logging', 'delete']);
  });

  test('on an active policy a filter reaches the router through its job; its PUT answers 202 then, 200 while inactive', async () => {
    const p = await settled(alice, { active: true, filters: [filter(1)] });
    const res = await alice.post('vrfwfilters/', { ...filter(2), policy: p.resource_uri });
    assert.equal(res.status, 202, res.text);
    const f = res.json.objects[0];
    assert.equal((await applied(p.uuid))?.filters.length, 1);
    await srv.advance(DELAY);
    assert.deepEqual(
      (await applied(p.uuid))?.filters.map((x) => x.order),
      [1, 2],
    );
    const put = await alice.put(f.resource_uri, { dst_port: '80', dst_port_op: '!=' });
    assert.equal(put.status, 202, put.text);
    assert.deepEqual([put.json.dst_port, put.json.dst_port_op, put.json.jobs.length], ['80', false, 2]);
    assert.equal((await applied(p.uuid))?.filters[1].dst_port, '22');
    await srv.advance(DELAY);
    assert.deepEqual([(await applied(p.uuid))?.filters[1].dst_port, (await applied(p.uuid))?.filters[1].dst_port_op], ['80', false]);
    // Logging is no rule of the router: no job.
    const logged = await alice.put(f.resource_uri, { log: true });
    assert.deepEqual([logged.status, logged.json.log, logged.json.jobs.length], [200, true, 2]);
    // Inactive: edits need no router.
    assert.equal((await alice.post(`${p.resource_uri}action/?do=disable`)).status, 202);
    await srv.advance(DELAY);
    const quiet = await alice.put(f.resource_uri, { dst_port: '443' });
    assert.deepEqual([quiet.status, quiet.json.dst_port, quiet.json.jobs.length], [200, '443', 2]);
    assert.equal(await applied(p.uuid), null);
    // A delete on an inactive policy still answers with its job, as recorded.
    const del = await alice.delete(f.resource_uri);
    assert.equal(del.status, 202, del.text);
    await srv.advance(DELAY);
    assert.equal(await jobState(alice, del.json.job), 'success');
    assert.deepEqual(await actionsOf(f.uuid), ['create', 'update', 'update', 'update', 'delete']);
  });

  test('list, detail, ?policy=, fields=, XML; methods the schema lists but nothing recorded are 405', async () => {
    const c = await srv.user();
    const a = await settled(c, { filters: [filter(1), filter(2)], name: 'alpha' });
    const b = await settled(c, { filters: [filter(1)], name: 'beta' });
    const list = await c.get('vrfwpolicies/?limit=0');
    assert.equal(list.status, 200);
    assert.deepEqual(list.json.meta, { limit: 0, offset: 0, total_count: 2 });
    sameShape(list.json.objects[0], rec('response_vrfwpolicy_get'));
    assert.deepEqual((await c.get('vrfwpolicies/detail/')).json.objects, list.json.objects);
    assert.deepEqual(
      (await c.get('vrfwpolicies/?name=beta')).json.objects.map((o: any) => o.uuid),
      [b.uuid],
    );
    assert.deepEqual(
      (await c.get('vrfwpolicies/?name__contains=LP')).json.objects.map((o: any) => o.uuid),
      [a.uuid],
    );
    assert.deepEqual(Object.keys((await c.get('vrfwpolicies/?fields=name,filters')).json.objects[0]).sort(), ['filters', 'name']);
    const filters = await c.get(`vrfwfilters/?policy=${a.uuid}&limit=0`);
    assert.deepEqual(
      filters.json.objects.map((o: any) => o.uuid),
      a.filters.map((f: any) => f.uuid),
    );
    assert.equal((await c.get('vrfwfilters/?limit=0')).json.meta.total_count, 3);
    assert.match((await c.get(`${a.resource_uri}?format=xml`)).text, /<lan_interface type="hash"><resource_uri>\/api\/2\.0\/lans\//);
    // A tag listing a policy finds it.
    const tag = await c.post('tags/', { name: 't', resources: [b.uuid] });
    assert.equal(tag.status, 201, tag.text);
    assert.deepEqual(
      (await c.get(`vrfwpolicies/?tag=${tag.json.objects[0].uuid}`)).json.objects.map((o: any) => o.uuid),
      [b.uuid],
    );
    for (const [method, path] of [
      ['PUT', 'vrfwpolicies/'],
      ['DELETE', 'vrfwpolicies/'],
      ['POST', a.resource_uri],
      ['PUT', 'vrfwfilters/'],
      ['DELETE', 'vrfwfilters/'],
      ['POST', a.filters[0].resource_uri.resource_uri],
    ])
      expectError(await c.request(method, path, { body: {} }), 405, 'validation', null);
    expectError(await c.post(`${a.resource_uri}action/?do=start`, {}), 400, 'validation', 'do');
  });
});

describe('validation: errors name their field, and bad input changes nothing', () => {
  const good = { active: false, filters: [filter(1)], lan_interface: LAN, name: 'ok', order: 1 };
  const badPolicies: [string, Record<string, unknown>, string][] = [
    ['no name', { name: undefined }, 'name'],
    ['no order', { order: undefined }, 'order'],
    ['order not an integer', { order: 'first' }, 'order'],
    ['negative order', { order: -1 }, 'order'],
    ['no active', { active: undefined }, 'active'],
    ['active not a boolean', { active: 'yes' }, 'active'],
    ['no filters', { filters: undefined }, 'filters'],
    ['filters a string', { filters: 'all' }, 'filters'],
    ['filters a non-empty dict', { filters: { a: 1 } }, 'filters'],
    ['a filter not an object', { filters: [filter(1), 5] }, 'filters.1'],
    ['lan not a uuid', { lan_interface: 'lan-1' }, 'lan_interface'],
    ['lan as another kind', { lan_interface: `/api/2.0/vlans/${LAN}/` }, 'lan_interface'],
    ['lan uuid and uri disagree', { lan_interface: { uuid: LAN, resource_uri: '/api/2.0/lans/e45a5677-b8eb-4107-9d6d-fc244be00e18/' } }, 'lan_interface'],
    ['upstream a number', { upstream_interface: 7 }, 'upstream_interface'],
    ['upstream uuid a number', { upstream_interface: { uuid: 7 } }, 'upstream_interface'],
    ['filter action drop', { filters: [filter(1, { action: 'drop' })] }, 'filters.0.action'],
    ['filter without action', { filters: [filter(1, { action: undefined })] }, 'filters.0.action'],
    ['filter without protocol', { filters: [filter(1), filter(2, { protocol: null })] }, 'filters.1.protocol'],
    ['filter protocol sctp', { filters: [filter(1, { protocol: 'sctp' })] }, 'filters.0.protocol'],
    ['filter without order', { filters: [filter(1, { order: undefined })] }, 'filters.0.order'],
    ['filter order twice', { filters: [filter(1), filter(2), filter(1)] }, 'filters.2.order'],
    ['filter src not an address', { filters: [filter(1, { src: '10.0.0.300' })] }, 'filters.0.src'],
    ['filter src negated with !', { filters: [filter(1, { src: '!10.0.0.1' })] }, 'filters.0.src'],
    ['filter src partial address', { filters: [filter(1, { src: '10.0' })] }, 'filters.0.src'],
    ['filter dst prefix too long', { filters: [filter(1, { dst: '10.0.0.0/33' })] }, 'filters.0.dst'],
    ['filter dst of another IP version', { filters: [filter(1, { dst: '2001:db8::1' })] }, 'filters.0.dst'],
    ['filter dst a number', { filters: [filter(1, { dst: 10 })] }, 'filters.0.dst'],
    ['filter port out of range', { filters: [filter(1, { dst_port: '70000' })] }, 'filters.0.dst_port'],
    ['filter port range reversed', { filters: [filter(1, { src_port: '100:10' })] }, 'filters.0.src_port'],
    ['filter port negated with !', { filters: [filter(1, { src_port: '!22' })] }, 'filters.0.src_port'],
    ['icmp filter with a port', { filters: [filter(1, { protocol: 'icmp' })] }, 'filters.0.dst_port'],
    ['filter operator ==', { filters: [filter(1, { dst_addr_op: '==' })] }, 'filters.0.dst_addr_op'],
    ['filter operator a number', { filters: [filter(1, { src_port_op: 1 })] }, 'filters.0.src_port_op'],
    ['filter icmp_type unknown', { filters: [filter(1, { icmp_type: 'Ping' })] }, 'filters.0.icmp_type'],
    ['filter log not a boolean', { filters: [filter(1, { log: 'yes' })] }, 'filters.0.log'],
    ['filter action_queue a list', { filters: [filter(1, { action_queue: [] })] }, 'filters.0.action_queue'],
  ];

  test(`create: ${badPolicies.length} bad policies, each 400 at its field; nothing written`, async () => {
    const c = await srv.user();
    const ok = await c.post('vrfwpolicies/', good);
    assert.equal(ok.status, 202, ok.text);
    const logs = (await c.get('logs/?limit=0')).json.meta.total_count;
    for (const [what, change, point] of badPolicies) {
      const body = { ...good, ...change };
      for (const k of Object.keys(change)) if (change[k] === undefined) delete (body as Record<string, unknown>)[k];
      const res = await c.post('vrfwpolicies/', { objects: [good, body] });
      assert.equal(res.status, 400, `${what}: ${res.text}`);
      assert.deepEqual([res.json[0].error_type, res.json[0].error_point], ['validation', point], what);
      assert.equal(typeof res.json[0].error_message, 'string');
    }
    assert.equal((await c.get('vrfwpolicies/')).json.meta.total_count, 1, 'the good object of each request was not written');
    assert.equal((await c.get('vrfwfilters/')).json.meta.total_count, 1);
    assert.equal((await c.get('jobs/?limit=0')).json.meta.total_count, 1);
    assert.equal((await c.get('logs/?limit=0')).json.meta.total_count, logs);
  });

  test('a name of "" is present, so accepted (required means present, as for drives and servers)', async () => {
    const c = await srv.user();
    const res = await c.post('vrfwpolicies/', { ...good, name: '' });
    assert.equal(res.status, 202, res.text);
    assert.equal(res.json.objects[0].name, '');
  });

  test('PUT: the same errors leave the policy and its filters as they were', async () => {
    const c = await srv.user();
    const p = await settled(c, { active: true, filters: [filter(1), filter(2)] });
    const before = await get(c, p.resource_uri);
    for (const [what, change, point] of badPolicies) {
      if (Object.values(change).includes(undefined)) continue; // absent means "unchanged" on PUT
      const res = await c.put(p.resource_uri, { ...before, ...change });
      assert.equal(res.status, 400, `${what}: ${res.text}`);
      assert.deepEqual([res.json[0].error_type, res.json[0].error_point], ['validation', point], what);
    }
    // A change of a known filter is validated against what it is: an ICMP protocol with its port left.
    expectError(
      await c.put(p.resource_uri, { filters: [{ uuid: before.filters[0].uuid, protocol: 'icmp' }, before.filters[1]] }),
      400,
      'validation',
      'filters.0.dst_port',
    );
    assert.deepEqual(await get(c, p.resource_uri), before);
    assert.equal((await c.put(p.resource_uri, { active: 'no' })).status, 400);
    assert.deepEqual(await get(c, p.resource_uri), before);
  });

  test("filters on /vrfwfilters/: policy required and the caller's; order unique in the policy; no moving; bad fields name themselves", async () => {
    const c = await srv.user();
    const p = await settled(c, { filters: [filter(1)] });
    const theirs = await settled(bob);
    expectError(await c.post('vrfwfilters/', filter(2)), 400, 'validation', 'policy');
    expectError(await c.post('vrfwfilters/', { ...filter(2), policy: theirs.uuid }), 400, 'validation', 'policy');
    expectError(await c.post('vrfwfilters/', { ...filter(2), policy: '00000000-0000-4000-8000-000000000000' }), 400, 'validation', 'policy');
    expectError(await c.post('vrfwfilters/', { ...filter(2), policy: 5 }), 400, 'validation', 'policy');
    expectError(await c.post('vrfwfilters/', { ...filter(1), policy: p.uuid }), 400, 'validation', 'order');
    expectError(
      await c.post('vrfwfilters/', [
        { ...filter(2), policy: p.uuid },
        { ...filter(2), policy: p.uuid },
      ]),
      400,
      'validation',
      'order',
    );
    expectError(await c.post('vrfwfilters/', { ...filter(2, { src: 'x' }), policy: p.uuid }), 400, 'validation', 'src');
    expectError(await c.post('vrfwfilters/', { ...filter(2, { protocol: undefined }), policy: p.uuid }), 400, 'validation', 'protocol');
    const f = p.filters[0];
    expectError(await c.put(f.resource_uri.resource_uri, { policy: theirs.uuid }), 400, 'validation', 'policy');
    expectError(await c.put(f.resource_uri.resource_uri, { dst_port_op: 'not' }), 400, 'validation', 'dst_port_op');
    const second = await c.post('vrfwfilters/', { ...filter(2), policy: p.uuid });
    assert.equal(second.status, 202);
    expectError(await c.put(second.json.objects[0].resource_uri, { order: 1 }), 400, 'validation', 'order');
    assert.equal((await c.put(second.json.objects[0].resource_uri, { order: 3, policy: p.uuid })).status, 200, 'its own policy may be sent back');
    assert.deepEqual(
      (await get(c, p.resource_uri)).filters.map((x: any) => x.order),
      [1, 3],
    );
    assert.deepEqual((await get(c, f.resource_uri.resource_uri)).dst_port_op, true);
  });
});

describe('odd values never make a 500', () => {
  const ODD: unknown[] = [null, [], {}, 0, -1, 1.5, 1e300, '', 'x'.repeat(2000), true, '\u0000', { uuid: 5 }, [{}], '=', '!=', '::1', '1:65535'];

  test(`every key of the recorded bodies, ${ODD.length} odd values each: 4xx with a point or a success, never a 500`, async () => {
    const c = await srv.user();
    const p = await settled(c, { filters: [filter(1)] });
    const f = p.filters[0].resource_uri.resource_uri;
    const policyBody = { ...rec('request_vrfwpolicy_update'), filters: [filter(1)] };
    const filterBody = { ...rec('request_vrfwfilter_create').objects[0], policy: p.uuid, order: 2 };
    const tries: [string, string, Record<string, unknown>][] = [];
    for (const [key, value] of Object.keys(filterBody).flatMap((k) => ODD.map((v) => [k, v] as const))) {
      tries.push(['POST', 'vrfwfilters/', { ...filterBody, [key]: value }], ['PUT', f, { [key]: value }]);
      tries.push(['PUT', p.resource_uri, { filters: [{ ...filter(1), uuid: p.filters[0].uuid, [key]: value }] }]);
    }
    // Last: a policy's PUT may replace its filters.
    for (const [key, value] of Object.keys(policyBody).flatMap((k) => ODD.map((v) => [k, v] as const))) {
      tries.push(['POST', 'vrfwpolicies/', { ...policyBody, [key]: value }], ['PUT', p.resource_uri, { [key]: value }]);
    }
    const statuses = new Map<number, number>();
    for (const [method, path, body] of tries) {
      const res = await c.request(method, path, { body });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      assert.ok(res.status < 500, `${method} ${path} ${JSON.stringify(body).slice(0, 200)}: ${res.text}`);
      if (res.status >= 400) assert.ok(res.json[0].error_type === 'validation' && typeof res.json[0].error_message === 'string', res.text);
    }
    assert.ok((statuses.get(400) ?? 0) > 100 && (statuses.get(202) ?? 0) > 10, JSON.stringify([...statuses]));
  });
});

describe('ownership, durability', () => {
  test("another user's policy and filters are 404 everywhere; lists show only the caller's", async () => {
    const p = await settled(alice, { filters: [filter(1)] });
    const f = p.filters[0].resource_uri.resource_uri;
    for (const res of [
      await bob.get(p.resource_uri),
      await bob.put(p.resource_uri, { name: 'mine' }),
      await bob.delete(p.resource_uri),
      await bob.post(`${p.resource_uri}action/?do=enable`, {}),
      await bob.get(f),
      await bob.put(f, { log: true }),
      await bob.delete(f),
      await bob.post(`${f}action/?do=enable_logging`, {}),
    ])
      expectError(res, 404, 'notexist', null);
    assert.ok(!(await bob.get('vrfwpolicies/?limit=0')).json.objects.some((o: any) => o.uuid === p.uuid));
    assert.ok(!(await bob.get('vrfwfilters/?limit=0')).json.objects.some((o: any) => o.uuid === p.filters[0].uuid));
    const after = await get(alice, p.resource_uri);
    assert.deepEqual([after.name, after.active, after.filters[0].log], [p.name, false, false]);
  });

  test('a router job is a durable timer: another scheduler (a restarted process) finishes it', async () => {
    const p = await settled(alice, { filters: [filter(1)] });
    const on = await alice.post(`${p.resource_uri}action/?do=enable`, {});
    const timers = await srv.services.store.db.selectFrom('timers').select(['kind', 'state']).where('subject', '=', p.uuid).execute();
    assert.deepEqual(timers, [{ kind: 'vrfw.apply', state: 'pending' }]);
    srv.clock.advance(DELAY);
    const restarted = new Scheduler(srv.services, timerHandlers());
    await restarted.runDue();
    await restarted.stop();
    assert.equal((await applied(p.uuid))?.filters.length, 1);
    assert.equal(await jobState(alice, on.json.job), 'success');
  });

  test('two quick changes: the router ends as the later one says, whatever order the jobs end in', async () => {
    const p = await settled(alice, { filters: [filter(1)] });
    await alice.post(`${p.resource_uri}action/?do=enable`, {});
    await srv.advance(DELAY / 2);
    await alice.post(`${p.resource_uri}action/?do=disable`, {});
    await srv.advance(DELAY / 2);
    assert.equal(await applied(p.uuid), null, 'the enable job ends after the disable was asked: nothing applied');
    await srv.advance(DELAY);
    assert.equal(await applied(p.uuid), null);
    const jobs = (await get(alice, p.resource_uri)).jobs;
    assert.deepEqual(await Promise.all(jobs.map((j: any) => jobState(alice, j))), ['success', 'success', 'success']);
  });
});
