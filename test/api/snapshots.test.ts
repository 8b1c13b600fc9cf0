import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expectError } from '../helpers/errors.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { Client } from '../helpers/client.js';
import { golden, goldenText, sameShape } from '../helpers/golden.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { simCommand } from '../../src/cli/sim.js';
import { snapshotUsage } from '../../src/resources/snapshots/of-drive.js';
import { assetPath } from '../../src/assets.js';
import { FUTURE_YEAR } from '../helpers/clock.js';

type User = Client & { uuid: string; email: string };
let srv: TestServer;
let alice: User, bob: User;
const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
const SNAPSHOT_MS = 2_000;

before(async () => {
  srv = await startServer();
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

async function drive(c: Client, body: Record<string, unknown> = {}): Promise<any> {
  const res = await c.post('drives/', { media: 'disk', name: 'snap-src', size: GiB, ...body });
  assert.equal(res.status, 201, res.text);
  await srv.advance(2_000);
  return (await c.get(res.json.objects[0].resource_uri)).json;
}

async function snapshot(c: Client, body: Record<string, unknown>, settle = true): Promise<any> {
  const res = await c.post('snapshots/', body);
  assert.equal(res.status, 201, res.text);
  if (settle) await srv.advance(SNAPSHOT_MS);
  return res.json.objects[0];
}

const get = async (c: Client, uri: string) => (await c.get(uri)).json;
const sizeOf = async (c: Client, snap: { resource_uri: string }) => (await get(c, snap.resource_uri)).allocated_size;
const setWritten = (uuid: string, bytes: number) => simCommand(srv.services, ['drive', uuid], { written: String(bytes) }, 'usage');
const auditOf = (uuid: string) => srv.services.store.db.selectFrom('audit_log').selectAll().where('uuid', '=', uuid).orderBy('seq').execute();

/** The recorded request, aimed at one of the caller's drives. */
function recordedCreate(driveUuid: string) {
  const body = golden('request_snapshot_create');
  body.objects[0].drive = driveUuid;
  return body;
}

describe('snapshot lifecycle', () => {
  test('create as recorded: 201, creating with a null size, listed by the drive at once; available after the delay', async () => {
    const d = await drive(alice);
    const res = await alice.post('snapshots/', recordedCreate(d.uuid));
    assert.equal(res.status, 201, res.text);
    sameShape(res.json, golden('response_snapshot_create'));
    const s = res.json.objects[0];
    assert.equal(res.headers.location, `${srv.base}${s.resource_uri}`);
    assert.equal(s.status, 'creating');
    assert.equal(s.allocated_size, null);
    assert.deepEqual([s.name, s.meta, s.drive], ['first_snapshot', { key: 'val' }, { resource_uri: `/api/2.0/drives/${d.uuid}/`, uuid: d.uuid }]);
    assert.deepEqual(s.owner, { resource_uri: `/api/2.0/user/${alice.uuid}/`, uuid: alice.uuid });
    assert.match(s.timestamp, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6}\+00:00$/);
    sameShape({ objects: [(await alice.get(s.resource_uri)).json] }, { objects: [golden('response_snapshot_get')] });
    const withOne = await get(alice, d.resource_uri);
    assert.deepEqual(withOne.snapshots, [{ resource_uri: s.resource_uri, uuid: s.uuid }]);
    sameShape(withOne, golden('response_drive_with_one_snapshot'));

    // The clock also follows real time: leave a loaded machine 1.5 s of it before the delay ends.
    srv.clock.advance(SNAPSHOT_MS - 1_500);
    await srv.scheduler.runDue();
    assert.equal((await get(alice, s.resource_uri)).status, 'creating', 'not before the delay');
    await srv.advance(1_500);
    const done = await get(alice, s.resource_uri);
    assert.equal(done.status, 'available');
    assert.equal(done.allocated_size, 0, 'nothing changed since');
    sameShape({ objects: [done] }, { objects: [golden('response_snapshot_edit')] });

    const second = await snapshot(alice, { drive: d.uuid });
    const withTwo = await get(alice, d.resource_uri);
    assert.deepEqual(
      withTwo.snapshots.map((x: any) => x.uuid),
      [s.uuid, second.uuid],
    );
    sameShape(withTwo, golden('response_drive_with_two_snapshots'));
    assert.deepEqual(
      (await auditOf(s.uuid)).map((e) => [e.category, e.action, e.actor_uuid]),
      [['Snapshots', 'create', alice.uuid]],
    );
  });

  test('without a name: <drive uuid>__<YYYY-MM-DD>__<HH_MM_SS> in UTC; several in one request', async () => {
    const d = await drive(alice);
    srv.clock.set(new Date(`${FUTURE_YEAR}-06-05T09:53:28.051Z`));
    const res = await alice.post('snapshots/', { objects: [{ drive: d.uuid }, { drive: { uuid: d.uuid } }, { drive: `/api/2.0/drives/${d.uuid}/` }] });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.json.objects.length, 3);
    for (const s of res.json.objects) {
      assert.equal(s.name, `${d.uuid}__${FUTURE_YEAR}-06-05__09_53_28`);
      assert.match(s.timestamp, new RegExp(`^${FUTURE_YEAR}-06-05 09:53:28\\.\\d{3}000\\+00:00$`));
    }
    assert.equal((await get(alice, d.resource_uri)).snapshots.length, 3);
  });

  test('list and detail are full objects as recorded; drive=, name, name__contains, uuid, fields= and XML', async () => {
    const c = await srv.user();
    const [d1, d2] = [await drive(c), await drive(c)];
    const a = await snapshot(c, { drive: d1.uuid, name: 'alpha one' });
    const b = await snapshot(c, { drive: d1.uuid, name: 'beta' });
    const z = await snapshot(c, { drive: d2.uuid, name: 'gamma' });
    const list = await c.get('snapshots/?limit=0');
    assert.equal(list.status, 200);
    sameShape(list.json, golden('response_snapshot_list'));
    assert.deepEqual(
      list.json.objects.map((o: any) => o.uuid),
      [a.uuid, b.uuid, z.uuid],
    );
    assert.deepEqual(list.json.meta, { limit: 0, offset: 0, total_count: 3 });
    sameShape((await c.get('snapshots/detail/')).json, golden('response_snapshot_list_detail'));
    assert.equal((await c.get('snapshots/')).json.meta.limit, 20, 'default limit');

    const forDrive = await c.get(`snapshots/detail/?limit=0&drive=${d1.uuid}`);
    sameShape(forDrive.json, golden('response_snapshot_list_for_drive'));
    assert.deepEqual(
      forDrive.json.objects.map((o: any) => o.uuid),
      [a.uuid, b.uuid],
    );
    const uuids = async (q: string) => (await c.get(`snapshots/?${q}`)).json.objects.map((o: any) => o.uuid);
    assert.deepEqual(await uuids(`drive=${d1.uuid},${d2.uuid}`), [a.uuid, b.uuid, z.uuid]);
    assert.deepEqual(await uuids(`drive=${crypto.randomUUID()}`), []);
    assert.deepEqual(await uuids('name=beta'), [b.uuid]);
    assert.deepEqual(await uuids('name__contains=ALPHA'), [a.uuid]);
    assert.deepEqual(await uuids(`uuid=${z.uuid}`), [z.uuid]);
    assert.deepEqual(await uuids(`drive=${d1.uuid}`), await uuids(`drive=${d1.uuid}&limit=0`));
    const cut = (await c.get('snapshots/?fields=uuid,status')).json.objects[0];
    assert.deepEqual(Object.keys(cut).sort(), ['status', 'uuid']);
    const viaXml = await c.request('POST', 'snapshots/', {
      raw: `<?xml version="1.0" encoding="UTF-8"?><request><drive>${d2.uuid}</drive><name>from xml</name></request>`,
      headers: { 'content-type': 'application/xml', accept: 'application/xml' },
    });
    assert.equal(viaXml.status, 201, viaXml.text);
    assert.match(viaXml.text, /<name>from xml<\/name>/);
    const made = (await c.get('snapshots/?name=from%20xml')).json.objects[0];
    assert.equal(made.drive.uuid, d2.uuid);
    assert.equal((await c.delete(made.resource_uri)).status, 204);
    const xml = await c.get(`snapshots/${a.uuid}/?format=xml`);
    assert.equal(xml.status, 200);
    assert.match(xml.headers['content-type'] as string, /xml/);
    assert.match(xml.text, /<allocated_size type="integer">0<\/allocated_size>/);
    // Another user's drive filter shows nothing of theirs.
    assert.deepEqual((await bob.get(`snapshots/?drive=${d1.uuid}`)).json.objects, []);
  });

  test('schema as recorded; OPTIONS; the list answers no PUT', async () => {
    const res = await alice.get('snapshots/schema/');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, golden('response_snapshot_schema'));
    assert.equal((await alice.request('OPTIONS', 'snapshots/')).status, 200);
    expectError(await alice.put('snapshots/', { objects: [] }), 405, 'validation', null);
  });

  test('PUT as recorded: name and meta change, the drive may be repeated but not moved; tags', async () => {
    const d = await drive(alice);
    const s = await snapshot(alice, recordedCreate(d.uuid));
    const edit = golden('request_snapshot_edit');
    edit.drive = d.uuid;
    const res = await alice.put(s.resource_uri, edit);
    assert.equal(res.status, 200, res.text);
    sameShape(res.json, golden('response_snapshot_edit'));
    assert.equal(res.json.name, 'first_snapshot_renamed');
    assert.deepEqual(res.json.meta, { key: 'val_changed', new_key: 'new_key_value' });
    assert.equal(res.json.timestamp, s.timestamp);
    const other = await drive(alice);
    expectError(await alice.put(s.resource_uri, { drive: other.uuid }), 400, 'validation', 'drive');
    assert.equal((await get(alice, s.resource_uri)).drive.uuid, d.uuid);
    const tag = (await alice.post('tags/', { name: 'snaps' })).json.objects[0];
    assert.deepEqual((await alice.put(s.resource_uri, { tags: [tag.uuid] })).json.tags, [{ resource_uri: tag.resource_uri, uuid: tag.uuid }]);
    assert.deepEqual(
      (await alice.get(`snapshots/?tag=${tag.uuid}`)).json.objects.map((o: any) => o.uuid),
      [s.uuid],
    );
    assert.deepEqual(
      (await alice.get(`tags/${tag.uuid}/`)).json.resources.map((r: any) => r.res_type),
      ['snapshots'],
    );
    // Read-only keys sent back are ignored.
    const back = await alice.put(s.resource_uri, { ...res.json, status: 'creating', allocated_size: 5, timestamp: 'x' });
    assert.equal(back.status, 200, back.text);
    assert.deepEqual([back.json.status, back.json.allocated_size, back.json.timestamp], ['available', 0, s.timestamp]);
    assert.deepEqual(
      (await auditOf(s.uuid)).map((e) => e.action),
      ['create', 'update', 'update', 'update'],
    );
  });
});

