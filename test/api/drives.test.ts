import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type TestServer } from '../helpers/server.js';
import { Client } from '../helpers/client.js';
import { FrozenClock } from '../helpers/clock.js';
import { golden, sameShape } from '../helpers/golden.js';
import { engine, freshDatabase } from '../helpers/db.js';

type User = Client & { uuid: string; email: string };
let srv: TestServer;
let alice: User, bob: User;
const GiB = 1024 ** 3;

before(async () => {
  // A clock that moves only when a test moves it: a job's progress is what the test advanced, not that plus
  // however long the requests took on a loaded machine (the clone's half-way progress read 61 %).
  srv = await startServer({}, undefined, { clock: new FrozenClock() });
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

async function drive(c: Client, body: Record<string, unknown> = {}, settle = true) {
  const res = await c.post('drives/', { objects: [{ media: 'disk', name: 'test_drive_1', size: GiB, ...body }] });
  assert.equal(res.status, 201, res.text);
  if (settle) await srv.advance(2_000);
  return res.json.objects[0];
}
const get = async (c: Client, uri: string) => (await c.get(uri)).json;
const auditOf = (uuid: string) => srv.services.store.db.selectFrom('audit_log').selectAll().where('uuid', '=', uuid).orderBy('seq').execute();

describe('drive lifecycle', () => {
  test('create: 201, status creating, defaults as the golden dump; unmounted after the create delay', async () => {
    const res = await alice.post('drives/', golden('request_drive_create_minimal'));
    assert.equal(res.status, 201);
    sameShape(res.json, golden('response_drive_create_minimal'));
    const d = res.json.objects[0];
    assert.equal(d.status, 'creating');
    assert.deepEqual(d.runtime, { is_snapshotable: null, snapshots_allocated_size: 0, storage_type: 'dssd' });
    assert.deepEqual([d.affinities, d.allow_multimount, d.jobs, d.licenses, d.meta, d.mounted_on, d.snapshots, d.tags], [[], false, [], [], {}, [], [], []]);
    srv.clock.advance(1_000);
    await srv.scheduler.runDue();
    assert.equal((await get(alice, d.resource_uri)).status, 'creating', 'not before the delay');
    await srv.advance(1_000);
    const done = await get(alice, d.resource_uri);
    assert.equal(done.status, 'unmounted');
    assert.equal(done.runtime.is_snapshotable, true);
    sameShape(done, golden('response_drive_get_unmounted'));
  });

  test('sizes: numeric strings accepted, rounded up to 16 KiB; outside capabilities is 400 on size', async () => {
    const d = await drive(alice, { size: '1207959631' }, false);
    assert.equal(d.size, 1207975936);
    for (const size of [1024, 5e15, 0, -1, 'big', 1.5]) {
      const res = await alice.post('drives/', { media: 'disk', name: 'x', size });
      assert.equal(res.status, 400, String(size));
      assert.equal(res.json[0].error_point, 'size');
    }
  });

  test('required fields, choices and storage types are validated', async () => {
    for (const [body, point] of [
      [{ name: 'x', size: GiB }, 'media'],
      [{ media: 'tape', name: 'x', size: GiB }, 'media'],
      [{ media: 'disk', size: GiB }, 'name'],
      [{ media: 'disk', name: 'x' }, 'size'],
      [{ media: 'disk', name: 'x', size: GiB, storage_type: 'zadara' }, 'storage_type'],
      [{ media: 'disk', name: 'x', size: GiB, storage_type: 'floppy' }, 'storage_type'],
      [{ media: 'disk', name: 'x', size: GiB, affinities: ['hdd'] }, 'affinities'],
    ] as const) {
      const res = await alice.post('drives/', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json[0].error_point, point);
    }
  });

  test('name is required to be present, not non-blank: "" is a name (pycloudsigma\'s websocket tests create drives so)', async () => {
    const res = await alice.post('drives/', { media: 'disk', name: '', size: GiB });
    assert.equal(res.status, 201, res.text);
    const d = res.json.objects[0];
    assert.equal(d.name, '');
    await srv.advance(2_000);
    assert.equal((await get(alice, d.resource_uri)).name, '');
    const renamed = await alice.put(d.resource_uri, { name: 'x' });
    assert.equal(renamed.status, 200, renamed.text);
    const blanked = await alice.put(d.resource_uri, { name: '' });
    assert.equal(blanked.status, 200, blanked.text);
    assert.equal(blanked.json.name, '');
  });

  test('bulk create in one request; list is the short form, detail the full one (golden)', async () => {
    const c = await srv.user();
    const res = await c.post('drives/', golden('request_drive_create_bulk'));
    assert.equal(res.status, 201);
    const n = res.json.objects.length;
    assert.ok(n > 1);
    await srv.advance(2_000);
    const list = await c.get('drives/');
    assert.equal(list.json.meta.total_count, n);
    for (const o of list.json.objects) assert.deepEqual(Object.keys(o), ['owner', 'resource_uri', 'status', 'uuid']);
    sameShape(list.json.objects[0], golden('response_drive_list').objects[0], '$.objects[0]');
    const detail = await c.get('drives/detail/');
    sameShape(detail.json.objects[0], golden('response_drive_list_detail').objects[0], '$.objects[0]');
    const just = await c.get('drives/?fields=uuid,status&limit=0');
    for (const o of just.json.objects) assert.deepEqual(Object.keys(o), ['status', 'uuid']);
  });

  test('PUT edits (golden edit); a size change resizes and returns to the previous status', async () => {
    const d = await drive(alice);
    const res = await alice.put(d.resource_uri, golden('request_drive_edit'));
    assert.equal(res.status, 200);
    assert.equal(res.json.media, 'cdrom');
    assert.equal(res.json.name, 'test_drive_y');
    assert.equal(res.json.status, 'unmounted');
    const grow = await alice.put(d.resource_uri, { size: 5 * GiB, storage_type: 'magnetic' });
    assert.equal(grow.json.status, 'resizing');
    // The size before until resized, as recorded (drive_resize).
    assert.equal(grow.json.size, GiB);
    assert.equal(grow.json.storage_type, 'dssd', 'storage type is fixed after creation');
    await srv.advance(3_000);
    const grown = await get(alice, d.resource_uri);
    assert.deepEqual([grown.status, grown.size], ['unmounted', 5 * GiB]);
    const shrink = await alice.put(d.resource_uri, { size: GiB });
    assert.equal(shrink.status, 400);
    assert.equal(shrink.json[0].error_point, 'size');
    const meta = await alice.put(d.resource_uri, { meta: { a: 'b' } });
    assert.deepEqual(meta.json.meta, { a: 'b' });
  });

  test('resize action: 202 {objects:[drive]} resizing; needs a size; busy drives refuse', async () => {
    const d = await drive(alice);
    const res = await alice.post(`${d.resource_uri}action/?do=resize`, { media: 'disk', name: 'test_drive_1', size: 5368709120 });
    assert.equal(res.status, 202);
    assert.equal(res.json.objects[0].status, 'resizing');
    // The size before until resized, as recorded (drive_resize_action).
    assert.equal(res.json.objects[0].size, d.size);
    const again = await alice.post(`${d.resource_uri}action/?do=resize`, { size: 6 * GiB });
    assert.equal(again.status, 403, 'already resizing');
    assert.equal(again.json[0].error_type, 'permission');
    await srv.advance(3_000);
    assert.equal((await get(alice, d.resource_uri)).size, 5368709120);
    assert.equal((await alice.post(`${d.resource_uri}action/?do=resize`, {})).status, 400);
    assert.equal((await alice.post(`${d.resource_uri}action/?do=explode`, {})).status, 400);
  });

  test('delete: 204 then 404; bulk delete is all or nothing; audit entries for each change', async () => {
    const d = await drive(alice);
    await alice.put(d.resource_uri, { name: 'renamed' });
    assert.equal((await alice.delete(d.resource_uri)).status, 204);
    assert.equal((await alice.get(d.resource_uri)).status, 404);
    const actions = (await auditOf(d.uuid)).map((e) => [e.action, e.category, e.success, e.owner_uuid === alice.uuid]);
    assert.deepEqual(actions, [
      ['create', 'Drives', 1, true],
      ['update', 'Drives', 1, true],
      ['delete', 'Drives', 1, true],
    ]);
    const create = (await auditOf(d.uuid))[0];
    assert.deepEqual(JSON.parse(create.details), { media: 'disk', name: 'test_drive_1', size: GiB });
    const [a, b] = [await drive(alice), await drive(alice)];
    const missing = await alice.request('DELETE', 'drives/', { body: { objects: [{ uuid: a.uuid }, { uuid: crypto.randomUUID() }] } });
    assert.equal(missing.status, 404);
    assert.equal((await alice.get(a.resource_uri)).status, 200, 'nothing deleted');
    const ok = await alice.request('DELETE', 'drives/', { body: { objects: [{ uuid: a.uuid }, { uuid: b.uuid }] } });
    assert.equal(ok.status, 204);
    assert.equal((await alice.get(b.resource_uri)).status, 404);
  });

  test('schema matches the golden field set, types and choices', async () => {
    const res = await alice.get('drives/schema/');
    const want = golden('response_drive_schema');
    assert.deepEqual(Object.keys(res.json.fields).sort(), Object.keys(want.fields).sort());
    for (const [k, v] of Object.entries<any>(want.fields)) {
      assert.equal(res.json.fields[k].type, v.type, k);
      assert.equal(res.json.fields[k].readonly, v.readonly, k);
      if (v.choices && k !== 'storage_type') assert.deepEqual([...res.json.fields[k].choices].sort(), [...v.choices].sort(), k);
    }
    assert.deepEqual(res.json.filtering, want.filtering);
  });
});

describe('clone and jobs', () => {
  test('clone: 202 {objects:[drive]} in cloning_dst with a drive_clone job that progresses, then unmounted', async () => {
    const src = await drive(alice, { size: 2 * GiB, meta: { k: 'v' } });
    const res = await alice.post(`${src.resource_uri}action/?do=clone`, { media: 'cdrom', name: 'test_drive_y', size: 1207959631 * 2 });
    assert.equal(res.status, 202);
    const recorded = golden('response_drive_clone');
    // Not snapshotable until copied: null, as 7 of the 8 recorded clones in cloning_dst (this one says true).
    recorded.objects[0].runtime.is_snapshotable = null;
    sameShape(res.json, recorded);
    const dst = res.json.objects[0];
    assert.equal(dst.runtime.is_snapshotable, null);
    assert.equal(dst.status, 'cloning_dst');
    assert.equal(dst.media, 'cdrom');
    assert.equal(dst.size, roundUp(1207959631 * 2));
    assert.equal(dst.jobs.length, 1);
    const job = await get(alice, dst.jobs[0].resource_uri);
    assert.equal(job.state, 'started');
    assert.equal(job.operation, 'drive_clone');
    assert.deepEqual(job.resources, [src.resource_uri, dst.resource_uri]);
    const total = 5_000 + 200 * 3;
    srv.clock.advance(total / 2);
    const half = (await get(alice, dst.jobs[0].resource_uri)).data.progress;
    assert.ok(half >= 40 && half <= 60, `progress ${half}`);
    await srv.advance(total / 2);
    const done = await get(alice, dst.resource_uri);
    assert.equal(done.status, 'unmounted');
    assert.equal(done.runtime.is_snapshotable, true, 'snapshotable once cloned');
    const finished = await get(alice, dst.jobs[0].resource_uri);
    sameShape(finished, golden('response_jobs_drive_clone'));
    assert.deepEqual([finished.state, finished.data.progress], ['success', 100]);
    assert.deepEqual(
      (await get(alice, src.resource_uri)).jobs.map((j: any) => j.uuid),
      [job.uuid],
      'the source lists the job too',
    );
    assert.deepEqual(
      [...(await auditOf(src.uuid)).map((e) => e.action), ...(await auditOf(dst.uuid)).map((e) => e.action)],
      ['create', 'clone_src', 'clone_dst'],
    );
  });

  test('an empty body, no body or null values clone with the source definition', async () => {
    const src = await drive(alice, { name: 'plain' });
    for (const body of [undefined, {}, { name: null, random_vnc_password: null }]) {
      const res = await alice.request(
        'POST',
        `${src.resource_uri}action/?do=clone`,
        body === undefined ? { headers: { 'content-type': 'application/json' } } : { body },
      );
      assert.equal(res.status, 202, res.text);
      assert.equal(res.json.objects[0].name, 'plain');
      assert.equal(res.json.objects[0].size, GiB);
    }
  });

  test('a clone is never smaller than its source; a busy source cannot be cloned', async () => {
    const src = await drive(alice, { size: 2 * GiB });
    const small = await alice.post(`${src.resource_uri}action/?do=clone`, { size: GiB });
    assert.equal(small.status, 400);
    assert.equal(small.json[0].error_point, 'size');
    const creating = await drive(alice, {}, false);
    const busy = await alice.post(`${creating.resource_uri}action/?do=clone`, {});
    assert.equal(busy.status, 403);
    assert.equal(busy.json[0].error_type, 'permission');
  });

  test('clone naming strategies from the profile (golden dumps)', async () => {
    const c = await srv.user();
    const src = await drive(c, { name: 'test_drive_x' });
    const now = srv.clock.now();
    const pad = (n: number) => String(n).padStart(2, '0');
    const day = `${now.getUTCFullYear()}-${pad(now.getUTCMonth() + 1)}-${pad(now.getUTCDate())}`;
    const expected: Record<string, RegExp> = {
      NONE: /^test_drive_x$/,
      COUNTER: /^test_drive_x_1$/,
      DATE: new RegExp(`^test_drive_x-${day}$`),
      TIMESTAMP: new RegExp(`^test_drive_x-${day} \\d\\d:\\d\\d:\\d\\d$`),
    };
    for (const [strategy, want] of Object.entries(expected)) {
      assert.equal((await c.put('profile/', { clone_naming: strategy })).status, 200);
      const res = await c.post(`${src.resource_uri}action/?do=clone`, {});
      assert.match(res.json.objects[0].name, want, strategy);
      const recorded = golden(`response_drive_clone_naming_${strategy.toLowerCase()}`);
      sameShape(res.json, recorded);
    }
    await c.put('profile/', { clone_naming: 'COUNTER' });
    const second = await c.post(`${src.resource_uri}action/?do=clone`, {});
    assert.equal(second.json.objects[0].name, 'test_drive_x_2', 'names in use are skipped');
    await srv.advance(10_000);
    await c.delete(second.json.objects[0].resource_uri);
    const third = await c.post(`${src.resource_uri}action/?do=clone`, {});
    assert.equal(third.json.objects[0].name, 'test_drive_x_2', 'a deleted drive frees its name');
  });

  test("cloning another user's drive needs CLONE and makes a drive the cloner owns", async () => {
    const src = await drive(alice, { name: 'shared-src' });
    assert.equal((await bob.post(`${src.resource_uri}action/?do=clone`, {})).status, 404);
    const tag = (await alice.post('tags/', { name: 'share', resources: [src.uuid] })).json.objects[0];
    await alice.post('acls/', { grantees: [{ uuid: bob.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: tag.uuid }] });
    assert.equal((await bob.post(`${src.resource_uri}action/?do=clone`, {})).status, 403);
    await alice.post('acls/', { grantees: [{ uuid: bob.uuid }], rules: [{ permission: 'CLONE' }], tags: [{ uuid: tag.uuid }] });
    const res = await bob.post(`${src.resource_uri}action/?do=clone`, {});
    assert.equal(res.status, 202);
    assert.equal(res.json.objects[0].owner.uuid, bob.uuid);
    const srcLog = await auditOf(src.uuid);
    assert.equal(srcLog.at(-1)!.action, 'clone_src');
    assert.equal(srcLog.at(-1)!.owner_uuid, alice.uuid);
    assert.equal(srcLog.at(-1)!.actor_uuid, bob.uuid);
  });

  test('deleting a clone target mid-clone fails its job; the source cannot be deleted mid-clone', async () => {
    const src = await drive(alice);
    const dst = (await alice.post(`${src.resource_uri}action/?do=clone`, {})).json.objects[0];
    const busy = await alice.delete(src.resource_uri);
    assert.equal(busy.status, 403);
    assert.equal((await alice.delete(dst.resource_uri)).status, 204);
    const job = await get(alice, dst.jobs[0].resource_uri);
    assert.equal(job.state, 'failed');
    await srv.advance(60_000);
    assert.equal((await alice.get(dst.resource_uri)).status, 404, 'the cancelled clone does not come back');
    assert.equal((await alice.delete(src.resource_uri)).status, 204);
  });

  test('jobs: list (newest change first), state filter, schema (golden); completed jobs expire after 3 days', async () => {
    const c = await srv.user();
    const src = await drive(c);
    const one = (await c.post(`${src.resource_uri}action/?do=clone`, {})).json.objects[0];
    await srv.advance(60_000);
    const two = (await c.post(`${src.resource_uri}action/?do=clone`, {})).json.objects[0];
    const list = await c.get('jobs/');
    assert.deepEqual(
      list.json.objects.map((j: any) => j.uuid),
      [two.jobs[0].uuid, one.jobs[0].uuid],
    );
    assert.deepEqual(
      (await c.get('jobs/?state=success')).json.objects.map((j: any) => j.uuid),
      [one.jobs[0].uuid],
    );
    assert.deepEqual(
      (await c.get('jobs/?state=started')).json.objects.map((j: any) => j.uuid),
      [two.jobs[0].uuid],
    );
    const { fields, ...top } = (await c.get('jobs/schema/')).json;
    const { fields: wantFields, ...wantTop } = golden('response_jobs_schema');
    assert.deepEqual(top, wantTop);
    assert.deepEqual(Object.keys(fields).sort(), Object.keys(wantFields).sort());
    assert.equal((await c.post('jobs/', {})).status, 405);
    assert.equal((await bob.get(one.jobs[0].resource_uri)).status, 404);
    await srv.advance(3 * 24 * 3600 * 1000 + 60_000);
    assert.equal((await c.get(one.jobs[0].resource_uri)).status, 404, 'expired');
    assert.deepEqual((await get(c, one.resource_uri)).jobs, [], 'expired jobs drop out of drives');
  });
});

describe('durability', () => {
  test('a restart in the middle of a clone finishes the clone after the restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-restart-'));
    const db = engine === 'sqlite' ? { url: join(dir, 'r.db'), drop: async () => {} } : await freshDatabase();
    try {
      const first = await startServer({ db: db.url });
      const u = await first.user();
      const src = (await u.post('drives/', { media: 'disk', name: 'r', size: GiB })).json.objects[0];
      await first.advance(2_000);
      const dst = (await u.post(`${src.resource_uri}action/?do=clone`, {})).json.objects[0];
      await first.close();
      const second = await startServer({ db: db.url });
      try {
        const again = new Client(second.base, u.creds);
        assert.equal((await again.get(dst.resource_uri)).json.status, 'cloning_dst');
        // The restarted process's clock is past the clone's end: its scheduler finishes the work.
        await second.advance(10_000);
        assert.equal((await again.get(dst.resource_uri)).json.status, 'unmounted');
        assert.equal((await again.get(dst.jobs[0].resource_uri)).json.state, 'success');
      } finally {
        await second.close();
      }
    } finally {
      await db.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function roundUp(n: number) {
  return Math.ceil(n / 16384) * 16384;
}
