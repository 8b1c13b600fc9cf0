import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { MALFORMED, PathTable } from '../../src/http/path-table.js';

// The matching rules registerPath's routes had under find-my-way (Fastify's router): static segments before
// parameters, backtracking, one trailing slash ignored, %-decoding, the parameter length limit.
function table(): PathTable<string> {
  const t = new PathTable<string>(10);
  for (const p of [
    '/',
    '/api/2.0/servers/',
    '/api/2.0/servers/detail/',
    '/api/2.0/servers/:uuid/',
    '/api/2.0/servers/:uuid/action/',
    '/api/2.0/tags/:uuid/servers/',
    '/api/2.0/tags/detail/drives/',
    '/_stratus/admin/users/:email/state',
  ])
    t.add(p, p);
  return t;
}

const hit = (t: PathTable<string>, path: string) => {
  const m = t.match(path);
  return m === undefined || m === MALFORMED ? m : { pattern: m.value, params: m.params };
};

describe('path table', () => {
  test('static segments win over parameters; parameters are named by their pattern', () => {
    const t = table();
    assert.deepEqual(hit(t, '/api/2.0/servers/detail/'), { pattern: '/api/2.0/servers/detail/', params: {} });
    assert.deepEqual(hit(t, '/api/2.0/servers/abc/'), { pattern: '/api/2.0/servers/:uuid/', params: { uuid: 'abc' } });
    assert.deepEqual(hit(t, '/api/2.0/servers/abc/action/'), { pattern: '/api/2.0/servers/:uuid/action/', params: { uuid: 'abc' } });
    assert.deepEqual(hit(t, '/_stratus/admin/users/a@b.c/state'), { pattern: '/_stratus/admin/users/:email/state', params: { email: 'a@b.c' } });
  });

  test('backtracks from a static segment that leads nowhere to a parameter', () => {
    const t = table();
    assert.deepEqual(hit(t, '/api/2.0/tags/detail/servers/'), { pattern: '/api/2.0/tags/:uuid/servers/', params: { uuid: 'detail' } });
    assert.deepEqual(hit(t, '/api/2.0/tags/detail/drives/'), { pattern: '/api/2.0/tags/detail/drives/', params: {} });
  });

  test('one trailing slash is optional, on either side', () => {
    const t = table();
    assert.equal((hit(t, '/api/2.0/servers') as { pattern: string }).pattern, '/api/2.0/servers/');
    assert.equal((hit(t, '/_stratus/admin/users/x/state/') as { pattern: string }).pattern, '/_stratus/admin/users/:email/state');
    assert.equal((hit(t, '/') as { pattern: string }).pattern, '/');
    assert.deepEqual(hit(t, '/api/2.0/servers//'), { pattern: '/api/2.0/servers/:uuid/', params: { uuid: '' } });
    assert.equal(hit(t, '/api/2.0//servers/'), undefined);
  });

  test('segments are %-decoded; a bad escape is malformed', () => {
    const t = table();
    assert.deepEqual(hit(t, '/api/2.0/%73ervers/a%20b/'), { pattern: '/api/2.0/servers/:uuid/', params: { uuid: 'a b' } });
    assert.equal(hit(t, '/api/2.0/servers/%E0%A4%A/'), MALFORMED);
  });

  test('a parameter over the limit matches nothing', () => {
    const t = table();
    assert.deepEqual(hit(t, `/api/2.0/servers/${'x'.repeat(10)}/`), { pattern: '/api/2.0/servers/:uuid/', params: { uuid: 'x'.repeat(10) } });
    assert.equal(hit(t, `/api/2.0/servers/${'x'.repeat(11)}/`), undefined);
    assert.equal(hit(t, '/api/2.0/nothing/'), undefined);
    assert.equal(hit(t, '/API/2.0/servers/'), undefined);
  });

  test('a pattern registered twice is refused', () => {
    const t = table();
    assert.throws(() => t.add('/api/2.0/servers/:id/', 'again'), /two routes/);
  });
});