describe('size from the simulated data', () => {
  test('a snapshot holds what its drive changed since it was taken, never more than the drive', async () => {
    const d = await drive(alice);
    await setWritten(d.uuid, 100 * MiB);
    const a = await snapshot(alice, { drive: d.uuid, name: 'a' });
    assert.equal(await sizeOf(alice, a), 0);
    await setWritten(d.uuid, 300 * MiB);
    assert.equal(await sizeOf(alice, a), 200 * MiB);
    const b = await snapshot(alice, { drive: d.uuid, name: 'b' });
    assert.equal(await sizeOf(alice, b), 0);
    await setWritten(d.uuid, 350 * MiB);
    assert.equal(await sizeOf(alice, a), 250 * MiB);
    assert.equal(await sizeOf(alice, b), 50 * MiB);
    // Moving the clock changes nothing on a drive no guest writes to.
    await srv.advance(3_600_000);
    assert.equal(await sizeOf(alice, a), 250 * MiB);
    const shown = await get(alice, d.resource_uri);
    assert.equal(shown.runtime.snapshots_allocated_size, 300 * MiB);
    sameShape(shown.runtime, golden('response_drive_with_two_snapshots').runtime);
    // Erasing counts as change; no snapshot grows beyond the drive.
    await setWritten(d.uuid, 0);
    await setWritten(d.uuid, GiB);
    await setWritten(d.uuid, 0);
    assert.equal(await sizeOf(alice, a), GiB);
    assert.equal(await sizeOf(alice, b), GiB);
    // The billing engine's view: snapshot storage per storage type.
    const usage = await snapshotUsage(srv.services, srv.services.store.db, srv.clock.now(), alice.uuid);
    const dssd = usage.filter((u) => u.keys[0] === 'dssd').reduce((sum, u) => sum + u.amount, 0);
    assert.ok(dssd >= 2 * GiB, JSON.stringify(usage));
  });

  test('a running guest grows its drive snapshots as time passes; the growth stops with the guest', async () => {
    const c = await srv.user();
    const d = await drive(c);
    const server = (
      await c.post('servers/', {
        cpu: 1000,
        mem: 512 * MiB,
        name: 'writer',
        vnc_password: 'x',
        drives: [{ drive: d.uuid, device: 'virtio', dev_channel: '0:0' }],
      })
    ).json.objects[0];
    const s = await snapshot(c, { drive: d.uuid });
    assert.equal((await c.post(`${server.resource_uri}action/?do=start`, {})).status, 202);
    await srv.advance(5_000);
    const before = await sizeOf(c, s);
    await srv.advance(10_000);
    const grown = await sizeOf(c, s);
    const rate = srv.services.config.delays['drive.write_rate'];
    assert.ok(grown - before >= 10 * rate, `${before} -> ${grown}`);
    const live = await get(c, d.resource_uri);
    assert.ok(live.runtime.snapshots_allocated_size >= grown);
    assert.equal((await c.post(`${server.resource_uri}action/?do=stop`, {})).status, 202);
    await srv.advance(5_000);
    const stopped = await sizeOf(c, s);
    await srv.advance(60_000);
    assert.equal(await sizeOf(c, s), stopped, 'no writes after power-off');
    assert.ok(stopped >= grown);
  });
});

