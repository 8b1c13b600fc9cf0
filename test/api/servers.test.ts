import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type TestServer } from '../helpers/server.js';
import { Client } from '../helpers/client.js';
import { fixture, golden, sameShape } from '../helpers/golden.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { schedule } from '../../src/core/timers.js';

type User = Client & { uuid: string; email: string };
let srv: TestServer;
let alice: User, bob: User;
const GiB = 1024 ** 3;
const MINIMAL = { cpu: 1000, mem: 536870912, name: 'testServerAcc', vnc_password: 'testserver' };

before(async () => {
  srv = await startServer();
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

async function server(c: Client, body: Record<string, unknown> = {}) {
  const res = await c.post('servers/', { objects: [{ ...MINIMAL, ...body }] });
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0];
}
async function drive(c: Client, body: Record<string, unknown> = {}) {
  const res = await c.post('drives/', { media: 'disk', name: 'd', size: GiB, ...body });
  assert.equal(res.status, 201, res.text);
  await srv.advance(2_000);
  return res.json.objects[0];
}
const act = (c: Client, s: { resource_uri: string }, action: string, body?: unknown) =>
  c.request('POST', `${s.resource_uri}action/?do=${action}`, body === undefined ? { headers: { 'content-type': 'application/json' } } : { body });
const status = async (c: Client, s: { resource_uri: string }) => (await c.get(s.resource_uri)).json.status;
const logOf = async (uuid: string) =>
  (await srv.services.store.db.selectFrom('audit_log').selectAll().where('uuid', '=', uuid).orderBy('seq').execute()).map((e) =>
    e.success ? e.action : `${e.action}:failed:${e.error_type}`,
  );
async function running(c: Client, body: Record<string, unknown> = {}) {
  const s = await server(c, body);
  assert.equal((await act(c, s, 'start')).status, 202);
  await srv.advance(3_000);
  return s;
}
/** A simulated guest/host event, as the operator command schedules it. */
async function event(uuid: string, ev: string) {
  await srv.services.store.transaction((tx) => schedule(tx, srv.services, { kind: 'server.event', subject: uuid, inMs: 0, payload: { event: ev } }));
  await srv.scheduler.runDue();
}

describe('server definitions', () => {
  test('create minimal: defaults as the golden dump', async () => {
    const res = await alice.post('servers/', golden('request_server_create_minimal'));
    assert.equal(res.status, 201);
    sameShape(res.json, golden('response_server_create_minimal'));
    const s = res.json.objects[0];
    assert.deepEqual(
      [s.context, s.cpu_model, s.cpu_type, s.cpus_instead_of_cores, s.enable_numa, s.hv_relaxed, s.hv_tsc, s.hypervisor, s.runtime, s.smp, s.status],
      [true, null, 'amd', false, false, false, false, 'kvm', null, 1, 'stopped'],
    );
    assert.deepEqual([s.drives, s.nics, s.pubkeys, s.requirements, s.tags, s.jobs, s.meta], [[], [], [], [], [], [], {}]);
  });

  test('create full and bulk (golden)', async () => {
    const request = golden('request_server_create_full');
    // The recorded request attaches a drive of the recording account: attach one of ours instead.
    for (const a of request.objects[0].drives ?? []) a.drive = (await drive(alice, { media: a.device === 'ide' ? 'cdrom' : 'disk' })).uuid;
    const full = await alice.post('servers/', request);
    assert.equal(full.status, 201, full.text);
    sameShape(full.json.objects[0].nics[0], golden('response_server_create_full').objects[0].nics[0], '$.nics[0]');
    assert.match(full.json.objects[0].nics[0].mac, /^22(:[0-9a-f]{2}){5}$/);
    const bulk = await alice.post('servers/', golden('request_server_create_bulk'));
    assert.equal(bulk.status, 201);
    assert.equal(bulk.json.objects.length, golden('request_server_create_bulk').objects.length);
  });

  test('required fields and capability ranges are 400 with the field as error_point', async () => {
    for (const [body, point] of [
      [{ ...MINIMAL, cpu: undefined }, 'cpu'],
      [{ ...MINIMAL, mem: undefined }, 'mem'],
      [{ ...MINIMAL, name: undefined }, 'name'],
      [{ ...MINIMAL, vnc_password: undefined }, 'vnc_password'],
      [{ ...MINIMAL, cpu: 100 }, 'cpu'],
      [{ ...MINIMAL, cpu: 50_000 }, 'cpu'],
      [{ ...MINIMAL, mem: 1024 }, 'mem'],
      [{ ...MINIMAL, smp: 30 }, 'smp'],
      [{ ...MINIMAL, cpu: 8000, smp: 2 }, 'cpu'],
      [{ ...MINIMAL, cpu_type: 'intel' }, 'cpu_type'],
      [{ ...MINIMAL, hypervisor: 'solaris-kz' }, 'hypervisor'],
      [{ ...MINIMAL, hypervisor: 'xen' }, 'hypervisor'],
      [{ ...MINIMAL, cpu_model: 'pentium' }, 'cpu_model'],
    ] as const) {
      const res = await alice.post('servers/', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json[0].error_type, 'validation');
      assert.equal(res.json[0].error_point, point, JSON.stringify(body));
    }
    assert.equal((await alice.post('servers/', { ...MINIMAL, cpu: '2000', smp: '2', mem: String(GiB) })).status, 201, 'numeric strings');
    const auto = await alice.post('servers/', { ...MINIMAL, cpu: 8000 });
    assert.equal(auto.status, 201, 'without smp the cores follow the cpu (libcloud sends 2000 MHz per core)');
    assert.equal(auto.json.objects[0].smp, 4);
  });

  test('name is required to be present, not non-blank: "" is a name (pycloudsigma\'s websocket tests create servers so)', async () => {
    const res = await alice.post('servers/', { ...MINIMAL, name: '' });
    assert.equal(res.status, 201, res.text);
    const s = res.json.objects[0];
    assert.equal(s.name, '');
    assert.equal((await alice.get(s.resource_uri)).json.name, '');
    const renamed = await alice.put(s.resource_uri, { name: 'x' });
    assert.equal(renamed.status, 200, renamed.text);
    const blanked = await alice.put(s.resource_uri, { name: '' });
    assert.equal(blanked.status, 200, blanked.text);
    assert.equal(blanked.json.name, '');
  });

  test('list is the short form, detail the full one (golden)', async () => {
    const c = await srv.user();
    await server(c);
    const list = await c.get('servers/');
    sameShape(list.json, golden('response_server_list'));
    assert.deepEqual(Object.keys(list.json.objects[0]), ['name', 'owner', 'resource_uri', 'runtime', 'status', 'uuid']);
    const detail = await c.get('servers/detail/');
    sameShape(detail.json.objects[0], golden('response_server_list_detail').objects[0], '$.objects[0]');
    const schema = (await c.get('servers/schema/')).json;
    const want = golden('response_server_schema');
    assert.deepEqual(Object.keys(schema.fields).sort(), Object.keys(want.fields).sort());
    for (const [k, v] of Object.entries<any>(want.fields))
      assert.deepEqual([k, schema.fields[k].type, schema.fields[k].readonly, schema.fields[k].required], [k, v.type, v.readonly, v.required]);
    assert.deepEqual(schema.filtering, want.filtering);
  });

  test('PUT is partial; meta replaces; a running server only takes name, meta and tags', async () => {
    const s = await server(alice, { meta: { a: '1' } });
    const edited = await alice.put(s.resource_uri, { cpu: 2000, smp: 2 });
    assert.deepEqual([edited.json.cpu, edited.json.smp, edited.json.meta], [2000, 2, { a: '1' }]);
    assert.equal((await act(alice, s, 'start')).status, 202);
    await srv.advance(3_000);
    const res = await alice.put(s.resource_uri, { name: 'renamed', cpu: 4000, mem: 2 * GiB, meta: { b: '2' } });
    assert.equal(res.status, 200);
    assert.deepEqual([res.json.name, res.json.cpu, res.json.mem, res.json.meta], ['renamed', 2000, 536870912, { b: '2' }]);
  });
});

describe('drive attachments', () => {
  test('attaching mounts the drive; detaching or deleting the server unmounts it (golden attach)', async () => {
    const s = await server(alice);
    const d = await drive(alice);
    const res = await alice.put(s.resource_uri, { ...MINIMAL, drives: [{ boot_order: 1, dev_channel: '0:0', device: 'virtio', drive: d.uuid }] });
    assert.equal(res.status, 200, res.text);
    sameShape(res.json.drives, golden('response_server_attach_drive').drives);
    const mounted = (await alice.get(d.resource_uri)).json;
    assert.equal(mounted.status, 'mounted');
    assert.deepEqual(mounted.mounted_on, [{ resource_uri: s.resource_uri, uuid: s.uuid }]);
    await alice.put(s.resource_uri, { drives: [] });
    assert.equal((await alice.get(d.resource_uri)).json.status, 'unmounted');
    await alice.put(s.resource_uri, { drives: [{ drive: { uuid: d.uuid } }] });
    assert.equal((await alice.get(s.resource_uri)).json.drives[0].dev_channel, '0:0', 'a free channel is chosen');
    assert.equal((await alice.delete(s.resource_uri)).status, 204);
    assert.deepEqual((await alice.get(d.resource_uri)).json.mounted_on, []);
    assert.equal((await alice.get(d.resource_uri)).json.status, 'unmounted');
  });

  test('bad attachments are refused', async () => {
    const s = await server(alice);
    const [d1, d2] = [await drive(alice), await drive(alice)];
    const cases: [unknown[], number][] = [
      [
        [
          { drive: d1.uuid, device: 'virtio', dev_channel: '0:0' },
          { drive: d2.uuid, device: 'virtio', dev_channel: '0:0' },
        ],
        400,
      ],
      [[{ drive: d1.uuid, device: 'ide', dev_channel: '2:0' }], 400],
      [[{ drive: d1.uuid, device: 'floppy', dev_channel: '0:0' }], 400],
      [[{ drive: d1.uuid, device: 'virtio', dev_channel: 'x' }], 400],
      [[{ drive: d1.uuid }, { drive: d1.uuid }], 400],
      [[{ drive: crypto.randomUUID() }], 400],
    ];
    for (const [drives, code] of cases) {
      const res = await alice.put(s.resource_uri, { drives });
      assert.equal(res.status, code, JSON.stringify(drives));
      assert.equal(res.json[0].error_point, 'drives');
    }
    assert.deepEqual((await alice.get(s.resource_uri)).json.drives, [], 'nothing attached');
    const other = await server(alice);
    await alice.put(s.resource_uri, { drives: [{ drive: d1.uuid }] });
    assert.equal((await alice.put(other.resource_uri, { drives: [{ drive: d1.uuid }] })).status, 403, 'no multimount');
    await alice.put(d2.resource_uri, { allow_multimount: true });
    await alice.put(s.resource_uri, { drives: [{ drive: d1.uuid }, { drive: d2.uuid }] });
    assert.equal((await alice.put(other.resource_uri, { drives: [{ drive: d2.uuid }] })).status, 200, 'multimount allowed');
  });

  test("attaching another user's drive needs the server owner to hold ATTACH (ACL rule 8)", async () => {
    const s = await server(alice);
    const d = await drive(bob);
    assert.equal((await alice.put(s.resource_uri, { drives: [{ drive: d.uuid }] })).status, 400, 'invisible drive');
    const tag = (await bob.post('tags/', { name: 't', resources: [d.uuid] })).json.objects[0];
    await bob.post('acls/', { grantees: [{ uuid: alice.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: tag.uuid }] });
    const denied = await alice.put(s.resource_uri, { drives: [{ drive: d.uuid }] });
    assert.equal(denied.status, 403);
    assert.equal(denied.json[0].error_point, 'drives');
    await bob.post('acls/', { grantees: [{ uuid: alice.uuid }], rules: [{ permission: 'ATTACH' }], tags: [{ uuid: tag.uuid }] });
    assert.equal((await alice.put(s.resource_uri, { drives: [{ drive: d.uuid }] })).status, 200);
  });

  test('delete with recurse removes attached drives by media (golden recurse dumps)', async () => {
    const cases: [string, string[]][] = [
      ['all_drives', ['disk', 'cdrom']],
      ['disks', ['disk']],
      ['cdroms', ['cdrom']],
    ];
    for (const [recurse, goneMedia] of cases) {
      const s = await server(alice);
      const disk = await drive(alice);
      const cd = await drive(alice, { media: 'cdrom' });
      await alice.put(s.resource_uri, { drives: [{ drive: disk.uuid }, { drive: cd.uuid, device: 'ide' }] });
      assert.equal((await alice.delete(`${s.resource_uri}?recurse=${recurse}`)).status, 204);
      assert.equal((await alice.get(disk.resource_uri)).status, goneMedia.includes('disk') ? 404 : 200, recurse);
      assert.equal((await alice.get(cd.resource_uri)).status, goneMedia.includes('cdrom') ? 404 : 200, recurse);
    }
    const s = await server(alice);
    assert.equal((await alice.delete(`${s.resource_uri}?recurse=everything`)).status, 400);
  });
});

describe('NICs', () => {
  test('dhcp, manual, static and private NICs; the rules between them', async () => {
    const s = await server(alice);
    const res = await alice.put(s.resource_uri, { nics: [{ ip_v4_conf: { conf: 'dhcp' } }, { ip_v4_conf: { conf: 'manual' }, model: 'e1000' }] });
    assert.equal(res.status, 200, res.text);
    sameShape(res.json.nics[0], golden('response_server_add_dhcp_nic').nics[0], '$.nics[0]');
    assert.deepEqual(
      res.json.nics.map((n: any) => n.ip_v4_conf),
      [
        { conf: 'dhcp', ip: null },
        { conf: 'manual', ip: null },
      ],
    );
    for (const nic of [
      { ip_v4_conf: { conf: 'dhcp', ip: '185.12.6.183' } },
      { ip_v4_conf: { conf: 'static' } },
      { ip_v4_conf: { conf: 'bogus' } },
      { vlan: crypto.randomUUID(), ip_v4_conf: { conf: 'dhcp' } },
      { model: 'token-ring' },
      { mac: '22:00:00:00:00:01', ip_v4_conf: { conf: 'dhcp' } },
      'not an object',
    ]) {
      const bad = await alice.put(s.resource_uri, { nics: [nic] });
      assert.equal(bad.status, 400, JSON.stringify(nic));
      assert.equal(bad.json[0].error_point, 'nics');
    }
  });

  test('NICs are matched by MAC: kept, changed, removed, added, reordered (golden)', async () => {
    const s = await server(alice);
    const two = (await alice.put(s.resource_uri, { nics: [{ ip_v4_conf: { conf: 'dhcp' } }, { ip_v4_conf: { conf: 'manual' } }] })).json.nics;
    const [a, b] = two.map((n: any) => n.mac);
    const swapped = (
      await alice.put(s.resource_uri, {
        nics: [
          { mac: b, ip_v4_conf: { conf: 'manual' } },
          { mac: a, ip_v4_conf: { conf: 'dhcp' } },
        ],
      })
    ).json.nics;
    assert.deepEqual(
      swapped.map((n: any) => n.mac),
      [b, a],
    );
    const changed = (await alice.put(s.resource_uri, { nics: [{ mac: a, ip_v4_conf: { conf: 'manual' } }, { ip_v4_conf: { conf: 'dhcp' } }] })).json.nics;
    assert.equal(changed[0].mac, a);
    assert.equal(changed[0].ip_v4_conf.conf, 'manual');
    assert.notEqual(changed[1].mac, b, 'b was removed; the new NIC has a new MAC');
    // Re-PUTting the server as read (clients do) keeps everything.
    const whole = (await alice.get(s.resource_uri)).json;
    const again = await alice.put(s.resource_uri, whole);
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(again.json.nics, whole.nics);
  });
});

describe('static IPs and VLANs', () => {
  test('a static NIC needs an IP the owner holds and no other server uses; private NICs need a VLAN the owner holds', async () => {
    const { assignIps } = await import('../../src/resources/ips/ips.js');
    const { assignVlans } = await import('../../src/resources/vlans/vlans.js');
    const [ip] = await srv.services.store.transaction((tx) => assignIps(tx, srv.services, alice.uuid, 1));
    const [vlan] = await srv.services.store.transaction((tx) => assignVlans(tx, srv.services, alice.uuid, 1));
    const s = await server(alice);
    const res = await alice.put(s.resource_uri, { nics: [{ ip_v4_conf: { conf: 'static', ip }, model: 'virtio' }, { vlan }] });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json.nics[0].ip_v4_conf, { conf: 'static', ip: { resource_uri: `/api/2.0/ips/${ip}/`, uuid: ip } });
    assert.deepEqual(res.json.nics[1].vlan, { resource_uri: `/api/2.0/vlans/${vlan}/`, uuid: vlan });
    assert.deepEqual([res.json.nics[1].ip_v4_conf, res.json.nics[1].ip_v6_conf], [null, null]);
    sameShape(
      res.json.nics[1],
      golden('response_server_add_private_nic').nics.find((n: any) => n.vlan),
      '$.nic',
    );
    const other = await server(alice);
    assert.equal((await alice.put(other.resource_uri, { nics: [{ ip_v4_conf: { conf: 'static', ip } }] })).status, 403, 'in use');
    // Another user's IP or VLAN, not shared: as if it did not exist (no existence oracle).
    assert.equal((await bob.put((await server(bob)).resource_uri, { nics: [{ ip_v4_conf: { conf: 'static', ip } }] })).status, 400, "another user's IP");
    assert.equal((await bob.put((await server(bob)).resource_uri, { nics: [{ vlan }] })).status, 400, "another user's VLAN");
    assert.equal((await alice.put(other.resource_uri, { nics: [{ ip_v4_conf: { conf: 'static', ip: '203.0.113.9' } }] })).status, 400);
    await alice.delete(s.resource_uri);
    assert.equal((await alice.put(other.resource_uri, { nics: [{ ip_v4_conf: { conf: 'static', ip } }] })).status, 200, 'freed by the delete');
    const [ip2] = await srv.services.store.transaction((tx) => assignIps(tx, srv.services, alice.uuid, 1));
    const up = await running(alice, { nics: [{ ip_v4_conf: { conf: 'static', ip: ip2 } }] });
    assert.deepEqual((await alice.get(up.resource_uri)).json.runtime.nics[0].ip_v4.uuid, ip2, 'a static IP shows in the runtime');
  });
});

