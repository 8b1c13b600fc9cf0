import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { fixture, golden, sameShape } from '../helpers/golden.js';
import { resolvePubkeyUuids } from '../../src/resources/keypairs/keypairs.js';
import { ApiError } from '../../src/core/errors.js';
import { encryptedRsaPem } from '../helpers/keys.js';

type User = Client & { uuid: string; email: string };
let srv: TestServer;
let alice: User, bob: User;

before(async () => {
  srv = await startServer();
  [alice, bob] = [await srv.user(), await srv.user()];
});
after(() => srv.close());

/** `ssh-keygen -l -E md5` computed independently: MD5 of the base64-decoded second field. */
const md5Of = (publicKey: string) =>
  createHash('md5')
    .update(Buffer.from(publicKey.trim().split(/\s+/)[1], 'base64'))
    .digest('hex')
    .match(/../g)!
    .join(':');

/** The OpenSSH `ssh-rsa` line of a PEM private key, derived independently (JWK n and e). */
function sshRsaOf(privatePem: string): string {
  const jwk = createPublicKey(privatePem).export({ format: 'jwk' });
  const len = (b: Buffer) => {
    const out = Buffer.alloc(4);
    out.writeUInt32BE(b.length);
    return Buffer.concat([out, b]);
  };
  const mpint = (b64u: string) => {
    const b = Buffer.from(b64u, 'base64url');
    return len(b[0] & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
  };
  return `ssh-rsa ${Buffer.concat([len(Buffer.from('ssh-rsa')), mpint(jwk.e!), mpint(jwk.n!)]).toString('base64')}`;
}

async function create(c: Client, body: Record<string, unknown>) {
  const res = await c.post('keypairs/', { objects: [body] });
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0];
}

function expect400(res: { status: number; json: any; text: string }, point: string) {
  assert.equal(res.status, 400, res.text);
  assert.equal(res.json[0].error_type, 'validation');
  assert.equal(res.json[0].error_point, point);
}

const selfGen = golden('request_self_gen_keypair_create').objects[0];
const pubOnly = golden('request_pub_key_only_keypair_create').objects[0];