describe('clone', () => {
  test('as recorded: 202 and the bare drive, cloning_dst with a job; named as the snapshot; holds the data of then', async () => {
    const c = await srv.user();
    const d = await drive(c, { media: 'cdrom', size: 2 * GiB });
    await setWritten(d.uuid, 500 * MiB);
    const s = await snapshot(c, { drive: d.uuid });
    await setWritten(d.uuid, 700 * MiB);
    const recorded = goldenText('request_snapshot_clone');
    const avoid = /avoid=([0-9a-f-]+)/.exec(recorded)![1];
    const res = await c.post(`${s.resource_uri}action/?do=clone&avoid=${avoid}`, {});
    assert.equal(res.status, 202, res.text);
    const want = golden('response_snapshot_clone');
    want.resource_uri = want.resource_uri.resource_uri; // the recording renders it nested: a bug of that dump (reference §7.2)
    sameShape(res.json, want);
    const clone = res.json;
    assert.equal(clone.status, 'cloning_dst');
    assert.equal(clone.name, s.name);
    assert.deepEqual([clone.media, clone.size, clone.storage_type], ['cdrom', 2 * GiB, 'dssd']);
    assert.equal(clone.jobs.length, 1);
    assert.deepEqual(clone.owner.uuid, c.uuid);
    await srv.advance(60_000);
    assert.equal((await get(c, clone.resource_uri)).status, 'unmounted');
    assert.equal((await get(c, clone.jobs[0].resource_uri)).state, 'success');
    assert.match(await simCommand(srv.services, ['drive', clone.uuid], {}, 'usage'), new RegExp(`: ${500 * MiB} of`));
    assert.deepEqual(
      (await auditOf(s.uuid)).map((e) => [e.category, e.action]),
      [
        ['Snapshots', 'create'],
        ['Snapshots', 'clone_src'],
      ],
    );
    // name, media and affinities may be given; a body may be empty or absent.
    const named = await c.post(`${s.resource_uri}action/?do=clone`, { name: 'restored', media: 'disk', affinities: ['ssd'] });
    assert.equal(named.status, 202, named.text);
    assert.deepEqual([named.json.name, named.json.media, named.json.affinities], ['restored', 'disk', ['ssd']]);
    assert.equal((await c.request('POST', `${s.resource_uri}action/?do=clone`)).status, 202);
  });

  test('the profile clone naming applies; bad input and a creating snapshot are refused', async () => {
    const c = await srv.user();
    const d = await drive(c);
    const s = await snapshot(c, { drive: d.uuid, name: 'nightly' });
    assert.equal((await c.put('profile/', { clone_naming: 'COUNTER' })).status, 200);
    const first = (await c.post(`${s.resource_uri}action/?do=clone`, {})).json;
    assert.notEqual(first.name, 'nightly');
    assert.match(first.name, /^nightly/);
    expectError(await c.post(`${s.resource_uri}action/?do=clone&avoid=nope`, {}), 400, 'validation', 'avoid');
    expectError(await c.post(`${s.resource_uri}action/?do=clone`, { media: 'tape' }), 400, 'validation', 'media');
    expectError(await c.post(`${s.resource_uri}action/?do=clone`, { name: 5 }), 400, 'validation', 'name');
    expectError(await c.post(`${s.resource_uri}action/?do=explode`, {}), 400, 'validation', 'do');
    const fresh = await snapshot(c, { drive: d.uuid }, false);
    expectError(await c.post(`${fresh.resource_uri}action/?do=clone`, {}), 403, 'permission', null);
    assert.equal((await c.post(`snapshots/${crypto.randomUUID()}/action/?do=clone`, {})).status, 404);
  });
});

