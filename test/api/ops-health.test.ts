import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { VERSION } from '../../src/version.js';
import { READY_MAX_LAG_MS } from '../../src/http/ops.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { onlyOn } from '../helpers/skips.js';

/** Health, readiness, version and the API index: outside the API namespace (but /api/2.0/), public, never limited. */
let srv: TestServer;
before(async () => {
  // Tight limits: the operator endpoints must never count against them.
  srv = await startServer({ 'rate-limits': 'GET=2/min' });
});
after(() => srv.close());

describe('/_stratus/', () => {
  test('health: 200 without credentials, JSON or XML, never rate-limited; other methods 405', async () => {
    const anon = srv.anon();
    for (let i = 0; i < 6; i++) {
      const res = await anon.request('GET', '/_stratus/health');
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json, { status: 'ok' });
      assert.equal(res.headers['x-ratelimit-limit'], undefined);
    }
    const xml = await anon.request('GET', '/_stratus/health?format=xml');
    assert.equal(xml.status, 200);
    assert.match(xml.text, /<status>ok<\/status>/);
    const post = await anon.request('POST', '/_stratus/health', { body: {} });
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET');
    assert.equal(post.json[0].error_type, 'validation');
  });

  test('version: the release, API, Node, engine and schema', async () => {
    const res = await srv.anon().request('GET', '/_stratus/version');
    assert.equal(res.status, 200);
    assert.equal(res.json.version, VERSION);
    assert.equal(res.json.api, '2.0');
    assert.equal(res.json.node, process.version);
    assert.equal(res.json.database, srv.services.store.dialect);
    assert.match(res.json.schema, /^\d{4}_\w+$/);
  });

  test('ready: database, schema and a running scheduler that keeps up; 503 naming what is not', async () => {
    const anon = srv.anon();
    // This test server drives its scheduler by hand: no loop runs, so it is not ready.
    const idle = await anon.request('GET', '/_stratus/ready');
    assert.equal(idle.status, 503);
    assert.equal(idle.json.status, 'not ready');
    assert.equal(idle.json.checks.database.ok, true);
    assert.equal(idle.json.checks.schema.ok, true);
    assert.equal(idle.json.checks.schema.version, idle.json.checks.schema.expected);
    assert.deepEqual({ ...idle.json.checks.scheduler }, { ok: false, running: false, due_timers: null, lag_ms: null });

    // A loop that runs (as `serve` has one) but is behind: due work older than the limit.
    srv.app.schedulerProbe = { polling: true, backlog: () => srv.scheduler.backlog() };
    try {
      const u = await srv.user();
      assert.equal((await u.post('drives/', { name: 'd', size: 1 << 30, media: 'disk' })).status, 201);
      srv.clock.advance(READY_MAX_LAG_MS + 60_000);
      const behind = await anon.request('GET', '/_stratus/ready');
      assert.equal(behind.status, 503, behind.text);
      assert.equal(behind.json.checks.scheduler.running, true);
      assert.equal(behind.json.checks.scheduler.due_timers, 1);
      assert.ok(behind.json.checks.scheduler.lag_ms > READY_MAX_LAG_MS, behind.text);
      await srv.scheduler.runDue();
      const ready = await anon.request('GET', '/_stratus/ready');
      assert.equal(ready.status, 200, ready.text);
      assert.equal(ready.json.status, 'ready');
      assert.deepEqual({ ...ready.json.checks.scheduler }, { ok: true, running: true, due_timers: 0, lag_ms: 0 });
      assert.equal(typeof ready.json.checks.database.ms, 'number');
    } finally {
      srv.app.schedulerProbe = null;
    }
  });
});

describe('the API index', () => {
  test('GET /api/2.0/ lists the kinds with their list and schema URLs, without credentials; / points at it', async () => {
    const anon = srv.anon();
    const res = await anon.get('/api/2.0/');
    assert.equal(res.status, 200, res.text);
    for (const kind of ['servers', 'drives', 'tags', 'acls', 'profile', 'capabilities', 'libdrives', 'ips', 'vlans'])
      assert.deepEqual(res.json[kind], { list_endpoint: `/api/2.0/${kind}/`, schema: `/api/2.0/${kind}/schema/` }, kind);
    const xml = await anon.get('/api/2.0/?format=xml');
    assert.equal(xml.status, 200);
    assert.match(xml.text, /<servers type="hash"><list_endpoint>\/api\/2\.0\/servers\/<\/list_endpoint>/);
    const root = await fetch(new URL('/', srv.base)).then(async (r) => ({ status: r.status, json: await r.json() }));
    assert.equal(root.status, 200);
    assert.equal(root.json.api, '/api/2.0/');
    assert.equal(root.json.health, '/_stratus/health');
  });
});

describe('/_stratus/metrics', () => {
  test('requests by route, method and status; rejections; scheduler; servers by status', async () => {
    const u = await srv.user();
    assert.equal((await u.get('capabilities/')).status, 200);
    assert.equal((await u.get('tags/nope/')).status, 404);
    assert.equal((await srv.anon().get('tags/')).status, 401);
    const made = await u.post('servers/', { name: 's', cpu: 1000, mem: 536870912, vnc_password: 'pw' });
    assert.equal(made.status, 201, made.text);
    const res = await srv.anon().request('GET', '/_stratus/metrics');
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^text\/plain/);
    const text = res.text;
    assert.match(text, /stratus_http_request_duration_seconds_count\{route="\/api\/2\.0\/capabilities\/",method="GET",status="200"\} [1-9]/);
    assert.match(text, /stratus_http_request_duration_seconds_count\{route="\/api\/2\.0\/tags\/:uuid\/",method="GET",status="404"\} 1/);
    assert.match(text, /stratus_http_rejections_total\{reason="auth"\} [1-9]/);
    assert.match(text, /stratus_scheduler_due_timers \d+/);
    assert.match(text, /stratus_scheduler_running 0/);
    assert.match(text, /stratus_servers\{status="stopped"\} [1-9]/);
    assert.match(text, /process_cpu_seconds_total/);
    if (srv.services.store.dialect === 'postgres') assert.match(text, /stratus_db_pool_connections\{state="total"\} [1-9]/);
    else assert.doesNotMatch(text, /stratus_db_pool_connections\{/);
  });

  test("at rest the pool has nobody waiting (the metric's own reads are not counted as waiting)", { skip: onlyOn('postgres') }, async () => {
    // As `serve` wires it: the scheduler gauge reads its backlog from the database in the same collection.
    const probe = srv.app.schedulerProbe;
    srv.app.schedulerProbe = srv.scheduler;
    try {
      for (let i = 0; i < 5; i++) {
        const res = await srv.anon().request('GET', '/_stratus/metrics');
        assert.equal(res.status, 200);
        assert.match(res.text, /stratus_db_pool_connections\{state="waiting"\} 0\n/);
      }
    } finally {
      srv.app.schedulerProbe = probe;
    }
  });
});
