import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type TestServer } from '../helpers/server.js';
import { Client } from '../helpers/client.js';
import { golden, sameShape } from '../helpers/golden.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { cli } from '../helpers/cli.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { BUILTIN_CATALOGUE, parseCatalogue, syncLibrary } from '../../src/resources/libdrives/catalogue.js';

type User = Client & { uuid: string; email: string };
type Entry = Record<string, any>;
let srv: TestServer;
let alice: User, bob: User;

/** The built-in catalogue, as the reference the filters are checked against. */
const CATALOGUE: Entry[] = JSON.parse(readFileSync(BUILTIN_CATALOGUE, 'utf8'));
const ALL = CATALOGUE.map((e) => e.uuid);
const byName = (name: string) => CATALOGUE.find((e) => e.name === name)!;
const UBUNTU = byName('Ubuntu 24.04 LTS Server');
const WINDOWS = CATALOGUE.find((e) => e.os === 'windows')!;
const CDROM = CATALOGUE.find((e) => e.media === 'cdrom')!;

before(async () => {
  srv = await startServer();
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

const get = async (c: Client, uri: string) => (await c.get(uri)).json;
const uuidsOf = (res: { json: any }) => res.json.objects.map((o: any) => o.uuid);

describe('library catalogue', () => {
  test('the built-in catalogue: a dozen-odd Linux preinstalled disks and install CD-ROMs, realistic sizes', () => {
    assert.ok(CATALOGUE.length >= 12, `${CATALOGUE.length} entries`);
    const preinst = CATALOGUE.filter((e) => e.image_type === 'preinst' && e.media === 'disk' && e.os === 'linux');
    const cds = CATALOGUE.filter((e) => e.image_type === 'install' && e.media === 'cdrom');
    assert.ok(preinst.length >= 6 && cds.length >= 4);
    assert.ok(new Set(preinst.map((e) => e.distribution)).size >= 6, 'several distributions');
    for (const e of CATALOGUE) {
      assert.ok(Number.isInteger(e.size) && e.size >= 512 * 1024 ** 2 && e.size % 16384 === 0, e.name);
      assert.equal(typeof e.arch, 'string');
      assert.ok(Array.isArray(e.category) && e.category.length > 0);
    }
    assert.equal(parseCatalogue(readFileSync(BUILTIN_CATALOGUE, 'utf8')).length, CATALOGUE.length);
  });

  test('list: full objects as the golden dump, owner null, storage_type null; default limit 20; detail/ identical', async () => {
    const res = await alice.get('libdrives/?limit=5');
    assert.equal(res.status, 200);
    sameShape(res.json, golden('response_libdrive_list'));
    assert.deepEqual(res.json.meta, { limit: 5, offset: 0, total_count: CATALOGUE.length });
    for (const o of res.json.objects) {
      assert.equal(o.owner, null);
      assert.equal(o.storage_type, null);
      assert.equal(o.status, 'unmounted');
      assert.equal(o.resource_uri, `/api/2.0/libdrives/${o.uuid}/`);
      assert.deepEqual([o.jobs, o.mounted_on, o.tags, o.meta], [[], [], [], {}]);
    }
    const all = await alice.get('libdrives/');
    assert.equal(all.json.meta.limit, 20);
    assert.deepEqual(uuidsOf(all), ALL, 'catalogue order');
    const detail = await alice.get('libdrives/detail/');
    assert.deepEqual(detail.json, all.json);
    // Every user sees the same library.
    assert.deepEqual((await bob.get('libdrives/')).json, all.json);
    assert.equal((await srv.anon().get('libdrives/')).status, 401);
  });

  test('get: the golden shape, with licenses; fields= projects; unknown uuid is 404', async () => {
    const res = await alice.get(`libdrives/${WINDOWS.uuid}/`);
    assert.equal(res.status, 200);
    sameShape(res.json, golden('response_libdrive_get'));
    assert.deepEqual(res.json.licenses, WINDOWS.licenses);
    assert.equal(res.json.paid, true);
    const linux = await get(alice, `libdrives/${UBUNTU.uuid}/`);
    sameShape(linux, golden('response_libdrive_list').objects[0]);
    for (const k of [
      'arch',
      'category',
      'description',
      'distribution',
      'favourite',
      'image_type',
      'install_notes',
      'media',
      'name',
      'os',
      'paid',
      'size',
      'url',
      'version',
    ])
      assert.deepEqual(linux[k], UBUNTU[k], k);
    assert.deepEqual(await get(alice, `libdrives/${UBUNTU.uuid}/?fields=name,uuid`), { name: UBUNTU.name, uuid: UBUNTU.uuid });
    const missing = await alice.get('libdrives/00000000-0000-4000-8000-000000000000/');
    assert.equal(missing.status, 404);
    assert.equal(missing.json[0].error_type, 'notexist');
  });

  test('schema/ is the recorded one', async () => {
    const res = await alice.get('libdrives/schema/');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, golden('response_libdrive_schema'));
  });

  test('read-only: POST, PUT and DELETE are 405 with Allow', async () => {
    for (const [method, path] of [
      ['POST', 'libdrives/'],
      ['DELETE', 'libdrives/'],
      ['PUT', `libdrives/${UBUNTU.uuid}/`],
      ['DELETE', `libdrives/${UBUNTU.uuid}/`],
      ['POST', `libdrives/${UBUNTU.uuid}/`],
    ]) {
      const res = await alice.request(method, path, { body: { name: 'x' } });
      assert.equal(res.status, 405, `${method} ${path}`);
      assert.match(String(res.headers.allow), /GET/);
      assert.equal(res.json[0].error_type, 'validation');
    }
    assert.equal((await get(alice, `libdrives/${UBUNTU.uuid}/`)).name, UBUNTU.name);
  });
});

describe('filters and paging', () => {
  /** A filter's result compared with the same filter applied to the catalogue in JS. */
  async function check(query: string, match: (e: Entry) => boolean) {
    const want = CATALOGUE.filter(match).map((e) => e.uuid);
    const res = await alice.get(`libdrives/?limit=0&${query}`);
    assert.equal(res.status, 200, query);
    assert.deepEqual(uuidsOf(res), want, query);
    assert.equal(res.json.meta.total_count, want.length, query);
    return want.length;
  }

  test('exact filters on the image description; comma = OR, repeated = AND', async () => {
    assert.equal(await check('arch=64', (e) => e.arch === '64'), CATALOGUE.length);
    assert.equal(await check('arch=32', () => false), 0);
    assert.equal(await check('os=windows', (e) => e.os === 'windows'), 1);
    assert.equal(await check('os=linux,windows', () => true), CATALOGUE.length);
    assert.ok((await check('distribution=Ubuntu', (e) => e.distribution === 'Ubuntu')) >= 3);
    await check('distribution=Ubuntu,Debian', (e) => ['Ubuntu', 'Debian'].includes(e.distribution));
    await check('distribution=ubuntu', () => false); // exact is exact
    await check('distribution=Rocky Linux', (e) => e.distribution === 'Rocky Linux');
    assert.ok((await check('image_type=install', (e) => e.image_type === 'install')) >= 4);
    await check('image_type=preinst&distribution=Ubuntu', (e) => e.image_type === 'preinst' && e.distribution === 'Ubuntu');
    await check('image_type=preinst&image_type=install', () => false);
    assert.ok((await check('version=9.4', (e) => e.version === '9.4')) >= 2);
    await check('version=9.4,24.04.1&distribution=AlmaLinux', (e) => ['9.4', '24.04.1'].includes(e.version) && e.distribution === 'AlmaLinux');
  });

  test('category matches when the list contains the value', async () => {
    const db = await check('category=dbserver', (e) => e.category.includes('dbserver'));
    assert.ok(db > 0 && db < CATALOGUE.length);
    await check('category=webserver,dbserver', (e) => e.category.includes('webserver') || e.category.includes('dbserver'));
    await check('category=webserver&category=dbserver', (e) => e.category.includes('webserver') && e.category.includes('dbserver'));
    await check('category=web', () => false);
    await check('category=general&os=windows', (e) => e.category.includes('general') && e.os === 'windows');
  });

  test('name (exact), name__icontains (case-insensitive substring), uuid', async () => {
    await check(`name=${encodeURIComponent(UBUNTU.name)}`, (e) => e.name === UBUNTU.name);
    await check(`name=${encodeURIComponent(`${UBUNTU.name},${CDROM.name}`)}`, (e) => e.name === UBUNTU.name || e.name === CDROM.name);
    await check('name=ubuntu 24.04 lts server', () => false);
    assert.ok((await check('name__icontains=ubuntu', (e) => e.name.toLowerCase().includes('ubuntu'))) >= 3);
    await check('name__icontains=INSTALL%20CD', (e) => e.name.toLowerCase().includes('install cd'));
    await check('name__icontains=linux,suse', (e) => /linux|suse/i.test(e.name));
    await check('name__icontains=%25', () => false); // LIKE wildcards match themselves
    await check('name__icontains=_', () => false);
    await check(`uuid=${UBUNTU.uuid},${WINDOWS.uuid}`, (e) => e.uuid === UBUNTU.uuid || e.uuid === WINDOWS.uuid);
    await check(`uuid=${UBUNTU.uuid}&name__icontains=debian`, () => false);
  });

  test('paging in the database: limit/offset, total_count, limit=0, with and without filters', async () => {
    const pages: string[] = [];
    for (let offset = 0; offset < CATALOGUE.length; offset += 4) {
      const res = await alice.get(`libdrives/?limit=4&offset=${offset}`);
      assert.deepEqual(res.json.meta, { limit: 4, offset, total_count: CATALOGUE.length });
      pages.push(...uuidsOf(res));
    }
    assert.deepEqual(pages, ALL);
    const past = await alice.get(`libdrives/?offset=${CATALOGUE.length + 5}`);
    assert.deepEqual([past.json.objects, past.json.meta.total_count], [[], CATALOGUE.length]);
    const all = await alice.get('libdrives/?limit=0');
    assert.deepEqual([all.json.meta.limit, all.json.objects.length], [0, CATALOGUE.length]);
    const preinst = CATALOGUE.filter((e) => e.image_type === 'preinst').map((e) => e.uuid);
    const page = await alice.get('libdrives/detail/?image_type=preinst&limit=3&offset=3');
    assert.deepEqual(page.json.meta, { limit: 3, offset: 3, total_count: preinst.length });
    assert.deepEqual(uuidsOf(page), preinst.slice(3, 6));
    assert.equal((await alice.get('libdrives/?limit=x')).status, 400);
  });
});

describe('library drives under /drives/', () => {
  test('GET /drives/<library uuid>/ is the drive shape of the golden dump with owner null', async () => {
    const res = await alice.get(`drives/${WINDOWS.uuid}/`);
    assert.equal(res.status, 200);
    sameShape(res.json, golden('response_librdrive_get_through_drives'));
    assert.equal(res.json.owner, null);
    assert.equal(res.json.resource_uri, `/api/2.0/drives/${WINDOWS.uuid}/`);
    assert.equal(res.json.storage_type, 'dssd');
    assert.deepEqual(res.json.runtime, { is_snapshotable: true, snapshots_allocated_size: 0, storage_type: 'dssd' });
    assert.deepEqual([res.json.name, res.json.size, res.json.media, res.json.status], [WINDOWS.name, WINDOWS.size, 'disk', 'unmounted']);
    assert.deepEqual(res.json.licenses, WINDOWS.licenses);
    sameShape(await get(bob, `drives/${UBUNTU.uuid}/`), golden('response_librdrive_get_through_drives'));
  });

  test('never listed in /drives/ (list, detail, uuid filter)', async () => {
    const c = await srv.user();
    await c.post('drives/', { media: 'disk', name: 'own', size: 1024 ** 3 });
    for (const path of ['drives/?limit=0', 'drives/detail/?limit=0', `drives/?uuid=${UBUNTU.uuid}`, `drives/detail/?uuid=${UBUNTU.uuid},${CDROM.uuid}`]) {
      const res = await c.get(path);
      assert.equal(res.status, 200);
      for (const u of uuidsOf(res)) assert.ok(!ALL.includes(u), path);
    }
    assert.equal((await c.get(`drives/?uuid=${UBUNTU.uuid}`)).json.meta.total_count, 0);
  });

  test('a library drive cannot be edited, resized or deleted through /drives/ (403); unknown uuids stay 404', async () => {
    const uri = `drives/${UBUNTU.uuid}/`;
    for (const res of [
      await alice.put(uri, { name: 'mine now' }),
      await alice.delete(uri),
      await alice.post(`${uri}action/?do=resize`, { name: 'x', media: 'disk', size: UBUNTU.size * 2 }),
      await alice.request('DELETE', 'drives/', { body: { objects: [{ uuid: UBUNTU.uuid }] } }),
    ]) {
      assert.equal(res.status, 403, res.text);
      assert.equal(res.json[0].error_type, 'permission');
    }
    assert.equal((await get(alice, `libdrives/${UBUNTU.uuid}/`)).name, UBUNTU.name);
    const nothing = '00000000-0000-4000-8000-000000000001';
    assert.equal((await alice.get(`drives/${nothing}/`)).status, 404);
    assert.equal((await alice.post(`drives/${nothing}/action/?do=clone`, {})).status, 404);
    assert.equal((await alice.post(`libdrives/${nothing}/action/?do=clone`, {})).status, 404);
  });
});

describe('clone into the account', () => {
  test('clone: 202 {objects:[drive]} of the caller in cloning_dst, library meta and licenses, a drive_clone job', async () => {
    const c = await srv.user();
    const res = await c.post(`libdrives/${WINDOWS.uuid}/action/?do=clone`, {});
    assert.equal(res.status, 202, res.text);
    // (drive_clone_naming_none: a recorded clone in cloning_dst, not yet snapshotable, as 7 of the 8 recorded)
    const recorded = golden('response_drive_clone_naming_none');
    sameShape(res.json, recorded);
    const d = res.json.objects[0];
    assert.equal(d.owner.uuid, c.uuid);
    assert.equal(d.status, 'cloning_dst');
    assert.deepEqual([d.name, d.size, d.media, d.storage_type], [WINDOWS.name, WINDOWS.size, 'disk', 'dssd']);
    assert.deepEqual(d.licenses, WINDOWS.licenses, 'licenses stay bound to the clone');
    // The image description lands in meta (reference §1.11 keys).
    assert.deepEqual(d.meta, {
      arch: WINDOWS.arch,
      category: WINDOWS.category.join(','),
      description: WINDOWS.description,
      image_type: 'preinst',
      'install notes': WINDOWS.install_notes,
      os: 'windows',
      paid: 'true',
      url: WINDOWS.url,
    });
    assert.equal(d.jobs.length, 1);
    const job = await get(c, d.jobs[0].resource_uri);
    assert.deepEqual([job.operation, job.state], ['drive_clone', 'started']);
    assert.deepEqual(job.resources, [`/api/2.0/libdrives/${WINDOWS.uuid}/`, d.resource_uri]);
    // The clone is the caller's own drive; nobody else sees it; the library is unchanged.
    assert.ok(uuidsOf(await c.get('drives/?limit=0')).includes(d.uuid));
    assert.equal((await bob.get(d.resource_uri)).status, 404);
    const lib = await get(c, `libdrives/${WINDOWS.uuid}/`);
    assert.deepEqual([lib.jobs, lib.status, lib.owner], [[], 'unmounted', null]);
    await srv.advance(3_600_000);
    const done = await get(c, d.resource_uri);
    assert.equal(done.status, 'unmounted');
    assert.equal(done.runtime.is_snapshotable, true);
    const finished = await get(c, d.jobs[0].resource_uri);
    assert.deepEqual([finished.state, finished.data.progress], ['success', 100]);
    const log = await srv.services.store.db.selectFrom('audit_log').selectAll().where('uuid', '=', d.uuid).execute();
    assert.deepEqual(
      log.map((e) => [e.action, e.owner_uuid]),
      [['clone_dst', c.uuid]],
    );
  });

  test('the body sets name, media, size (never below the source), affinities and storage_type', async () => {
    const c = await srv.user();
    const res = await c.post(`libdrives/${UBUNTU.uuid}/action/?do=clone`, {
      name: 'web-1',
      media: 'cdrom',
      size: UBUNTU.size + 1,
      affinities: ['ssd'],
      storage_type: 'dssd',
    });
    assert.equal(res.status, 202, res.text);
    const d = res.json.objects[0];
    assert.deepEqual([d.name, d.media, d.size, d.affinities, d.storage_type], ['web-1', 'cdrom', UBUNTU.size + 16384, ['ssd'], 'dssd']);
    assert.equal(d.meta.distribution, 'Ubuntu');
    assert.equal(d.meta.version, UBUNTU.version);
    for (const [body, point] of [
      [{ size: UBUNTU.size - 16384 }, 'size'],
      [{ media: 'tape' }, 'media'],
      [{ storage_type: 'floppy' }, 'storage_type'],
      [{ affinities: ['hdd'] }, 'affinities'],
    ] as const) {
      const bad = await c.post(`libdrives/${UBUNTU.uuid}/action/?do=clone`, body);
      assert.equal(bad.status, 400, JSON.stringify(body));
      assert.equal(bad.json[0].error_point, point);
    }
    // An empty body, no body, null values, or the library drive's own definition all clone it as it is.
    const definition = await get(c, `libdrives/${CDROM.uuid}/`);
    for (const body of [undefined, {}, { name: null, size: null }, definition]) {
      const ok = await c.request(
        'POST',
        `libdrives/${CDROM.uuid}/action/?do=clone`,
        body === undefined ? { headers: { 'content-type': 'application/json' } } : { body },
      );
      assert.equal(ok.status, 202, ok.text);
      assert.deepEqual([ok.json.objects[0].name, ok.json.objects[0].media, ok.json.objects[0].size], [CDROM.name, 'cdrom', CDROM.size]);
    }
    const unknown = await c.post(`libdrives/${UBUNTU.uuid}/action/?do=resize`, {});
    assert.equal(unknown.status, 400);
    assert.equal(unknown.json[0].error_point, 'do');
  });

  test("the profile's clone naming names library clones", async () => {
    const c = await srv.user();
    const clone = async () => (await c.post(`libdrives/${UBUNTU.uuid}/action/?do=clone`, {})).json.objects[0].name;
    assert.equal(await clone(), UBUNTU.name, 'NONE keeps the name');
    assert.equal((await c.put('profile/', { clone_naming: 'COUNTER' })).status, 200);
    assert.equal(await clone(), `${UBUNTU.name}_1`);
    assert.equal(await clone(), `${UBUNTU.name}_2`);
    await c.put('profile/', { clone_naming: 'DATE' });
    assert.match(await clone(), new RegExp(`^${UBUNTU.name.replace(/\./g, '\\.')}-\\d{4}-\\d{2}-\\d{2}$`));
    // An explicit name wins over the strategy.
    assert.equal((await c.post(`libdrives/${UBUNTU.uuid}/action/?do=clone`, { name: 'mine' })).json.objects[0].name, 'mine');
  });

  test('cloning through /drives/<library uuid>/action/?do=clone works the same', async () => {
    const c = await srv.user();
    const res = await c.post(`drives/${CDROM.uuid}/action/?do=clone`, { name: 'install-cd' });
    assert.equal(res.status, 202, res.text);
    sameShape(res.json, golden('response_drive_clone_naming_none'));
    const d = res.json.objects[0];
    assert.deepEqual([d.owner.uuid, d.name, d.media, d.status, d.size], [c.uuid, 'install-cd', 'cdrom', 'cloning_dst', CDROM.size]);
    assert.equal(d.meta.image_type, 'install');
    const job = await get(c, d.jobs[0].resource_uri);
    assert.deepEqual(job.resources, [`/api/2.0/libdrives/${CDROM.uuid}/`, d.resource_uri]);
    await srv.advance(3_600_000);
    assert.equal((await get(c, d.resource_uri)).status, 'unmounted');
  });
});

describe('attaching library drives to servers', () => {
  test('a library CD-ROM attaches as it is; a preinstalled library disk is 403 on drives', async () => {
    const own = (await alice.post('drives/', { media: 'disk', name: 'own', size: 1024 ** 3 })).json.objects[0];
    const base = { cpu: 1000, mem: 512 * 1024 ** 2, name: 'lib', vnc_password: 'secret' };
    const ok = await alice.post('servers/', {
      ...base,
      drives: [
        { drive: CDROM.uuid, device: 'ide', dev_channel: '0:0' },
        { drive: own.uuid, device: 'virtio', dev_channel: '0:0' },
      ],
    });
    assert.equal(ok.status, 201, ok.text);
    assert.deepEqual(ok.json.objects[0].drives.map((d: any) => d.drive.uuid).sort(), [CDROM.uuid, own.uuid].sort());
    const bad = await alice.post('servers/', { ...base, drives: [{ drive: UBUNTU.uuid, device: 'virtio', dev_channel: '0:1' }] });
    assert.deepEqual([bad.status, bad.json[0].error_type, bad.json[0].error_point], [403, 'permission', 'drives']);
  });
});

describe('replacing the catalogue', () => {
  const entry = (over: Entry): Entry => ({ ...UBUNTU, ...over });

  test('--libdrives: entries added, changed and removed on restart with the same database; clones stay', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-lib-'));
    const db = engine === 'sqlite' ? { url: join(dir, 'lib.db'), drop: async () => {} } : await freshDatabase();
    try {
      const first = await startServer({ db: db.url });
      const u = await first.user();
      assert.equal((await u.get('libdrives/')).json.meta.total_count, CATALOGUE.length);
      const clone = (await u.post(`libdrives/${CDROM.uuid}/action/?do=clone`, {})).json.objects[0];
      await first.close();

      // The operator's file: Ubuntu renamed, one new image, everything else gone. A pasted list envelope is fine.
      const added = entry({
        uuid: 'a7f3c2d1-0b9e-4c8d-9f6a-5e4d3c2b1a00',
        name: 'Alpine Linux 3.20',
        distribution: 'Alpine',
        version: '3.20.3',
        size: 1024 ** 3,
        category: ['general'],
      });
      const file = join(dir, 'catalogue.json');
      writeFileSync(file, JSON.stringify({ meta: {}, objects: [entry({ name: 'Ubuntu 24.04 LTS (custom)' }), added] }));
      const second = await startServer({ db: db.url, libdrives: file });
      try {
        const again = new Client(second.base, u.creds);
        const list = await again.get('libdrives/?limit=0');
        assert.deepEqual(uuidsOf(list), [UBUNTU.uuid, added.uuid]);
        assert.equal(list.json.objects[0].name, 'Ubuntu 24.04 LTS (custom)');
        assert.equal((await again.get(`libdrives/?name__icontains=alpine`)).json.objects[0].distribution, 'Alpine');
        assert.equal((await again.get(`libdrives/${CDROM.uuid}/`)).status, 404);
        assert.equal((await again.get(`drives/${CDROM.uuid}/`)).status, 404);
        assert.equal((await again.get(`drives/${added.uuid}/`)).json.name, 'Alpine Linux 3.20');
        assert.equal((await again.get(clone.resource_uri)).status, 200, "a removed image's clones are the users' own");
        // Loading again changes nothing.
        assert.deepEqual(await syncLibrary(second.services), { added: 0, changed: 0, removed: 0 });
      } finally {
        await second.close();
      }
      // Back to the built-in catalogue.
      const third = await startServer({ db: db.url });
      try {
        const res = await new Client(third.base, u.creds).get('libdrives/?limit=0');
        assert.deepEqual(uuidsOf(res), [UBUNTU.uuid, ...ALL.filter((x) => x !== UBUNTU.uuid)]);
        assert.equal(res.json.objects[0].name, UBUNTU.name);
      } finally {
        await third.close();
      }
    } finally {
      await db.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an invalid catalogue stops start-up with a ConfigError naming the setting and the problem', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-lib-bad-'));
    try {
      const cases: [unknown, RegExp][] = [
        ['{not json', /not valid JSON/],
        [{ nope: 1 }, /must be a JSON list/],
        [[42], /entry 0 is not an object/],
        [[entry({ uuid: 'x' })], /uuid/],
        [[entry({}), entry({})], /appears twice/],
        [[entry({ size: undefined })], /"size" is required/],
        [[entry({ size: 'big' })], /"size"/],
        [[entry({ size: 0 })], /"size"/],
        [[entry({ media: 'tape' })], /"media"/],
        [[entry({ category: 'general' })], /"category"/],
        [[entry({ favourite: 'yes' })], /"favourite"/],
        [[entry({ distrubution: 'x' })], /unknown field "distrubution"/],
        [[entry({ licenses: [{ amount: 1 }] })], /licenses\[0\]/],
        [[entry({ name: '' })], /"name"/],
      ];
      for (const [i, [content, message]] of cases.entries()) {
        const file = join(dir, `c${i}.json`);
        writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
        assert.throws(
          () => loadConfig({ libdrives: file }, {}),
          (e: unknown) => e instanceof ConfigError && /^libdrives: library catalogue .*c\d+\.json: /.test(e.message) && message.test(e.message),
          `case ${i}`,
        );
      }
      assert.throws(
        () => loadConfig({}, { STRATUS_LIBDRIVES: join(dir, 'missing.json') }),
        (e: unknown) => e instanceof ConfigError && /cannot read library catalogue/.test(e.message),
      );
      // A valid file through the environment; an empty list is an empty library.
      writeFileSync(join(dir, 'empty.json'), '[]');
      assert.deepEqual(loadConfig({}, { STRATUS_LIBDRIVES: join(dir, 'empty.json') }).libdrives, []);
      // The recorded list answer itself is a valid catalogue.
      assert.equal(parseCatalogue(JSON.stringify(golden('response_libdrive_list'))).length, 5);
      // The command line: exit code 2 and the message, before anything starts.
      const res = await cli(['users', 'list', '--db', ':memory:', '--libdrives', join(dir, 'c0.json')]);
      assert.equal(res.status, 2);
      assert.match(res.stderr, /libdrives: library catalogue .*not valid JSON/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