describe('lifecycle on the simulated hypervisor', () => {
  test('start: 202, starting, then running with a runtime (golden); start again is 403 like the fixture', async () => {
    const s = await server(alice, { nics: [{ ip_v4_conf: { conf: 'dhcp' } }] });
    const res = await act(alice, s, 'start');
    assert.equal(res.status, 202);
    assert.deepEqual(Object.keys(res.json).sort(), Object.keys(fixture('start_success.json')).sort());
    assert.deepEqual([res.json.action, res.json.result, res.json.uuid], ['start', 'success', s.uuid]);
    assert.equal(await status(alice, s), 'starting');
    const again = await act(alice, s, 'start');
    assert.equal(again.status, 403);
    assert.deepEqual(Object.keys(again.json[0]).sort(), Object.keys(fixture('start_already_started.json')[0]).sort());
    assert.equal(again.json[0].error_type, 'permission');
    await srv.advance(3_000);
    const up = (await alice.get(s.resource_uri)).json;
    assert.equal(up.status, 'running');
    sameShape(up.runtime, golden('response_server_get_running').runtime);
    const lease = up.runtime.nics[0].ip_v4.uuid;
    assert.equal(up.runtime.nics[0].interface_type, 'public');
    assert.deepEqual(up.nics[0].runtime.ip_v4, { resource_uri: `/api/2.0/ips/${lease}/`, uuid: lease }, 'DHCP lease at boot');
    const leased = (await alice.get(`ips/${lease}/`)).json;
    assert.equal(leased.server.uuid, s.uuid);
    assert.match(up.runtime.active_since, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/);
    srv.clock.advance(10_000);
    assert.ok((await alice.get(s.resource_uri)).json.runtime.nics[0].io.bytes_recv > 0, 'io counters grow');
    assert.equal((await alice.get('servers/')).json.objects.find((o: any) => o.uuid === s.uuid).runtime.active_since, up.runtime.active_since);
    assert.deepEqual(await logOf(s.uuid), ['create', 'start_send', 'boot']);
  });

  test('GET servers/<uuid>/runtime/: the runtime alone (pycloudsigma Server.runtime); null when stopped; 404 as the server', async () => {
    const s = await server(alice, { nics: [{ ip_v4_conf: { conf: 'dhcp' } }] });
    const stopped = await alice.get(`${s.resource_uri}runtime/`);
    assert.equal(stopped.status, 200, stopped.text);
    assert.equal(stopped.json, null);
    assert.equal((await alice.get(`${s.resource_uri}runtime/?format=xml`)).status, 200);
    await act(alice, s, 'start');
    await srv.advance(3_000);
    const rt = await alice.get(`${s.resource_uri}runtime/`);
    assert.equal(rt.status, 200);
    sameShape(rt.json, golden('response_server_get_running').runtime);
    assert.equal(rt.json.nics[0].interface_type, 'public');
    assert.equal((await bob.get(`${s.resource_uri}runtime/`)).status, 404);
    assert.equal((await alice.get(`servers/${crypto.randomUUID()}/runtime/`)).status, 404);
    assert.equal((await alice.post(`${s.resource_uri}runtime/`, {})).status, 405);
  });

  test('stop: stopping then stopped, runtime null; stop again is 403 (fixture)', async () => {
    const s = await running(alice);
    const res = await act(alice, s, 'stop');
    assert.equal(res.status, 202);
    assert.deepEqual(res.json, { action: 'stop', result: 'success', uuid: s.uuid });
    assert.equal(await status(alice, s), 'stopping');
    await srv.advance(2_000);
    const down = (await alice.get(s.resource_uri)).json;
    assert.deepEqual([down.status, down.runtime], ['stopped', null]);
    const again = await act(alice, s, 'stop');
    assert.equal(again.status, 403);
    assert.equal(again.json[0].error_type, fixture('stop_already_stopped.json')[0].error_type);
    assert.deepEqual(await logOf(s.uuid), ['create', 'start_send', 'boot', 'stop_send', 'stop']);
  });

  test('shutdown (ACPI): an obedient guest stops; one that ignores it is back to running', async () => {
    const s = await running(alice);
    assert.equal((await act(alice, s, 'shutdown')).status, 202);
    assert.equal(await status(alice, s), 'stopping');
    await srv.advance(5_000);
    assert.equal(await status(alice, s), 'stopped');
    assert.deepEqual(await logOf(s.uuid), ['create', 'start_send', 'boot', 'shutdown_ACPI_send', 'stop']);
    const stubborn = await running(alice);
    await event(stubborn.uuid, 'acpi_ignore');
    await act(alice, stubborn, 'shutdown');
    await srv.advance(5_000);
    assert.equal(await status(alice, stubborn), 'stopping', 'still asking');
    await srv.advance(60_000);
    assert.equal(await status(alice, stubborn), 'running');
    assert.equal((await act(alice, stubborn, 'stop')).status, 202, 'a hard stop always works');
    await srv.advance(2_000);
    assert.equal(await status(alice, stubborn), 'stopped');
    assert.equal((await act(alice, stubborn, 'shutdown')).status, 403);
  });

  test('VNC and console: open needs a running server and gives a new URL; close (fixtures)', async () => {
    const s = await server(alice);
    assert.equal((await act(alice, s, 'open_vnc')).status, 403);
    assert.equal((await act(alice, s, 'start')).status, 202);
    await srv.advance(3_000);
    const open = await act(alice, s, 'open_vnc');
    assert.equal(open.status, 202);
    assert.deepEqual(Object.keys(open.json).sort(), Object.keys(fixture('servers_open_vnc.json')).sort());
    assert.match(open.json.vnc_url, /^vnc:\/\/[^:]+:\d+$/);
    const close = await act(alice, s, 'close_vnc');
    assert.deepEqual(Object.keys(close.json).sort(), Object.keys(fixture('servers_close_vnc.json')).sort());
    const console = await act(alice, s, 'open_console');
    assert.match(console.json.console_url, /^csconsole:\/\//);
    sameShape(console.json, golden('response_server_open_console'));
    assert.equal((await act(alice, s, 'close_console')).status, 202);
    assert.deepEqual((await logOf(s.uuid)).slice(-2), ['open_vnc', 'close_vnc']);
  });

  test('a running server cannot be deleted', async () => {
    const s = await running(alice);
    const res = await alice.delete(s.resource_uri);
    assert.equal(res.status, 403);
    assert.equal(res.json[0].error_type, 'permission');
  });

  test('guest events: power-off from inside logs only stop; a crash restarts; a failed boot; a host failure heals', async () => {
    const off = await running(alice);
    await event(off.uuid, 'poweroff');
    assert.equal(await status(alice, off), 'stopped');
    assert.deepEqual(await logOf(off.uuid), ['create', 'start_send', 'boot', 'stop']);

    const crash = await running(alice);
    await event(crash.uuid, 'crash');
    assert.equal(await status(alice, crash), 'starting');
    await srv.advance(3_000);
    assert.equal(await status(alice, crash), 'running');
    assert.deepEqual(await logOf(crash.uuid), ['create', 'start_send', 'boot', 'stop:failed:backend', 'boot']);

    const doomed = await server(alice);
    await event(doomed.uuid, 'fail_next_boot');
    await act(alice, doomed, 'start');
    await srv.advance(3_000);
    assert.equal(await status(alice, doomed), 'stopped');
    assert.deepEqual(await logOf(doomed.uuid), ['create', 'start_send', 'boot:failed:backend']);
    const failed = await srv.services.store.db
      .selectFrom('audit_log')
      .selectAll()
      .where('uuid', '=', doomed.uuid)
      .where('action', '=', 'boot')
      .executeTakeFirstOrThrow();
    assert.equal(failed.success, 0);
    assert.ok(failed.error_message.length > 0);
    await act(alice, doomed, 'start');
    await srv.advance(3_000);
    assert.equal(await status(alice, doomed), 'running', 'only the next boot fails');

    const host = await running(alice);
    await event(host.uuid, 'host_failure');
    assert.equal(await status(alice, host), 'unavailable');
    assert.equal((await act(alice, host, 'stop')).status, 403);
    await srv.advance(30_000);
    assert.equal(await status(alice, host), 'running');
    assert.equal((await logOf(host.uuid)).at(-1), 'heal');
  });
});

describe('clone', () => {
  test('202 with the bare new server: disks cloned and attached, cdroms shared, DHCP, new MACs, server_clone job', async () => {
    const s = await server(alice, { name: 'src', nics: [{ ip_v4_conf: { conf: 'manual' } }] });
    const disk = await drive(alice, { name: 'disk' });
    const cd = await drive(alice, { name: 'cd', media: 'cdrom' });
    await alice.put(s.resource_uri, {
      drives: [
        { drive: disk.uuid, boot_order: 1 },
        { drive: cd.uuid, device: 'ide' },
      ],
    });
    const res = await act(alice, s, 'clone', { name: 'copy', random_vnc_password: true });
    assert.equal(res.status, 202, res.text);
    const c = res.json;
    sameShape(c, golden('response_server_clone'));
    assert.deepEqual([c.name, c.status, c.runtime, c.owner.uuid], ['copy', 'stopped', null, alice.uuid]);
    assert.notEqual(c.uuid, s.uuid);
    assert.notEqual(c.vnc_password, 'testserver');
    assert.notEqual(c.drives[0].drive.uuid, disk.uuid, 'the disk is a new clone');
    assert.equal(c.drives[1].drive.uuid, cd.uuid, 'the cdrom is shared');
    assert.notEqual(c.nics[0].mac, (await alice.get(s.resource_uri)).json.nics[0].mac);
    const job = (await alice.get(c.jobs[0].resource_uri)).json;
    assert.equal(job.operation, 'server_clone');
    assert.equal(job.children.length, 1);
    assert.equal(job.children[0].operation, 'drive_clone');
    sameShape(job, golden('response_jobs_server_clone'));
    const newDisk = (await alice.get(c.drives[0].drive.resource_uri)).json;
    assert.equal(newDisk.status, 'cloning_dst');
    await srv.advance(10_000);
    assert.equal((await alice.get(c.drives[0].drive.resource_uri)).json.status, 'mounted');
    assert.equal((await alice.get(c.jobs[0].resource_uri)).json.state, 'success');
    assert.deepEqual((await alice.get(cd.resource_uri)).json.mounted_on.map((m: any) => m.uuid).sort(), [s.uuid, c.uuid].sort());
    assert.deepEqual((await logOf(s.uuid)).slice(-1), ['clone_src']);
    assert.deepEqual(await logOf(c.uuid), ['clone_dst']);
  });

  test("cloning another user's server needs CLONE on it and its disks (rule 5)", async () => {
    const s = await server(alice, { name: 'shared' });
    const disk = await drive(alice);
    await alice.put(s.resource_uri, { drives: [{ drive: disk.uuid }] });
    const tag = (await alice.post('tags/', { name: 'srv', resources: [s.uuid] })).json.objects[0];
    await alice.post('acls/', { grantees: [{ uuid: bob.uuid }], rules: [{ permission: 'LIST' }, { permission: 'CLONE' }], tags: [{ uuid: tag.uuid }] });
    assert.equal((await act(bob, s, 'clone', {})).status, 403, 'no CLONE on the disk');
    const dtag = (await alice.post('tags/', { name: 'disk', resources: [disk.uuid] })).json.objects[0];
    await alice.post('acls/', { grantees: [{ uuid: bob.uuid }], rules: [{ permission: 'CLONE' }], tags: [{ uuid: dtag.uuid }] });
    const res = await act(bob, s, 'clone', {});
    assert.equal(res.status, 202, res.text);
    assert.equal(res.json.owner.uuid, bob.uuid);
  });
});

describe('durability', () => {
  test('a restart while servers are starting or stopping finishes those transitions', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-srv-'));
    const db = engine === 'sqlite' ? { url: join(dir, 's.db'), drop: async () => {} } : await freshDatabase();
    try {
      const first = await startServer({ db: db.url });
      const u = await first.user();
      const booting = (await u.post('servers/', MINIMAL)).json.objects[0];
      const halting = (await u.post('servers/', MINIMAL)).json.objects[0];
      await u.request('POST', `${halting.resource_uri}action/?do=start`, { body: {} });
      await first.advance(3_000);
      await u.request('POST', `${halting.resource_uri}action/?do=stop`, { body: {} });
      await u.request('POST', `${booting.resource_uri}action/?do=start`, { body: {} });
      await first.close();
      const second = await startServer({ db: db.url });
      try {
        const again = new Client(second.base, u.creds);
        assert.equal((await again.get(booting.resource_uri)).json.status, 'starting');
        assert.equal((await again.get(halting.resource_uri)).json.status, 'stopping');
        await second.advance(10_000);
        assert.equal((await again.get(booting.resource_uri)).json.status, 'running');
        assert.equal((await again.get(halting.resource_uri)).json.status, 'stopped');
      } finally {
        await second.close();
      }
    } finally {
      await db.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('reconciler', () => {
  test('a server stuck in a transition nothing will finish is healed to stopped and logged', async () => {
    const { reconcileServers } = await import('../../src/resources/servers/reconcile.js');
    const fine = await server(alice);
    await act(alice, fine, 'start');
    const stuck = await server(alice);
    await act(alice, stuck, 'start');
    // The boot timer is lost (as if it failed for good): nothing would ever finish the start.
    await srv.services.store.db.deleteFrom('timers').where('subject', '=', stuck.uuid).execute();
    assert.equal(await srv.services.store.transaction((t) => reconcileServers(srv.services, t)), 1);
    assert.equal(await status(alice, stuck), 'stopped');
    assert.equal(await status(alice, fine), 'starting', 'a transition under way is left alone');
    assert.deepEqual((await logOf(stuck.uuid)).slice(-1), ['heal']);
    await srv.advance(3_000);
    assert.equal(await status(alice, fine), 'running');
  });

  test('the reconciler is recurring durable work: once a minute of the injected clock, one pending timer', async () => {
    const stuck = await server(alice);
    await act(alice, stuck, 'start');
    await srv.services.store.db.deleteFrom('timers').where('subject', '=', stuck.uuid).execute();
    await srv.advance(61_000);
    assert.equal(await status(alice, stuck), 'stopped');
    assert.deepEqual((await logOf(stuck.uuid)).slice(-1), ['heal']);
    const pending = await srv.services.store.db
      .selectFrom('timers')
      .select(['kind', 'due_ms'])
      .where('kind', '=', 'servers.reconcile')
      .where('state', '=', 'pending')
      .execute();
    assert.equal(pending.length, 1, 'exactly one next run is scheduled');
    assert.ok(Number(pending[0].due_ms) > srv.clock.now().getTime(), 'the next run is in the future');
  });
});

describe('operator simulation commands', () => {
  test('stratus sim drive/server: written data accrues while running; events run in the service', async () => {
    const { simCommand } = await import('../../src/cli/sim.js');
    const s = await running(alice);
    const d = await drive(alice);
    // Attach while stopped, run for 10 s, stop: 10 s x the write rate lands on the disk.
    await act(alice, s, 'stop');
    await srv.advance(2_000);
    await alice.put(s.resource_uri, { drives: [{ drive: d.uuid }] });
    await act(alice, s, 'start');
    await srv.advance(3_000);
    srv.clock.advance(10_000);
    await act(alice, s, 'stop');
    await srv.advance(2_000);
    const shown = await simCommand(srv.services, ['drive', d.uuid], {}, 'usage');
    const written = Number(/: (\d+) of/.exec(shown)![1]);
    assert.ok(written >= 10 * 65_536, shown);
    assert.match(await simCommand(srv.services, ['drive', d.uuid], { written: '1000' }, 'usage'), /: 1000 of/);
    await act(alice, s, 'start');
    await srv.advance(3_000);
    assert.match(await simCommand(srv.services, ['server', s.uuid, 'poweroff'], {}, 'usage'), /scheduled/);
    await srv.scheduler.runDue();
    assert.equal(await status(alice, s), 'stopped');
    await assert.rejects(simCommand(srv.services, ['server', s.uuid, 'explode'], {}, 'usage'));
    await assert.rejects(simCommand(srv.services, ['server', crypto.randomUUID(), 'crash'], {}, 'usage'), (e: any) => e.status === 404);
  });
});
