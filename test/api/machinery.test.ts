import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { golden, sameShape } from '../helpers/golden.js';
import { withWidgets } from '../helpers/widgets.js';

/** The declaration-driven machinery, through a test-only kind declared like the real ones. */
let srv: TestServer;
let alice: Client & { uuid: string };
let bob: Client & { uuid: string };

before(async () => {
  srv = await startServer({}, withWidgets);
  alice = await srv.user();
  bob = await srv.user();
});
after(() => srv.close());

const widget = async (c: Client, body: Record<string, unknown>) => {
  const res = await c.post('widgets/', body);
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0];
};

describe('declared resource kinds', () => {
  test('defaults, required fields, choices and numeric strings come from the declaration', async () => {
    const w = await widget(alice, { name: 'w', size: '1024' });
    assert.equal(w.size, 1024);
    assert.equal(w.color, 'blue');
    assert.equal(w.enabled, true);
    assert.deepEqual(w.tags, []);
    for (const [body, point] of [
      [{ size: 1 }, 'name'],
      [{ name: 'x' }, 'size'],
      [{ name: 'x', size: 0 }, 'size'],
      [{ name: 'x', size: 1.5 }, 'size'],
      [{ name: 'x', size: '12abc' }, 'size'],
      [{ name: 'x', size: 1, color: 'purple' }, 'color'],
      [{ name: 'x', size: 1, enabled: 'true' }, 'enabled'],
      [{ name: 'x'.repeat(65), size: 1 }, 'name'],
    ] as const) {
      const res = await alice.post('widgets/', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json[0].error_point, point);
    }
  });

  test('null for a non-nullable field means "not given"', async () => {
    const w = await widget(alice, { name: 'nulls', size: 2, color: null, enabled: null });
    assert.equal(w.color, 'blue');
    const put = await alice.put(w.resource_uri, { name: null, color: 'red' });
    assert.equal(put.json.name, 'nulls');
    assert.equal(put.json.color, 'red');
  });

  test('GET /<kind>/ gives the short form, detail/ and single GET the full object', async () => {
    await widget(alice, { name: 'short', size: 3 });
    const list = await alice.get('widgets/?name=short');
    assert.deepEqual(Object.keys(list.json.objects[0]), ['name', 'owner', 'resource_uri', 'uuid']);
    const detail = await alice.get('widgets/detail/?name=short');
    assert.deepEqual(Object.keys(detail.json.objects[0]).sort(), [
      'color',
      'enabled',
      'grantees',
      'meta',
      'name',
      'owner',
      'permissions',
      'resource_uri',
      'size',
      'tags',
      'uuid',
    ]);
    const one = await alice.get(list.json.objects[0].resource_uri);
    assert.deepEqual(one.json, detail.json.objects[0]);
    const chosen = await alice.get('widgets/?name=short&fields=size,color');
    assert.deepEqual(chosen.json.objects[0], { color: 'blue', size: 3 });
  });

  test('schema in the custom flavour, with choices, filtering and ordering', async () => {
    const res = await alice.get('widgets/schema/');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json.fields.color, {
      choices: ['blue', 'red', 'green'],
      default: 'blue',
      help_text: 'Widget colour',
      readonly: false,
      required: false,
      type: 'string',
    });
    assert.equal(res.json.fields.size.required, true);
    assert.equal(res.json.fields.size.default, 'No default provided.');
    assert.equal(res.json.fields.uuid.readonly, true);
    assert.deepEqual(res.json.ordering, ['uuid', 'name']);
    assert.equal(res.json.filtering.tag, 'exact');
  });

  test('XML responses type integers and booleans', async () => {
    const w = await widget(alice, { name: 'xml', size: 7 });
    const res = await alice.get(`${w.resource_uri}?format=xml`);
    assert.match(res.text, /^<\?xml version='1.0' encoding='utf-8'\?>\n<object>/);
    assert.match(res.text, /<size type="integer">7<\/size>/);
    assert.match(res.text, /<enabled type="boolean">True<\/enabled>/);
    assert.match(res.text, /<tags type="list"><\/tags>/);
  });

  test('XML request bodies are typed too', async () => {
    const raw = '<request><name>from-xml</name><size type="integer">9</size><enabled type="boolean">False</enabled></request>';
    const res = await alice.request('POST', 'widgets/', { raw, headers: { 'content-type': 'application/xml' } });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.json.objects[0].size, 9);
    assert.equal(res.json.objects[0].enabled, false);
  });
});

