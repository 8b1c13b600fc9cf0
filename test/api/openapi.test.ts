import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { servedRoutes } from '../../src/http/routes.js';
import { Contract } from '../helpers/contract.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { withWidgets } from '../helpers/widgets.js';

const ADMIN_TOKEN = 'contract-admin-token-0123456789abcdef';

describe('the OpenAPI document', () => {
  let s: TestServer;
  let doc: any;
  before(async () => {
    // The test-only widgets kind: a kind the document has never heard of is covered from its declaration alone.
    s = await startServer({ 'admin-token': ADMIN_TOKEN }, withWidgets);
    const res = await s.anon().get('openapi.json');
    assert.equal(res.status, 200);
    doc = res.json;
  });
  after(() => s.close());

  test('is served without credentials and is a valid OpenAPI 3.1 document', async () => {
    assert.equal(doc.openapi, '3.1.0');
    const result = await new Validator().validate(doc);
    assert.equal(result.valid, true, JSON.stringify(result.errors)?.slice(0, 2000));
  });

  test('every route the server registers under /api/2.0/ and /_stratus/ is in it, with every method it allows', () => {
    const contract = new Contract(doc);
    const missing: string[] = [];
    for (const route of servedRoutes(s.app)) {
      if (!/^\/(api\/2\.0|_stratus)\//.test(route.url)) continue;
      const template = route.url.replace(/:([A-Za-z_]+)/g, '{$1}');
      const item = doc.paths[template];
      for (const method of route.methods) if (!item?.[method.toLowerCase()]) missing.push(`${method} ${route.url}`);
      assert.equal(contract.route(route.url.replace(/:([A-Za-z_]+)/g, 'x')), template, `the checker finds ${route.url}`);
    }
    assert.deepEqual(missing, [], 'routes without a contract: give their PathSpec a doc (or call documentPath)');
    assert.ok(servedRoutes(s.app).length > 50);
  });

  test('a kind is described from its declaration: fields, filters, actions, statuses', () => {
    const widget = doc.components.schemas.widgets;
    assert.deepEqual(Object.keys(widget.properties).sort(), Object.keys(withWidgets.at(-1)!.fields).sort());
    assert.deepEqual(widget.properties.color.enum, ['blue', 'red', 'green']);
    assert.equal(widget.properties.size.type, 'integer');
    assert.equal(widget.additionalProperties, false);
    const list = doc.paths['/api/2.0/widgets/'];
    const params = list.get.parameters.map((p: any) => p.name);
    for (const name of ['limit', 'offset', 'fields', 'format', 'name', 'name__contains', 'tag', 'tag__name', 'uuid']) assert.ok(params.includes(name), name);
    assert.ok(list.post.responses['201']);
    assert.equal(list.put, undefined);
    assert.deepEqual(
      Object.keys(doc.paths['/api/2.0/widgets/{uuid}/'].delete.responses).filter((k) => k < '400'),
      ['204'],
    );
    const action = doc.paths['/api/2.0/widgets/{uuid}/action/'].post;
    assert.ok(action.responses['202'] && !action.responses['200']);
    assert.match(action.parameters.find((p: any) => p.name === 'do').description, /poke/);
    // Money is a decimal string; sizes are integers; the list envelope; the error array per status.
    assert.equal(doc.components.schemas.profile.properties.autotopup_amount.type, 'string');
    assert.equal(doc.components.schemas.drives.properties.size.type, 'integer');
    assert.deepEqual(doc.components.schemas.ListMeta.required, ['limit', 'offset', 'total_count']);
    assert.deepEqual(doc.components.schemas.Error404.items.properties.error_type.enum, ['notexist']);
    assert.deepEqual(doc.components.schemas.Error401.items.required, ['error_type', 'error_point', 'error_message']);
  });

  test('the answer check fails on an undocumented status, a body off its schema and an undocumented content type', () => {
    const contract = new Contract(doc);
    const url = (p: string) => new URL(p, s.base);
    const json = (status: number, body: unknown) => ({
      status,
      headers: { 'content-type': 'application/json; charset=utf-8' },
      text: JSON.stringify(body),
      json: body,
    });
    const list = { meta: { limit: 20, offset: 0, total_count: 0 }, objects: [] };
    contract.check('GET', url('/api/2.0/widgets/'), json(200, list));
    assert.throws(() => contract.check('GET', url('/api/2.0/widgets/'), json(201, list)), /status not documented/);
    assert.throws(() => contract.check('GET', url('/api/2.0/widgets/'), json(200, { objects: [] })), /does not match/);
    assert.throws(() => contract.check('GET', url('/api/2.0/widgets/'), json(200, { ...list, objects: [{ name: 'w', extra: 1 }] })), /does not match/);
    // fields= lifts the required keys, never the declared ones.
    contract.check('GET', url('/api/2.0/widgets/?fields=name'), json(200, { ...list, objects: [{ name: 'w' }] }));
    assert.throws(() => contract.check('GET', url('/api/2.0/widgets/?fields=name'), json(200, { ...list, objects: [{ nope: 'w' }] })), /does not match/);
    // Errors: the array of that status, its error_type among the status's own.
    contract.check('GET', url('/api/2.0/widgets/x/'), json(404, [{ error_type: 'notexist', error_point: null, error_message: 'gone' }]));
    assert.throws(
      () => contract.check('GET', url('/api/2.0/widgets/x/'), json(404, [{ error_type: 'validation', error_point: null, error_message: 'x' }])),
      /does not match/,
    );
    assert.throws(() => contract.check('GET', url('/api/2.0/widgets/x/'), json(404, { error: 'x' })), /does not match/);
    // A method the path lacks must be an error; an unknown path too.
    assert.throws(() => contract.check('PUT', url('/api/2.0/widgets/'), json(200, {})), /not in the document/);
    contract.check('PUT', url('/api/2.0/widgets/'), json(405, [{ error_type: 'validation', error_point: null, error_message: 'no' }]));
    contract.check('GET', url('/api/2.0/nothing-here/'), json(404, [{ error_type: 'notexist', error_point: null, error_message: 'no' }]));
    // XML: the media type must be documented for the status; 204 has no body.
    contract.check('GET', url('/api/2.0/widgets/?format=xml'), {
      status: 200,
      headers: { 'content-type': 'application/xml; charset=utf-8' },
      text: '<response/>',
      json: undefined,
    });
    assert.throws(
      () => contract.check('GET', url('/api/2.0/widgets/'), { status: 200, headers: { 'content-type': 'text/html' }, text: '<p>', json: undefined }),
      /content type text\/html is not documented/,
    );
    contract.check('DELETE', url('/api/2.0/widgets/x/'), { status: 204, headers: { 'content-type': 'text/html; charset=utf-8' }, text: '', json: undefined });
    assert.throws(() => contract.check('DELETE', url('/api/2.0/widgets/x/'), json(204, {})), /without a body/);
  });

  test('the test client checks real answers, XML included', async () => {
    const u = await s.user();
    const made = await u.post('widgets/', { name: 'w', size: 3 });
    assert.equal(made.status, 201);
    const uuid = made.json.objects[0].uuid;
    assert.equal((await u.get('widgets/?format=xml')).status, 200);
    assert.equal((await u.get(`widgets/${uuid}/?fields=name`)).json.name, 'w');
    assert.equal((await u.post(`widgets/${uuid}/action/?do=poke`)).status, 202);
    assert.equal((await u.get('openapi.json?format=xml')).status, 200);
    assert.equal((await u.delete(`widgets/${uuid}/`)).status, 204);
  });
});
