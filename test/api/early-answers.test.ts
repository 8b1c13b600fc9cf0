import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { FrozenClock } from '../helpers/clock.js';

/**
 * Reusable GETs answered before Fastify routes the request (src/http/routes.ts quickAnswers): the same status,
 * headers and bytes as Fastify's route gives, and everything one of the conventions decides otherwise (rate
 * limits that count, credentials not verified moments ago, a body, an unusual query, an error) still goes
 * through Fastify. A request with `Content-Length: 0` is always Fastify's: the same URL, caller and kept answer.
 * The clock stands still, so credentials verified once stay verified "moments ago" however slow the machine.
 */
type User = Client & { uuid: string; email: string; password: string };
const MINIMAL = { cpu: 1000, mem: 536870912, name: 'early', vnc_password: 'testserver' };

/** The headers of an answer that must agree, as name: value (the date and the request id differ per request). */
function comparable(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (k !== 'date' && k !== 'x-request-id' && v !== undefined) out[k] = String(v);
  return out;
}

const THROUGH_FASTIFY = { 'content-length': '0' };
/** Verify mode (`npm run test:verify`) sends requests whose answers may be kept through Fastify, which checks them. */
const VERIFYING = process.env.STRATUS_ANSWER_CACHE_VERIFY === '1';

for (const mode of ['kept', 'made'] as const) {
  describe(`early answers (${mode === 'kept' ? 'kept answers' : 'every answer made afresh'})`, () => {
    let srv: TestServer;
    let alice: User;
    let server: { uuid: string };
    before(async () => {
      srv = await startServer(mode === 'made' ? { 'answer-cache-mib': '0' } : {}, undefined, { clock: new FrozenClock() });
      alice = await srv.user();
      const res = await alice.post('servers/', { objects: [MINIMAL, { ...MINIMAL, name: 'early-2' }] });
      assert.equal(res.status, 201, res.text);
      server = res.json.objects[0];
    });
    after(() => srv.close());

    const early = () => srv.app.metrics.early;
    /** Early answers per request: none while verifying kept answers; with none kept there is nothing to verify. */
    const EARLY = VERIFYING && mode === 'kept' ? 0 : 1;

    test('a repeated GET is answered before the framework, with the headers and bytes the framework gives', async () => {
      const cases: [string, string, Record<string, string>][] = [
        ['GET', `servers/${server.uuid}/`, {}],
        ['GET', 'servers/?limit=1&offset=1', {}],
        ['GET', 'servers/detail/', { 'accept-encoding': 'gzip' }],
        ['GET', 'capabilities/', { 'accept-encoding': 'deflate' }],
        ['GET', `servers/${server.uuid}/`, { accept: 'application/xml' }],
        ['GET', 'tags/?format=xml', {}],
        ['HEAD', 'servers/detail/', {}],
      ];
      for (const [method, path, headers] of cases) {
        const slow = await alice.request(method, path, { headers: { ...headers, ...THROUGH_FASTIFY } });
        assert.equal(slow.status, 200, `${method} ${path}: ${slow.text}`);
        const was = early();
        const quick = await alice.request(method, path, { headers });
        assert.equal(early(), was + EARLY, `${method} ${path} ${JSON.stringify(headers)} was answered before the framework (unless verifying)`);
        assert.equal(quick.status, 200);
        assert.deepEqual(comparable(quick.headers), comparable(slow.headers), `${method} ${path} ${JSON.stringify(headers)}`);
        assert.deepEqual(quick.raw, slow.raw);
        assert.match(String(quick.headers['x-request-id']), /^[0-9a-f-]{36}$/);
        assert.notEqual(quick.headers['x-request-id'], slow.headers['x-request-id']);
      }
    });

    test('early answers are counted in the request metrics like the others', async () => {
      const path = `servers/${server.uuid}/`;
      const series = async () => {
        const text = (await srv.anon().get('/_stratus/metrics')).text;
        const line = text
          .split('\n')
          .find((l) => l.startsWith('stratus_http_request_duration_seconds_count{route="/api/2.0/servers/:uuid/",method="GET",status="200"}'));
        return Number(line?.split(' ').pop() ?? 0);
      };
      await alice.get(path);
      const [n, was] = [await series(), early()];
      for (let i = 0; i < 3; i++) assert.equal((await alice.get(path)).status, 200);
      assert.equal(early(), was + 3 * EARLY);
      assert.equal(await series(), n + 3);
    });

    test('what the framework decides is left to it: errors, unusual queries, credentials not verified moments ago', async () => {
      const was = early();
      // An unknown object: Fastify's 404 in the error format.
      const missing = await alice.get('servers/00000000-0000-4000-8000-000000000000/');
      assert.equal(missing.status, 404);
      assert.equal(missing.json[0].error_type, 'notexist');
      // A query that is not plain (an escape, a repeated key) is parsed by Fastify.
      assert.equal((await alice.get('servers/?name=early%2D2')).json.objects.length, 1);
      assert.equal((await alice.get('servers/?limit=1&limit=2')).status, 200);
      // A wrong password: 401 with both challenges.
      const wrong = await srv.anon().get('servers/', { authorization: `Basic ${Buffer.from(`${alice.email}:nope`).toString('base64')}` });
      assert.equal(wrong.status, 401);
      assert.ok(wrong.rawHeaders.filter((h) => /^www-authenticate$/i.test(h)).length === 2);
      // An unacceptable Accept: 406.
      assert.equal((await alice.get('servers/', { accept: 'text/html' })).status, 406);
      // No credentials at all.
      assert.equal((await srv.anon().get('servers/')).status, 401);
      assert.equal(early(), was, 'none of these was answered before the framework');
    });
  });
}

describe('early answers and rate limits', () => {
  let srv: TestServer;
  let alice: User;
  before(async () => {
    srv = await startServer({ 'rate-limits': 'default' }, undefined, { clock: new FrozenClock() });
    alice = await srv.user();
  });
  after(() => srv.close());

  test('a request a rate limit counts goes through the framework: each answer carries its budget', async () => {
    const remaining: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await alice.get('capabilities/');
      assert.equal(res.status, 200);
      remaining.push(Number(res.headers['x-ratelimit-remaining']));
    }
    assert.deepEqual(
      remaining.slice(1).map((r, i) => remaining[i] - r),
      [1, 1, 1],
    );
    assert.equal(srv.app.metrics.early, 0);
  });
});
