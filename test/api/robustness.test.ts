import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { resourcePaths } from '../../src/http/resource-routes.js';
import { registry } from '../../src/registry.js';

/**
 * Bad input never reaches a 500: every registered route x every method x a set of malformed bodies
 * (wrong types, nulls, huge values, broken references). Routes come from the registry, so new ones
 * are covered without editing this file.
 */
let srv: TestServer;
let u: Client;
before(async () => {
  srv = await startServer();
  u = await srv.user();
});
after(() => srv.close());

const BODIES: unknown[] = [
  null, [], 'x', 42, { a: {} }, { name: 123 }, { objects: [null] }, { drives: [{ drive: 5 }] }, { nics: [{ mac: 5 }] },
  { nics: [{ ip_v4_conf: 'x' }] }, { drives: 'x' }, { size: -1 }, { meta: { a: [1] } }, { tags: [{}] }, { resources: [{}] },
  { rules: [null] }, { grantees: [5] }, { objects: [{ uuid: 5 }] }, { cpu: 1e308, mem: 'x', smp: 0 }, { name: 'x'.repeat(5000) },
  { public_key: 'ssh-rsa AAAA' }, { private_key: '-----BEGIN RSA PRIVATE KEY-----\nxx\n-----END RSA PRIVATE KEY-----' },
  { clone_naming: null }, { pubkeys: ['x'] }, { recurse: 'x' },
];
const ACTIONS = ['start', 'clone', 'resize', 'stop', 'bogus'];

test('no route answers malformed input with a 5xx', { timeout: 300_000 }, async () => {
  const d = (await u.post('drives/', { media: 'disk', name: 'd', size: 1 << 30 })).json.objects[0];
  const s = (await u.post('servers/', { cpu: 1000, mem: 536870912, name: 's', vnc_password: 'x' })).json.objects[0];
  const bad: string[] = [];
  let n = 0;
  for (const spec of resourcePaths(registry, srv.services)) {
    const ids = spec.url.includes(':uuid') ? [d.uuid, s.uuid, 'not-a-uuid'] : [''];
    for (const method of ['GET', 'POST', 'PUT', 'DELETE'])
      for (const id of ids)
        for (const body of BODIES) {
          const url = spec.url.replace(':uuid', id) + (spec.url.endsWith('action/') ? `?do=${ACTIONS[n % ACTIONS.length]}` : '');
          const res = await u.request(method, url, { body });
          n++;
          if (res.status >= 500) bad.push(`${method} ${url} ${JSON.stringify(body)} -> ${res.status} ${res.text.slice(0, 200)}`);
        }
  }
  console.log(`robustness: ${n} requests`);
  assert.deepEqual(bad, []);
});