describe('keypairs: the three create modes', () => {
  test('at most 10 generated pairs per request: more is a 400 on objects and nothing is created', async () => {
    const before = (await alice.get('keypairs/?limit=0')).json.meta.total_count;
    const res = await alice.post('keypairs/', { objects: Array.from({ length: 11 }, (_, i) => ({ name: `gen-${i}` })) });
    assert.deepEqual([res.status, res.json[0].error_type, res.json[0].error_point], [400, 'validation', 'objects']);
    assert.equal((await alice.get('keypairs/?limit=0')).json.meta.total_count, before);
  });

  test('neither key: a fresh RSA 2048 pair, PKCS#1 PEM, ssh-rsa line, MD5 fingerprint (golden autogen)', async () => {
    const res = await alice.post('keypairs/', golden('request_autogen_keypair_create'));
    assert.equal(res.status, 201, res.text);
    sameShape(res.json, golden('response_autogen_keypair_create'));
    const k = res.json.objects[0];
    assert.equal(res.headers.location, `${srv.base}/api/2.0/keypairs/${k.uuid}/`);
    assert.equal(k.name, 'test_name');
    assert.equal(k.resource_uri, `/api/2.0/keypairs/${k.uuid}/`);
    assert.deepEqual([k.grantees, k.permissions, k.meta, k.tags], [[], [], {}, []]);
    assert.ok(!('owner' in k), 'keypairs carry no owner');
    assert.match(k.private_key, /^-----BEGIN RSA PRIVATE KEY-----\n[\s\S]+\n-----END RSA PRIVATE KEY-----\n$/);
    assert.equal(createPublicKey(k.private_key).asymmetricKeyDetails?.modulusLength, 2048);
    assert.match(k.public_key, /^ssh-rsa AAAA[A-Za-z0-9+/]+={0,2}$/);
    assert.equal(k.public_key, sshRsaOf(k.private_key), "the public key is the private key's");
    assert.equal(k.fingerprint, md5Of(k.public_key));
    // Two generated pairs differ.
    const other = await create(alice, { name: 'second' });
    assert.notEqual(other.public_key, k.public_key);
  });

  test('both keys: stored as given (golden self_gen, its fingerprint)', async () => {
    const res = await alice.post('keypairs/', golden('request_self_gen_keypair_create'));
    assert.equal(res.status, 201, res.text);
    const want = golden('response_self_gen_keypair_create');
    sameShape(res.json, want);
    const k = res.json.objects[0];
    const expected = want.objects[0];
    for (const key of ['fingerprint', 'name', 'private_key', 'public_key', 'meta', 'grantees', 'permissions', 'tags'])
      assert.deepEqual(k[key], expected[key], key);
    assert.equal(k.fingerprint, '79:20:0b:49:72:11:b1:bc:df:73:94:09:3d:f8:90:71');
  });

  test('only the public key: private_key null (golden pub_key_only, its fingerprint)', async () => {
    const res = await alice.post('keypairs/', golden('request_pub_key_only_keypair_create'));
    assert.equal(res.status, 201, res.text);
    sameShape(res.json, golden('response_pub_key_only_keypair_create'));
    const k = res.json.objects[0];
    assert.equal(k.private_key, null);
    assert.equal(k.public_key, pubOnly.public_key);
    assert.equal(k.fingerprint, 'e8:ee:43:72:38:09:6d:1e:8e:46:9e:76:80:a3:0a:01');
  });

  test('only the private key: the public half is derived', async () => {
    const k = await create(alice, { name: 'priv-only', private_key: selfGen.private_key });
    assert.equal(k.public_key, selfGen.public_key);
    assert.equal(k.private_key, selfGen.private_key);
    assert.equal(k.fingerprint, '79:20:0b:49:72:11:b1:bc:df:73:94:09:3d:f8:90:71');
  });

  test('libcloud import: a bare object, the key with a comment, newline stripped or not (fixture shape)', async () => {
    const line = `${pubOnly.public_key} me@laptop`;
    for (const public_key of [line, `${line}\n`]) {
      const res = await alice.post('keypairs/', { name: 'test_key', public_key });
      assert.equal(res.status, 201, res.text);
      sameShape(res.json, fixture('keypairs_import.json'));
      const k = res.json.objects[0];
      assert.equal(k.public_key, line);
      assert.equal(k.private_key, null);
      assert.equal(k.fingerprint, md5Of(line));
    }
  });

  test('ed25519 and ECDSA public keys import with their fingerprints', async () => {
    const ed = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' });
    const edBlob = Buffer.concat([Buffer.from([0, 0, 0, 11]), Buffer.from('ssh-ed25519'), Buffer.from([0, 0, 0, 32]), Buffer.from(ed.x!, 'base64url')]);
    const edLine = `ssh-ed25519 ${edBlob.toString('base64')} ed@host`;
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' });
    const point = Buffer.concat([Buffer.from([4]), Buffer.from(ec.x!, 'base64url'), Buffer.from(ec.y!, 'base64url')]);
    const ecBlob = Buffer.concat([
      Buffer.from([0, 0, 0, 19]),
      Buffer.from('ecdsa-sha2-nistp256'),
      Buffer.from([0, 0, 0, 8]),
      Buffer.from('nistp256'),
      Buffer.from([0, 0, 0, 65]),
      point,
    ]);
    const ecLine = `ecdsa-sha2-nistp256 ${ecBlob.toString('base64')}`;
    for (const line of [edLine, ecLine]) {
      const k = await create(alice, { name: line.split(' ')[0], public_key: line });
      assert.equal(k.public_key, line);
      assert.equal(k.fingerprint, md5Of(line));
    }
  });

  test('malformed or mismatched keys: 400 on the field, and a bad object in a bulk create writes nothing', async () => {
    const before = (await alice.get('keypairs/?limit=0')).json.meta.total_count;
    const other = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs1', format: 'pem' }) as string;
    const encrypted = encryptedRsaPem();
    const cases: [Record<string, unknown>, string][] = [
      [{ name: 'x', public_key: 'ssh-rsa not-base64!' }, 'public_key'],
      [{ name: 'x', public_key: 'hello world' }, 'public_key'],
      [{ name: 'x', public_key: pubOnly.public_key.slice(0, 60) }, 'public_key'],
      [{ name: 'x', public_key: `ssh-ed25519 ${pubOnly.public_key.split(' ')[1]}` }, 'public_key'],
      [{ name: 'x', public_key: 123 }, 'public_key'],
      [{ name: 'x', private_key: 'not a key' }, 'private_key'],
      [{ name: 'x', private_key: encrypted }, 'private_key'],
      [{ name: 'x', private_key: selfGen.private_key.replace('MIICXwIBAAKCAIEA', 'MIICXwIBAAKCAIEB') }, 'private_key'],
      [{ name: 'x', private_key: selfGen.private_key, public_key: pubOnly.public_key }, 'public_key'],
      [{ name: 'x', private_key: other, public_key: selfGen.public_key }, 'public_key'],
      [{ public_key: pubOnly.public_key }, 'name'],
      [{}, 'name'],
    ];
    for (const [body, point] of cases) expect400(await alice.post('keypairs/', body), point);
    expect400(
      await alice.post('keypairs/', {
        objects: [
          { name: 'fine', public_key: pubOnly.public_key },
          { name: 'bad', public_key: 'ssh-rsa AAAA' },
        ],
      }),
      'public_key',
    );
    assert.equal((await alice.get('keypairs/?limit=0')).json.meta.total_count, before);
  });
});