describe('delete', () => {
  test('one: 204, then 404; the drive forgets it; a creating snapshot may go too', async () => {
    const d = await drive(alice);
    const s = await snapshot(alice, { drive: d.uuid });
    const creating = await snapshot(alice, { drive: d.uuid }, false);
    const res = await alice.delete(s.resource_uri);
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    assert.equal((await alice.get(s.resource_uri)).status, 404);
    assert.equal((await alice.delete(creating.resource_uri)).status, 204);
    await srv.advance(SNAPSHOT_MS);
    assert.equal((await alice.get(creating.resource_uri)).status, 404, 'its timer does not bring it back');
    assert.deepEqual((await get(alice, d.resource_uri)).snapshots, []);
    assert.deepEqual(
      (await auditOf(s.uuid)).map((e) => e.action),
      ['create', 'delete'],
    );
  });

  test('bulk: snapshots of mounted and unmounted drives in one request; all or nothing', async () => {
    const c = await srv.user();
    const [mounted, loose] = [await drive(c), await drive(c)];
    const server = await c.post('servers/', {
      cpu: 1000,
      mem: 512 * MiB,
      name: 'holder',
      vnc_password: 'x',
      drives: [{ drive: mounted.uuid, device: 'virtio', dev_channel: '0:0' }],
    });
    assert.equal(server.status, 201, server.text);
    assert.equal((await get(c, mounted.resource_uri)).status, 'mounted');
    const snaps = [await snapshot(c, { drive: mounted.uuid }), await snapshot(c, { drive: loose.uuid }), await snapshot(c, { drive: loose.uuid })];
    const theirs = await snapshot(bob, { drive: (await drive(bob)).uuid });

    // One foreign or missing uuid: 404 and nothing is deleted.
    for (const bad of [theirs.uuid, crypto.randomUUID()]) {
      const res = await c.request('DELETE', 'snapshots/', { body: { objects: [{ uuid: snaps[0].uuid }, { uuid: bad }] } });
      expectError(res, 404, 'notexist', null);
      assert.equal((await c.get(snaps[0].resource_uri)).status, 200);
    }
    expectError(await c.request('DELETE', 'snapshots/', { body: { objects: [{ name: 'x' }] } }), 400, 'validation', 'objects');
    expectError(await c.request('DELETE', 'snapshots/', { body: { objects: 'all' } }), 400, 'validation', 'objects');

    // Named twice (as a uuid and as a URI) is deleted once.
    const named = [...snaps.map((s) => ({ uuid: s.uuid })), { resource_uri: snaps[0].resource_uri }];
    const res = await c.request('DELETE', 'snapshots/', { body: { objects: named } });
    assert.equal(res.status, 204, res.text);
    for (const s of snaps) assert.equal((await c.get(s.resource_uri)).status, 404);
    assert.deepEqual((await get(c, mounted.resource_uri)).snapshots, []);
    assert.deepEqual((await get(c, loose.resource_uri)).snapshots, []);
    assert.deepEqual(
      (await auditOf(snaps[0].uuid)).map((e) => e.action),
      ['create', 'delete'],
    );
    assert.equal((await bob.get(theirs.resource_uri)).status, 200);
  });

  test('deleting a drive deletes its snapshots; the drive= filter is then empty', async () => {
    const d = await drive(alice);
    const s = [await snapshot(alice, { drive: d.uuid }), await snapshot(alice, { drive: d.uuid })];
    assert.equal((await alice.delete(d.resource_uri)).status, 204);
    for (const x of s) {
      assert.equal((await alice.get(x.resource_uri)).status, 404);
      assert.deepEqual(
        (await auditOf(x.uuid)).map((e) => e.action),
        ['create', 'delete'],
      );
    }
    assert.deepEqual((await alice.get(`snapshots/detail/?drive=${d.uuid}`)).json.objects, []);
    assert.deepEqual(
      await srv.services.store.db
        .selectFrom('sim_state')
        .select('uuid')
        .where(
          'uuid',
          'in',
          s.map((x) => x.uuid),
        )
        .execute(),
      [],
    );
  });
});

