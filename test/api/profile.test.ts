import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { golden, sameShape } from '../helpers/golden.js';

let srv: TestServer;
let alice: Client & { uuid: string; email: string };

before(async () => {
  srv = await startServer({ currency: 'USD' });
  alice = await srv.user();
});
after(() => srv.close());

describe('profile', () => {
  test('GET is a single object shaped like the golden dump, with schema defaults', async () => {
    const res = await alice.get('profile/');
    assert.equal(res.status, 200);
    const expected = golden('response_profile');
    // network_restrictions, tax_* are null in both; postcode is a string in the dump.
    sameShape(res.json, expected);
    const p = res.json;
    assert.equal(p.uuid, alice.uuid);
    assert.equal(p.email, alice.email);
    assert.equal(p.state, 'REGULAR');
    assert.equal(p.currency, 'USD');
    assert.equal(p.clone_naming, 'NONE');
    assert.equal(p.language, 'EN');
    assert.equal(p.autotopup_amount, '0E-16');
    assert.equal(p.invoicing, true);
    assert.equal(p.mailing_list, true);
    assert.match(p.signup_time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/);
  });

  test('PUT of the whole object back (as pycloudsigma does) changes only writable fields', async () => {
    const before = (await alice.get('profile/')).json;
    const body = { ...golden('request_profile_update'), email: 'evil@example.com', uuid: 'x', state: 'GUEST' };
    const res = await alice.put('profile/', body);
    assert.equal(res.status, 200);
    assert.equal(res.json.company, 'Newly Set Company Name');
    assert.equal(res.json.clone_naming, 'COUNTER');
    assert.equal(res.json.town, 'Sofia');
    assert.equal(res.json.email, alice.email);
    assert.equal(res.json.uuid, alice.uuid);
    assert.equal(res.json.state, 'REGULAR');
    assert.equal(res.json.bank_reference, before.bank_reference);
    assert.equal(res.json.signup_time, before.signup_time);
    assert.deepEqual((await alice.get('profile/')).json, res.json, 'persisted');
  });

  test('PUT is partial and money is an exact decimal string', async () => {
    const res = await alice.put('profile/', { autotopup_amount: '12.5', tx_autotopup_threshold: 3 });
    assert.equal(res.status, 200);
    assert.equal(res.json.autotopup_amount, '12.5000000000000000');
    assert.equal(res.json.tx_autotopup_threshold, '3.0000000000000000');
    assert.equal(res.json.company, 'Newly Set Company Name');
    const precise = await alice.put('profile/', { autotopup_amount: '0.1000000000000001' });
    assert.equal(precise.json.autotopup_amount, '0.1000000000000001');
  });

  test('invalid values are 400 with the field as error_point', async () => {
    for (const [body, point] of [
      [{ clone_naming: 'SOMETIMES' }, 'clone_naming'],
      [{ invoicing: 'yes' }, 'invoicing'],
      [{ autotopup_amount: 'lots' }, 'autotopup_amount'],
      [{ autotopup_amount: '1e999999' }, 'autotopup_amount'],
      [{ first_name: 42 }, 'first_name'],
      [{ meta: [] }, 'meta'],
    ] as const) {
      const res = await alice.put('profile/', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json[0].error_type, 'validation');
      assert.equal(res.json[0].error_point, point);
    }
  });

  test('every clone naming strategy is accepted', async () => {
    for (const v of ['NONE', 'COUNTER', 'DATE', 'TIMESTAMP']) {
      assert.equal((await alice.put('profile/', { clone_naming: v })).json.clone_naming, v);
    }
  });

  test('DELETE and POST are 405', async () => {
    assert.equal((await alice.delete('profile/')).status, 405);
    assert.equal((await alice.post('profile/', {})).status, 405);
  });

  test('each user sees their own profile', async () => {
    const bob = await srv.user();
    const res = await bob.get('profile/');
    assert.equal(res.json.uuid, bob.uuid);
    assert.equal(res.json.company, '');
  });

  test('schema matches the golden dump (field set, types, defaults, flags)', async () => {
    const res = await alice.get('profile/schema/');
    const expected = golden('response_profile_schema');
    assert.deepEqual(Object.keys(res.json).sort(), Object.keys(expected).sort());
    assert.deepEqual(res.json.allowed_detail_http_methods, expected.allowed_detail_http_methods);
    assert.deepEqual(res.json.allowed_list_http_methods, expected.allowed_list_http_methods);
    assert.deepEqual(Object.keys(res.json.fields).sort(), Object.keys(expected.fields).sort());
    for (const [name, want] of Object.entries<any>(expected.fields)) {
      const got = res.json.fields[name];
      assert.equal(got.type, want.type, `${name}.type`);
      assert.equal(got.nullable, want.nullable, `${name}.nullable`);
      assert.equal(got.help_text, want.help_text, `${name}.help_text`);
      if (name === 'signup_time') continue; // a timestamp default in the dump; read-only here (see declaration)
      assert.equal(got.readonly, want.readonly, `${name}.readonly`);
      assert.deepEqual(got.default, want.default, `${name}.default`);
    }
  });
});

describe('capabilities', () => {
  test('GET matches the golden dump (from the default config)', async () => {
    const res = await alice.get('capabilities/');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, golden('response_capabilities'));
  });
  test('schema is the special capabilities schema', async () => {
    const res = await alice.get('capabilities/schema/');
    assert.deepEqual(res.json, golden('response_capabilities_schema'));
  });
  test('PUT, POST and DELETE are 405', async () => {
    for (const m of ['PUT', 'POST', 'DELETE']) assert.equal((await alice.request(m, 'capabilities/')).status, 405);
  });
  test('needs authentication', async () => {
    assert.equal((await srv.anon().get('capabilities/')).status, 401);
  });
});