describe('keypairs: read, edit, delete', () => {
  test('get and list (full objects) match the golden dumps; /keypairs without a trailing slash works', async () => {
    const c = await srv.user();
    const a = await create(c, { name: 'ala' });
    const b = await create(c, { name: 'test_name', public_key: pubOnly.public_key });
    const one = await c.get(`keypairs/${a.uuid}/`);
    assert.equal(one.status, 200);
    sameShape(one.json, golden('response_keypair_get'));
    assert.deepEqual(one.json, a);
    for (const path of ['keypairs/?limit=0', 'keypairs?limit=0', 'keypairs', 'keypairs/']) {
      const res = await c.get(path);
      assert.equal(res.status, 200, path);
      assert.deepEqual(res.json.meta, { limit: path.includes('limit=0') ? 0 : 20, offset: 0, total_count: 2 });
      assert.deepEqual(
        res.json.objects.map((o: any) => o.uuid),
        [a.uuid, b.uuid],
        path,
      );
    }
    const list = (await c.get('keypairs/?limit=0')).json;
    sameShape({ ...list, objects: [list.objects[0]] }, golden('response_keypair_list'));
    sameShape(list, fixture('keypairs_list.json'));
    // Filters and fields=.
    assert.deepEqual(
      (await c.get('keypairs/?name=ala')).json.objects.map((o: any) => o.uuid),
      [a.uuid],
    );
    assert.deepEqual(
      (await c.get('keypairs/?name__contains=NAME')).json.objects.map((o: any) => o.uuid),
      [b.uuid],
    );
    assert.deepEqual((await c.get(`keypairs/${b.uuid}/?fields=fingerprint,uuid`)).json, { fingerprint: b.fingerprint, uuid: b.uuid });
  });

  test('PUT: name and meta change; keys sent back (or different) are ignored (golden update)', async () => {
    const k = await create(alice, { name: 'test_name' });
    const body = { ...golden('request_keypair_update'), uuid: k.uuid, resource_uri: k.resource_uri, fingerprint: 'ff', meta: { env: 'prod' } };
    const res = await alice.put(`keypairs/${k.uuid}/`, body);
    assert.equal(res.status, 200, res.text);
    sameShape({ ...res.json, meta: {} }, golden('response_keypair_update')); // a top-level meta's keys are the user's
    assert.equal(res.json.name, 'new_name');
    assert.deepEqual(res.json.meta, { env: 'prod' });
    for (const key of ['private_key', 'public_key', 'fingerprint']) assert.equal(res.json[key], k[key], key);
    assert.deepEqual((await alice.get(`keypairs/${k.uuid}/`)).json, res.json);
    expect400(await alice.put(`keypairs/${k.uuid}/`, { name: 7 }), 'name');
  });

  test("tags: a keypair carries its owner's tags, filters by tag, shows under /tags/<uuid>/keypairs/", async () => {
    const tag = (await alice.post('tags/', { name: 'keys' })).json.objects[0];
    const k = await create(alice, { name: 'tagged', public_key: pubOnly.public_key, tags: [tag.uuid] });
    assert.deepEqual(k.tags, [{ resource_uri: `/api/2.0/tags/${tag.uuid}/`, uuid: tag.uuid }]);
    assert.deepEqual(
      (await alice.get(`keypairs/?tag=${tag.uuid}`)).json.objects.map((o: any) => o.uuid),
      [k.uuid],
    );
    assert.deepEqual(
      (await alice.get(`pubkeys/?tag=${tag.uuid}`)).json.objects.map((o: any) => o.uuid),
      [k.uuid],
    );
    assert.deepEqual(
      (await alice.get(`tags/${tag.uuid}/keypairs/`)).json.objects.map((o: any) => o.uuid),
      [k.uuid],
    );
    const untagged = await alice.put(`keypairs/${k.uuid}/`, { tags: [] });
    assert.deepEqual(untagged.json.tags, []);
  });

  test('DELETE: 204 with an empty body (golden), then 404 on both URLs', async () => {
    const k = await create(alice, { name: 'doomed', public_key: pubOnly.public_key });
    const res = await alice.delete(`keypairs/${k.uuid}/`);
    assert.equal(res.status, 204);
    assert.equal(res.text, '');
    for (const path of [`keypairs/${k.uuid}/`, `pubkeys/${k.uuid}/`]) {
      const gone = await alice.get(path);
      assert.equal(gone.status, 404, path);
      assert.equal(gone.json[0].error_type, 'notexist');
    }
    assert.equal((await alice.delete(`keypairs/${k.uuid}/`)).status, 404);
  });

  test("another user's keypair is 404 everywhere and never listed", async () => {
    const k = await create(alice, { name: 'secret', private_key: selfGen.private_key });
    for (const [method, path] of [
      ['GET', `keypairs/${k.uuid}/`],
      ['PUT', `keypairs/${k.uuid}/`],
      ['DELETE', `keypairs/${k.uuid}/`],
      ['GET', `pubkeys/${k.uuid}/`],
    ]) {
      const res = await bob.request(method, path, { body: method === 'PUT' ? { name: 'mine' } : undefined });
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.ok(!res.text.includes('BEGIN'), 'no key material leaks');
    }
    for (const path of ['keypairs/?limit=0', 'pubkeys/?limit=0']) assert.ok(!(await bob.get(path)).json.objects.some((o: any) => o.uuid === k.uuid), path);
    assert.equal((await alice.get(`keypairs/${k.uuid}/`)).json.name, 'secret', 'untouched');
    assert.equal((await srv.anon().get('keypairs/')).status, 401);
  });

  test('schema/: tastypie model flavour; keys writable on keypairs, everything read-only on pubkeys', async () => {
    const kp = (await alice.get('keypairs/schema/')).json;
    assert.deepEqual(
      [kp.allowed_list_http_methods, kp.allowed_detail_http_methods],
      [
        ['get', 'post'],
        ['get', 'put', 'delete'],
      ],
    );
    assert.deepEqual(Object.keys(kp.fields).sort(), [
      'fingerprint',
      'grantees',
      'meta',
      'name',
      'permissions',
      'private_key',
      'public_key',
      'resource_uri',
      'tags',
      'uuid',
    ]);
    assert.equal(kp.fields.fingerprint.readonly, true);
    assert.equal(kp.fields.public_key.readonly, false);
    assert.equal(kp.fields.private_key.nullable, true);
    const pk = (await alice.get('pubkeys/schema/')).json;
    assert.deepEqual([pk.allowed_list_http_methods, pk.allowed_detail_http_methods], [['get'], ['get']]);
    assert.deepEqual(Object.keys(pk.fields).sort(), [
      'fingerprint',
      'grantees',
      'has_private_key',
      'meta',
      'name',
      'permissions',
      'public_key',
      'resource_uri',
      'tags',
      'uuid',
    ]);
    assert.ok(Object.values(pk.fields).every((f: any) => f.readonly));
  });
});

