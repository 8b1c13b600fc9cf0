import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { gunzipSync } from 'node:zlib';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';

let srv: TestServer;
let alice: Client & { uuid: string };

before(async () => {
  srv = await startServer({ 'body-limit': '4096' });
  alice = await srv.user();
});
after(() => srv.close());

const isErrorArray = (body: unknown, type?: string) => {
  assert.ok(Array.isArray(body), 'error body is an array');
  for (const e of body as Record<string, unknown>[]) {
    assert.deepEqual(Object.keys(e).sort(), ['error_message', 'error_point', 'error_type']);
    assert.equal(typeof e.error_message, 'string');
  }
  if (type) assert.equal((body as { error_type: string }[])[0].error_type, type);
};

describe('content negotiation', () => {
  const cases: [string | undefined, string | undefined, 'json' | 'xml' | 406][] = [
    [undefined, undefined, 'json'],
    ['application/json', undefined, 'json'],
    ['*/*', undefined, 'json'],
    ['application/xml', undefined, 'xml'],
    ['application/xml, application/json', undefined, 'json'],
    ['application/json;q=0.1, application/xml', undefined, 'json'],
    ['application/xml, */*', undefined, 'xml'],
    ['text/html, */*;q=0.8', undefined, 'json'],
    ['text/html', undefined, 406],
    ['image/png, text/plain', undefined, 406],
    ['application/json;q=0', undefined, 406],
    ['application/json', 'format=xml', 'xml'],
    ['application/xml', 'format=json', 'json'],
    ['text/html', 'format=json', 'json'],
    [undefined, 'format=json&format=xml', 'xml'],
    [undefined, 'format=xml&format=json', 'json'],
  ];
  for (const [accept, query, want] of cases) {
    test(`Accept ${accept ?? '(none)'} ${query ?? ''} -> ${want}`, async () => {
      const res = await alice.get(`tags/${query ? `?${query}` : ''}`, accept ? { accept } : {});
      if (want === 406) {
        assert.equal(res.status, 406);
        isErrorArray(res.json);
        return;
      }
      assert.equal(res.status, 200);
      if (want === 'json') {
        assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
        assert.deepEqual(Object.keys(res.json), ['meta', 'objects']);
      } else {
        assert.equal(res.headers['content-type'], 'application/xml; charset=utf-8');
        assert.match(res.text, /^<\?xml version='1\.0' encoding='utf-8'\?>\n<response><meta type="hash">/);
      }
    });
  }

  test('an unknown format= value is a 400 on format', async () => {
    const res = await alice.get('tags/?format=yaml');
    assert.equal(res.status, 400);
    isErrorArray(res.json, 'validation');
    assert.equal(res.json[0].error_point, 'format');
  });

  test('errors follow the negotiated format (XML error list)', async () => {
    const res = await alice.get('tags/00000000-0000-0000-0000-000000000000/', { accept: 'application/xml' });
    assert.equal(res.status, 404);
    assert.match(
      res.text,
      /<objects><object type="hash"><error_message>.*<\/error_message><error_point type="null"\/><error_type>notexist<\/error_type><\/object><\/objects>/,
    );
  });
});

describe('compression', () => {
  test('Accept-Encoding: gzip gives a gzip body', async () => {
    const res = await alice.get('tags/', { 'accept-encoding': 'gzip' });
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-encoding'], 'gzip');
    const body = JSON.parse(gunzipSync(res.raw).toString('utf8'));
    assert.deepEqual(Object.keys(body), ['meta', 'objects']);
  });
  test('errors are compressed too', async () => {
    const res = await srv.anon().get('tags/', { 'accept-encoding': 'gzip' });
    assert.equal(res.status, 401);
    assert.equal(res.headers['content-encoding'], 'gzip');
    isErrorArray(JSON.parse(gunzipSync(res.raw).toString('utf8')));
  });
  test('no Accept-Encoding gives an identity body', async () => {
    const res = await alice.get('tags/');
    assert.equal(res.headers['content-encoding'], undefined);
  });
});