describe('tagging across kinds', () => {
  let red: any, blue: any, w1: any, w2: any, w3: any;
  before(async () => {
    [red, blue] = (await alice.post('tags/', [{ name: 'red' }, { name: 'blue' }])).json.objects;
    w1 = await widget(alice, { name: 't1', size: 1, tags: [red.uuid] });
    w2 = await widget(alice, { name: 't2', size: 1, tags: [red.uuid, { uuid: blue.uuid }] });
    w3 = await widget(alice, { name: 't3', size: 1 });
  });

  test('a resource lists its tags; the tag lists the resource', async () => {
    assert.deepEqual(w2.tags, [
      { resource_uri: red.resource_uri, uuid: red.uuid },
      { resource_uri: blue.resource_uri, uuid: blue.uuid },
    ]);
    const tag = await alice.get(red.resource_uri);
    assert.deepEqual(
      tag.json.resources.map((r: any) => [r.res_type, r.uuid]),
      [
        ['widgets', w1.uuid],
        ['widgets', w2.uuid],
      ],
    );
  });

  test('tag filter: comma = OR, repeated = AND; tag__name by name', async () => {
    const names = async (q: string) => (await alice.get(`widgets/?${q}&limit=0`)).json.objects.map((o: any) => o.name).sort();
    assert.deepEqual(await names(`tag=${red.uuid}`), ['t1', 't2']);
    assert.deepEqual(await names(`tag=${blue.uuid}`), ['t2']);
    assert.deepEqual(await names(`tag=${red.uuid}&tag=${blue.uuid}`), ['t2']);
    assert.deepEqual(await names(`tag=${blue.uuid},${crypto.randomUUID()}`), ['t2']);
    assert.deepEqual(await names('tag__name=red'), ['t1', 't2']);
    assert.deepEqual(await names('tag__name=red&tag__name=blue'), ['t2']);
    assert.deepEqual(await names(`tag=${red.uuid}&name=t1`), ['t1']);
  });

  test('GET /tags/<uuid>/<kind>/ lists tagged objects (golden shape, nested resource_uri quirk)', async () => {
    const res = await alice.get(`tags/${red.uuid}/widgets/`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.json.meta, { limit: 20, offset: 0, total_count: 2 });
    const item = res.json.objects[0];
    assert.deepEqual(item.resource_uri, { resource_uri: w1.resource_uri, uuid: w1.uuid });
    const expected = golden('response_tags_list_resource').objects[0];
    assert.deepEqual(
      Object.keys(item)
        .filter((k) => k in expected)
        .sort(),
      ['name', 'owner', 'resource_uri', 'uuid'],
    );
    sameShape(res.json.meta, golden('response_tags_list_resource').meta);
    assert.equal((await bob.get(`tags/${red.uuid}/widgets/`)).status, 404, "another user's tag");
    assert.equal((await alice.get(`tags/${crypto.randomUUID()}/widgets/`)).status, 404);
  });

  test('PUT tags on the resource replaces its tag set; the tag side follows', async () => {
    const res = await alice.put(w3.resource_uri, { tags: [blue.uuid] });
    assert.deepEqual(
      res.json.tags.map((t: any) => t.uuid),
      [blue.uuid],
    );
    assert.deepEqual((await alice.get(blue.resource_uri)).json.resources.map((r: any) => r.uuid).sort(), [w2.uuid, w3.uuid].sort());
    const untag = await alice.put(w3.resource_uri, { tags: [] });
    assert.deepEqual(untag.json.tags, []);
  });

  test("unknown tags and another user's tags are a 400 on tags", async () => {
    const bobs = (await bob.post('tags/', { name: 'bobs' })).json.objects[0];
    for (const t of [crypto.randomUUID(), bobs.uuid]) {
      const res = await alice.post('widgets/', { name: 'x', size: 1, tags: [t] });
      assert.equal(res.status, 400);
      assert.equal(res.json[0].error_point, 'tags');
    }
  });

  test('deleting a tagged resource removes it from its tags', async () => {
    const w = await widget(alice, { name: 'doomed', size: 1, tags: [red.uuid] });
    assert.equal((await alice.delete(w.resource_uri)).status, 204);
    assert.ok(!(await alice.get(red.resource_uri)).json.resources.some((r: any) => r.uuid === w.uuid));
  });

  test('deleting a tag untags its resources', async () => {
    const t = (await alice.post('tags/', { name: 'temp' })).json.objects[0];
    const w = await widget(alice, { name: 'tagged-temp', size: 1, tags: [t.uuid] });
    await alice.delete(t.resource_uri);
    assert.deepEqual((await alice.get(w.resource_uri)).json.tags, []);
  });
});