describe('pubkeys: the read-only mirror', () => {
  test('list and get follow the golden dumps: same uuids, pubkey URIs, has_private_key, no private_key', async () => {
    const c = await srv.user();
    const full = await create(c, golden('request_self_gen_keypair_create').objects[0]);
    const gen = await create(c, { name: 'ala' });
    const pub = await create(c, golden('request_pub_key_only_keypair_create').objects[0]);
    const list = await c.get('pubkeys/?limit=0');
    assert.equal(list.status, 200);
    sameShape(list.json, golden('response_pubkeys_list'));
    assert.deepEqual(
      list.json.objects.map((o: any) => [o.uuid, o.has_private_key]),
      [
        [full.uuid, true],
        [gen.uuid, true],
        [pub.uuid, false],
      ],
    );
    assert.deepEqual((await c.get('pubkeys?limit=0')).json, list.json, 'no trailing slash');
    const one = await c.get(`pubkeys/${full.uuid}/`);
    sameShape(one.json, golden('response_pubkeys_full_keypair'));
    const { private_key: _p, ...rest } = full;
    assert.deepEqual(one.json, { ...rest, has_private_key: true, resource_uri: `/api/2.0/pubkeys/${full.uuid}/` });
    const pubGet = (await c.get(`pubkeys/${pub.uuid}/`)).json;
    sameShape(pubGet, golden('response_pubkeys_pub_only_keypair'));
    assert.deepEqual(pubGet, { ...golden('response_pubkeys_pub_only_keypair'), uuid: pub.uuid, resource_uri: `/api/2.0/pubkeys/${pub.uuid}/` });
    assert.deepEqual((await c.get(`pubkeys/${pub.uuid}/?fields=has_private_key,uuid`)).json, { has_private_key: false, uuid: pub.uuid });
    assert.deepEqual(
      (await c.get('pubkeys/?name=ala')).json.objects.map((o: any) => o.uuid),
      [gen.uuid],
    );
  });

  test('pubkeys cannot be written: POST, PUT and DELETE are 405', async () => {
    const k = await create(alice, { name: 'ro', public_key: pubOnly.public_key });
    for (const [method, path] of [
      ['POST', 'pubkeys/'],
      ['PUT', `pubkeys/${k.uuid}/`],
      ['DELETE', `pubkeys/${k.uuid}/`],
    ]) {
      const res = await alice.request(method, path, { body: { name: 'x' } });
      assert.equal(res.status, 405, `${method} ${path}`);
      assert.equal(res.headers.allow, 'GET');
      assert.equal(res.json[0].error_type, 'validation');
    }
  });
});