describe('rules', () => {
  test('bad input: each a 4xx in the error format on the right point, and nothing is created', async () => {
    const c = await srv.user();
    const d = await drive(c);
    const theirs = await drive(bob);
    const creating = (await c.post('drives/', { media: 'disk', name: 'new', size: GiB })).json.objects[0];
    for (const [body, status, type, point] of [
      [{}, 400, 'validation', 'drive'],
      [{ drive: crypto.randomUUID() }, 400, 'validation', 'drive'],
      [{ drive: 'not-a-uuid' }, 400, 'validation', 'drive'],
      [{ drive: 42 }, 400, 'validation', 'drive'],
      [{ drive: { name: 'x' } }, 400, 'validation', 'drive'],
      [{ drive: theirs.uuid }, 400, 'validation', 'drive'],
      [{ drive: d.uuid, name: 5 }, 400, 'validation', 'name'],
      [{ drive: d.uuid, meta: 'x' }, 400, 'validation', 'meta'],
      [{ drive: d.uuid, meta: { k: { nested: true } } }, 400, 'validation', 'meta'],
      [{ drive: d.uuid, tags: 'x' }, 400, 'validation', 'tags'],
      [{ drive: creating.uuid }, 403, 'permission', 'drive'],
      [{ objects: [{ drive: d.uuid }, { drive: crypto.randomUUID() }] }, 400, 'validation', 'drive'],
    ] as const)
      expectError(await c.post('snapshots/', body), status, type, point);
    expectError(await c.request('POST', 'snapshots/', { raw: '{"drive": ', headers: { 'content-type': 'application/json' } }), 400, 'validation', null);
    assert.equal((await c.get('snapshots/')).json.meta.total_count, 0);
    assert.deepEqual((await get(c, d.resource_uri)).snapshots, []);
    assert.equal((await c.get(`snapshots/not-a-uuid/`)).status, 404);
    // A library drive is no drive of the caller's.
    const lib = srv.services.config.libdrives[0].uuid;
    assert.equal((await c.post('snapshots/', { drive: lib })).status, 403);
  });

  test('limits from capabilities: per drive and per account, with the current count shown', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-caps-'));
    const caps = JSON.parse(readFileSync(assetPath('resources/capabilities/defaults.json'), 'utf8'));
    caps.snapshots = { current: 0, max: 3, max_per_drive: 2 };
    writeFileSync(join(dir, 'caps.json'), JSON.stringify(caps));
    const small = await startServer({ capabilities: join(dir, 'caps.json') });
    try {
      const c = await small.user();
      const mk = async () => {
        const res = await c.post('drives/', { media: 'disk', name: 'd', size: GiB });
        await small.advance(2_000);
        return res.json.objects[0].uuid as string;
      };
      const [d1, d2] = [await mk(), await mk()];
      assert.equal((await c.post('snapshots/', { objects: [{ drive: d1 }, { drive: d1 }] })).status, 201);
      expectError(await c.post('snapshots/', { drive: d1 }), 403, 'permission', 'drive');
      assert.equal((await c.post('snapshots/', { drive: d2 })).status, 201);
      assert.deepEqual((await c.get('capabilities/')).json.snapshots, { current: 3, max: 3, max_per_drive: 2 });
      expectError(await c.post('snapshots/', { drive: d2 }), 403, 'permission', 'snapshots');
      // One request over the limit creates none of its snapshots.
      const one = (await c.get('snapshots/')).json.objects[0];
      assert.equal((await c.delete(one.resource_uri)).status, 204);
      expectError(await c.post('snapshots/', { objects: [{ drive: d2 }, { drive: d2 }] }), 403, 'permission', 'drive');
      assert.equal((await c.get('snapshots/')).json.meta.total_count, 2);
      assert.equal((await c.post('snapshots/', { drive: d2 })).status, 201);
      assert.equal((await (await small.user()).get('capabilities/')).json.snapshots.current, 0, "another account's count");
    } finally {
      await small.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('unnamed in capabilities (the recorded default), a drive still holds at most 90 snapshots', async () => {
    const c = await srv.user();
    const d = await drive(c);
    const res = await c.post('snapshots/', { objects: Array.from({ length: 90 }, () => ({ drive: d.uuid })) });
    assert.equal(res.status, 201, res.text);
    expectError(await c.post('snapshots/', { drive: d.uuid }), 403, 'permission', 'drive');
    assert.equal((await c.post('snapshots/', { drive: (await drive(c)).uuid })).status, 201);
    assert.deepEqual((await c.get('capabilities/')).json.snapshots, { current: 91, max: 600 });
  });

  test('sharing through ACLs: LIST sees, EDIT edits, CLONE clones into the grantee account, DELETE deletes', async () => {
    const owner = await srv.user();
    const grantee = await srv.user();
    const d = await drive(owner);
    const s = await snapshot(owner, { drive: d.uuid, name: 'shared' });
    const hidden = await snapshot(owner, { drive: d.uuid, name: 'hidden' });
    const tag = (await owner.post('tags/', { name: 'share' })).json.objects[0];
    assert.equal((await owner.put(s.resource_uri, { tags: [tag.uuid] })).status, 200);
    const acl = (await owner.post('acls/', { grantees: [{ uuid: grantee.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: tag.uuid }] })).json
      .objects[0];

    assert.deepEqual(
      (await grantee.get('snapshots/')).json.objects.map((o: any) => o.uuid),
      [s.uuid],
    );
    const seen = await get(grantee, s.resource_uri);
    assert.deepEqual([seen.permissions, seen.grantees], [['LIST'], []]);
    assert.equal((await grantee.get(hidden.resource_uri)).status, 404);
    expectError(await grantee.put(s.resource_uri, { name: 'mine' }), 403, 'permission', null);
    expectError(await grantee.post(`${s.resource_uri}action/?do=clone`, {}), 403, 'permission', null);
    expectError(await grantee.delete(s.resource_uri), 403, 'permission', null);
    // The drive itself is not shared: no snapshots of it for the grantee.
    expectError(await grantee.post('snapshots/', { drive: d.uuid }), 400, 'validation', 'drive');

    const rules = ['LIST', 'EDIT', 'CLONE', 'DELETE'].map((permission) => ({ permission }));
    const put = await owner.put(acl.resource_uri, { ...acl, rules });
    assert.equal(put.status, 200, put.text);
    assert.equal((await grantee.put(s.resource_uri, { name: 'renamed' })).json.name, 'renamed');
    const clone = await grantee.post(`${s.resource_uri}action/?do=clone`, {});
    assert.equal(clone.status, 202, clone.text);
    assert.equal(clone.json.owner.uuid, grantee.uuid);
    assert.equal(clone.json.name, 'renamed');
    const logs = await auditOf(s.uuid);
    assert.deepEqual(
      logs.map((e) => [e.action, e.owner_uuid, e.actor_uuid]),
      [
        ['create', owner.uuid, owner.uuid],
        ['update', owner.uuid, owner.uuid],
        ['update', owner.uuid, grantee.uuid],
        ['clone_src', owner.uuid, grantee.uuid],
      ],
    );
    assert.equal((await grantee.delete(s.resource_uri)).status, 204);
    assert.equal((await owner.get(s.resource_uri)).status, 404);
  });

  test('a grantee with EDIT on a drive snapshots it for the drive owner', async () => {
    const owner = await srv.user();
    const grantee = await srv.user();
    const d = await drive(owner);
    const tag = (await owner.post('tags/', { name: 'drive-share' })).json.objects[0];
    assert.equal((await owner.put(d.resource_uri, { tags: [tag.uuid] })).status, 200);
    const acl = await owner.post('acls/', { grantees: [{ uuid: grantee.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: tag.uuid }] });
    expectError(await grantee.post('snapshots/', { drive: d.uuid }), 403, 'permission', 'drive');
    const rules = [{ permission: 'LIST' }, { permission: 'EDIT' }];
    assert.equal((await owner.put(acl.json.objects[0].resource_uri, { ...acl.json.objects[0], rules })).status, 200);
    const made = await grantee.post('snapshots/', { drive: d.uuid });
    assert.equal(made.status, 201, made.text);
    assert.equal(made.json.objects[0].owner.uuid, owner.uuid);
    assert.deepEqual(
      (await owner.get('snapshots/')).json.objects.map((o: any) => o.uuid),
      [made.json.objects[0].uuid],
    );
  });
});

describe('durability', () => {
  test('a restart while a snapshot is creating finishes it after the restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-restart-'));
    const db = engine === 'sqlite' ? { url: join(dir, 'r.db'), drop: async () => {} } : await freshDatabase();
    try {
      const first = await startServer({ db: db.url });
      const u = await first.user();
      const d = (await u.post('drives/', { media: 'disk', name: 'r', size: GiB })).json.objects[0];
      await first.advance(2_000);
      const s = (await u.post('snapshots/', { drive: d.uuid })).json.objects[0];
      await first.close();
      const second = await startServer({ db: db.url });
      try {
        const again = new Client(second.base, u.creds);
        assert.equal((await again.get(s.resource_uri)).json.status, 'creating');
        // The restarted process's clock is past the snapshot's end: its scheduler finishes the work.
        await second.advance(10_000);
        const done = (await again.get(s.resource_uri)).json;
        assert.deepEqual([done.status, done.allocated_size], ['available', 0]);
      } finally {
        await second.close();
      }
    } finally {
      await db.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