describe('OPTIONS, 405 and 404', () => {
  const allowed: [string, string][] = [
    ['tags/', 'GET,POST'],
    ['tags/detail/', 'GET'],
    ['tags/schema/', 'GET'],
    ['tags/6f1b7b9e-7b7b-4b7b-8b7b-7b7b7b7b7b7b/', 'GET,PUT,DELETE'],
    ['profile/', 'GET,PUT'],
    ['capabilities/', 'GET'],
  ];
  for (const [path, methods] of allowed) {
    test(`OPTIONS ${path} -> ${methods}`, async () => {
      const res = await srv.anon().request('OPTIONS', path);
      assert.equal(res.status, 200);
      assert.equal(res.text, methods);
      assert.equal(res.headers.allow, methods);
    });
  }
  test('a method not allowed gives 405 with Allow and an error array', async () => {
    for (const [method, path, allow] of [
      ['DELETE', 'profile/', 'GET,PUT'],
      ['POST', 'capabilities/', 'GET'],
      ['PUT', 'tags/', 'GET,POST'],
      ['PATCH', 'tags/', 'GET,POST'],
    ]) {
      const res = await alice.request(method, path);
      assert.equal(res.status, 405, `${method} ${path}`);
      assert.equal(res.headers.allow, allow);
      isErrorArray(res.json);
    }
  });
  test('405 comes before authentication, 401 before body parsing', async () => {
    assert.equal((await srv.anon().delete('profile/')).status, 405);
    const res = await srv.anon().request('POST', 'tags/', { raw: '{broken', headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 401);
  });
  test('unknown paths give 404 notexist', async () => {
    // (`/api/2.0/` itself is the API's index: test/api/ops-health.test.ts.)
    for (const path of ['nothing/', 'tags/x/y/z/', '/api/1.0/tags/', '/api/', '/_stratus/nothing']) {
      const res = await alice.get(path);
      assert.equal(res.status, 404, path);
      isErrorArray(res.json, 'notexist');
    }
  });
  test('a trailing slash is optional', async () => {
    assert.equal((await alice.get('/api/2.0/tags')).status, 200);
  });
});

describe('common headers and status codes', () => {
  test('X-REQUEST-ID is on every response and unique', async () => {
    const a = await alice.get('tags/');
    const b = await srv.anon().get('nothing/');
    const c = await srv.anon().request('OPTIONS', 'tags/');
    const ids = [a, b, c].map((r) => r.headers['x-request-id']);
    for (const id of ids) assert.match(String(id), /^[0-9a-f-]{36}$/);
    assert.equal(new Set(ids).size, 3);
  });
  test('201 carries Location of the new object; 204 has an empty body', async () => {
    const res = await alice.post('tags/', { objects: [{ name: 'loc' }] });
    assert.equal(res.status, 201);
    const uri = res.json.objects[0].resource_uri;
    assert.equal(new URL(String(res.headers.location)).pathname, uri);
    const del = await alice.delete(uri);
    assert.equal(del.status, 204);
    assert.equal(del.raw.length, 0);
    assert.equal((await alice.get(uri)).status, 404);
  });
  test('JSON keys are sorted at every level', async () => {
    const res = await alice.post('tags/', { objects: [{ name: 'sorted', meta: { zeta: '1', alpha: '2' } }] });
    const text = res.text;
    assert.ok(text.indexOf('"meta"') < text.indexOf('"name"'));
    assert.ok(text.indexOf('"alpha"') < text.indexOf('"zeta"'));
    assert.ok(text.indexOf('"resource_uri"') < text.indexOf('"uuid"'));
  });
});

describe('request bodies', () => {
  test('create accepts {objects:[…]}, a bare array and a single object; answers {objects}', async () => {
    for (const body of [{ objects: [{ name: 'a1' }, { name: 'a2' }] }, [{ name: 'b1' }, { name: 'b2' }], { name: 'c1' }]) {
      const res = await alice.post('tags/', body);
      assert.equal(res.status, 201);
      assert.deepEqual(Object.keys(res.json), ['objects']);
      assert.equal(res.json.objects.length, Array.isArray(body) ? 2 : 'objects' in body ? 2 : 1);
    }
  });
  test('malformed JSON and XML are 400 validation', async () => {
    for (const [ct, raw] of [
      ['application/json', '{"objects": ['],
      ['application/json', 'not json'],
      ['application/xml', '<request><objects><object><name>x</name></objects>'],
      ['application/xml', 'plain text'],
    ]) {
      const res = await alice.request('POST', 'tags/', { raw, headers: { 'content-type': ct } });
      assert.equal(res.status, 400, raw);
      isErrorArray(res.json, 'validation');
    }
  });
  test('XML with a DOCTYPE or entities is refused, never expanded', async () => {
    const raw = '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><request><name>&lol2;</name></request>';
    const res = await alice.request('POST', 'tags/', { raw, headers: { 'content-type': 'application/xml' } });
    assert.equal(res.status, 400);
  });
  test('an XML create works and answers in JSON by default', async () => {
    const raw = '<request><objects><object><name>from-xml</name><meta type="hash"><k>v</k></meta></object></objects></request>';
    const res = await alice.request('POST', 'tags/', { raw, headers: { 'content-type': 'application/xml' } });
    assert.equal(res.status, 201);
    assert.equal(res.json.objects[0].name, 'from-xml');
    assert.deepEqual(res.json.objects[0].meta, { k: 'v' });
  });
  test('a body of the wrong kind is 400, and so is an unsupported content type', async () => {
    assert.equal((await alice.post('tags/', 'just a string')).status, 400);
    assert.equal((await alice.post('tags/', 42)).status, 400);
    assert.equal((await alice.post('tags/', { objects: [] })).status, 400);
    assert.equal((await alice.post('tags/', { objects: ['x'] })).status, 400);
    const res = await alice.request('POST', 'tags/', { raw: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assert.equal(res.status, 400);
    isErrorArray(res.json, 'validation');
  });
  test('a body over the limit is 413 in the error format', async () => {
    const res = await alice.post('tags/', { name: 'x'.repeat(10_000) });
    assert.equal(res.status, 413);
    isErrorArray(res.json);
  });
  test('Unicode is kept; \\0 ends a string and the rest is dropped', async () => {
    const res = await alice.post('tags/', { name: 'Ünïcødé ☁ 雲', meta: { 'k\u0000tail': 'v\u0000dropped' } });
    assert.equal(res.status, 201);
    assert.equal(res.json.objects[0].name, 'Ünïcødé ☁ 雲');
    assert.deepEqual(res.json.objects[0].meta, { k: 'v' });
    const cut = await alice.post('tags/', { name: 'abc\u0000def' });
    assert.equal(cut.json.objects[0].name, 'abc');
  });
  test('PUT is a partial update and ignores read-only keys', async () => {
    const made = (await alice.post('tags/', { name: 'partial', meta: { a: '1' } })).json.objects[0];
    const res = await alice.put(made.resource_uri, { name: 'renamed', uuid: 'ignored', owner: 'ignored', resource_uri: 'x' });
    assert.equal(res.status, 200);
    assert.equal(res.json.name, 'renamed');
    assert.deepEqual(res.json.meta, { a: '1' });
    assert.equal(res.json.uuid, made.uuid);
    const meta = await alice.put(made.resource_uri, { meta: { b: '2' } });
    assert.deepEqual(meta.json.meta, { b: '2' }, 'meta given replaces the whole dict');
  });
  test('an empty PUT body changes nothing', async () => {
    const made = (await alice.post('tags/', { name: 'empty-put' })).json.objects[0];
    const res = await alice.request('PUT', made.resource_uri, { raw: '', headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 200);
    assert.equal(res.json.name, 'empty-put');
  });
});

describe('pagination, fields and filters', () => {
  let bob: Client;
  before(async () => {
    bob = await srv.user();
    const names = Array.from({ length: 25 }, (_, i) => ({ name: `page-${String(i).padStart(2, '0')}` }));
    await bob.post('tags/', { objects: names });
    await bob.post('tags/', { objects: [{ name: 'alpha,beta' }, { name: 'Gamma' }, { name: 'gamma-ray' }] });
  });

  test('default limit is the resource default (20)', async () => {
    const res = await bob.get('tags/');
    assert.deepEqual(res.json.meta, { limit: 20, offset: 0, total_count: 28 });
    assert.equal(res.json.objects.length, 20);
  });
  test('limit=0 means all; offset past the end is empty with the right total', async () => {
    const all = await bob.get('tags/?limit=0');
    assert.deepEqual(all.json.meta, { limit: 0, offset: 0, total_count: 28 });
    assert.equal(all.json.objects.length, 28);
    const past = await bob.get('tags/?offset=100&limit=5');
    assert.deepEqual(past.json.meta, { limit: 5, offset: 100, total_count: 28 });
    assert.equal(past.json.objects.length, 0);
    const last = await bob.get('tags/?offset=25&limit=5');
    assert.equal(last.json.objects.length, 3);
    assert.equal(last.json.meta.total_count, 28);
  });
  test('pages are stable and do not overlap', async () => {
    const a = (await bob.get('tags/?limit=10&offset=0')).json.objects.map((o: any) => o.uuid);
    const b = (await bob.get('tags/?limit=10&offset=10')).json.objects.map((o: any) => o.uuid);
    assert.equal(new Set([...a, ...b]).size, 20);
  });
  test('bad limit or offset is a 400 naming the parameter', async () => {
    for (const [q, point] of [
      ['limit=-1', 'limit'],
      ['limit=abc', 'limit'],
      ['offset=-5', 'offset'],
      ['offset=1.5', 'offset'],
      ['limit=99999999999999', 'limit'],
    ]) {
      const res = await bob.get(`tags/?${q}`);
      assert.equal(res.status, 400, q);
      assert.equal(res.json[0].error_point, point);
    }
  });
  test('limit and offset are ignored on single-object URLs', async () => {
    const one = (await bob.get('tags/?limit=1')).json.objects[0];
    const res = await bob.get(`tags/${one.uuid}/?limit=abc&offset=-1`);
    assert.equal(res.status, 200);
    assert.equal(res.json.uuid, one.uuid);
    assert.equal((await bob.get('profile/?limit=0')).status, 200);
    assert.equal((await bob.get('capabilities/?limit=0')).status, 200);
  });
  test('fields= cuts every object to the named keys, on lists, detail and single GETs', async () => {
    const res = await bob.get('tags/?fields=name,uuid&limit=3');
    for (const o of res.json.objects) assert.deepEqual(Object.keys(o), ['name', 'uuid']);
    const detail = await bob.get('tags/detail/?fields=uuid&limit=2');
    for (const o of detail.json.objects) assert.deepEqual(Object.keys(o), ['uuid']);
    const single = await bob.get(`tags/${res.json.objects[0].uuid}/?fields=name`);
    assert.deepEqual(Object.keys(single.json), ['name']);
  });
  test('name filter: exact, comma = OR, escaped comma is literal', async () => {
    assert.equal((await bob.get('tags/?name=page-01')).json.meta.total_count, 1);
    assert.equal((await bob.get('tags/?name=page-01,page-02,nope')).json.meta.total_count, 2);
    const esc = await bob.get(`tags/?name=${encodeURIComponent('alpha\\,beta')}`);
    assert.equal(esc.json.meta.total_count, 1);
    assert.equal(esc.json.objects[0].name, 'alpha,beta');
  });
  test('name__contains is case-insensitive; repeated parameters AND', async () => {
    assert.equal((await bob.get('tags/?name__contains=GAMMA')).json.meta.total_count, 2);
    assert.equal((await bob.get('tags/?name__contains=gamma&name__contains=ray')).json.meta.total_count, 1);
    assert.equal((await bob.get('tags/?name__contains=page-0,ray')).json.meta.total_count, 11);
    assert.equal((await bob.get('tags/?name__contains=%25')).json.meta.total_count, 0, '% is literal');
    assert.equal((await bob.get('tags/?name__contains=_')).json.meta.total_count, 0, '_ is literal');
  });
  test('uuid filter, and filters combine with paging', async () => {
    const all = (await bob.get('tags/?limit=0')).json.objects;
    const two = `${all[3].uuid},${all[7].uuid}`;
    const res = await bob.get(`tags/?uuid=${two}&limit=1`);
    assert.deepEqual(res.json.meta, { limit: 1, offset: 0, total_count: 2 });
    assert.equal(res.json.objects.length, 1);
  });
  test("another user's objects never appear", async () => {
    assert.equal((await alice.get('tags/?name__contains=page')).json.meta.total_count, 0);
  });
});