describe('servers reference pubkeys', () => {
  test("resolvePubkeyUuids: the owner's keypairs, in order, deduplicated; anything else is 400 on pubkeys", async () => {
    const db = srv.services.store.db;
    const [a, b] = [await create(alice, { name: 'k1', public_key: pubOnly.public_key }), await create(alice, { name: 'k2', public_key: selfGen.public_key })];
    const theirs = await create(bob, { name: 'bobs', public_key: pubOnly.public_key });
    const ids = await resolvePubkeyUuids(srv.services, db, alice.uuid, [
      b.uuid,
      { uuid: a.uuid },
      `/api/2.0/pubkeys/${b.uuid}/`,
      { resource_uri: `/api/2.0/keypairs/${a.uuid}/` },
    ]);
    assert.deepEqual(ids, [b.uuid, a.uuid]);
    assert.deepEqual(await resolvePubkeyUuids(srv.services, db, alice.uuid, [a.uuid, b.uuid, a.uuid]), [a.uuid, b.uuid]);
    assert.deepEqual(await resolvePubkeyUuids(srv.services, db, alice.uuid, []), []);
    assert.deepEqual(await resolvePubkeyUuids(srv.services, db, alice.uuid, null), []);
    for (const bad of [[theirs.uuid], ['no-such-key'], 'not-a-list', [5]]) {
      await assert.rejects(
        resolvePubkeyUuids(srv.services, db, alice.uuid, bad),
        (e: unknown) => e instanceof ApiError && e.status === 400 && e.point === 'pubkeys',
        JSON.stringify(bad),
      );
    }
  });
});
