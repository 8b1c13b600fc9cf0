/**
 * `serve --workers 2` (src/serve-workers.ts) as a real process on a SQLite file or a PostgreSQL schema: any
 * worker answers any request, so what one worker made (a session, a rate-limit count, an event, a timer) is
 * what the other sees; a killed worker is replaced; SIGHUP replaces both without one failed request.
 * (Deaths and restarts under a keep-alive client: workers-supervisor.test.ts.)
 *
 * Which worker answered is the `X-Stratus-Worker` header (its pid). Every request here opens a connection
 * of its own (no keep-alive) unless it says otherwise: whichever worker accepts it first answers it, so a test
 * that needs both asks until both have answered, or keeps a connection to each (`pinned`).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { engine, freshDatabase } from '../helpers/db.js';
import { serveProcess, type Running } from '../helpers/process.js';
import { until } from '../helpers/until.js';

const EMAIL = 'workers@example.com';
const PASSWORD = 'workers-secret';
const BASIC = `Basic ${Buffer.from(`${EMAIL}:${PASSWORD}`).toString('base64')}`;

interface Answer {
  status: number;
  worker: string;
  headers: http.IncomingHttpHeaders;
  json: unknown;
}

let srv: Running;
let dir: string;
let port: number;

/** One request on a connection of its own (or on `agent`'s); `auth: null` sends no credentials. */
function call(
  method: string,
  path: string,
  opts: { body?: unknown; headers?: Record<string, string>; auth?: string | null; agent?: http.Agent } = {},
): Promise<Answer> {
  const body = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: path.startsWith('/') ? path : `/api/2.0/${path}`,
        agent: opts.agent ?? false,
        headers: {
          ...(opts.auth === null ? {} : { authorization: opts.auth ?? BASIC }),
          ...(body ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}),
          ...opts.headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          let json: unknown;
          try {
            json = text ? JSON.parse(text) : null;
          } catch {
            json = text;
          }
          resolve({ status: res.statusCode ?? 0, worker: String(res.headers['x-stratus-worker'] ?? ''), headers: res.headers, json });
        });
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path}: no answer within 10 s`)));
    req.end(body);
  });
}

/**
 * One keep-alive connection to each of `n` different workers (the kernel gives a new connection to whichever
 * worker accepts first): connections are opened until `n` workers have answered on one.
 */
async function pinned(n: number): Promise<http.Agent[]> {
  const byWorker = new Map<string, http.Agent>();
  await until(`a connection to each of ${n} workers`, async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const a = await call('GET', 'tags/', { agent });
    if (byWorker.has(a.worker)) agent.destroy();
    else byWorker.set(a.worker, agent);
    return byWorker.size >= n;
  });
  return [...byWorker.values()];
}

/** Requests (made by `make`) until `n` different workers have answered; every answer must pass `check`. */
async function fromWorkers(n: number, make: () => Promise<Answer>, check: (a: Answer) => void = () => {}): Promise<Set<string>> {
  const seen = new Set<string>();
  await until(`answers from ${n} workers`, async () => {
    const a = await make();
    check(a);
    seen.add(a.worker);
    return seen.size >= n;
  });
  return seen;
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-workers-'));
  const db = engine === 'sqlite' ? join(dir, 'stratus.db') : (await freshDatabase()).url;
  srv = await serveProcess([
    '--db',
    db,
    '--workers',
    '2',
    '--ci',
    // The primary says when a restart is done (info).
    '--log-level',
    'info',
    '--demo-login',
    `${EMAIL}:${PASSWORD}`,
    // Generous limits, and one small enough to reach: 6 lists of firewall policies a day.
    '--rate-limits',
    'GET=100000/min,POST=100000/min,PUT=100000/min,DELETE=100000/min,GET:/fwpolicies/=6/day',
    // A boot that is still due when the request answers: the scheduler owner's loop runs it.
    '--delays',
    'server.boot=300',
  ]);
  port = Number(new URL(srv.base).port);
});

after(() => {
  // A test that failed before the last one leaves the server to test/helpers/process.ts, which kills it.
  rmSync(dir, { recursive: true, force: true });
});

describe(`serve --workers 2 (${engine})`, () => {
  test('both workers answer, and say which one did', async () => {
    const seen = await fromWorkers(
      2,
      () => call('GET', 'tags/'),
      (a) => assert.equal(a.status, 200),
    );
    for (const pid of seen) assert.match(pid, /^\d+$/);
    // Each is ready (a load balancer's check), the one running the scheduler's loop and the other alike.
    await fromWorkers(
      2,
      () => call('GET', '/_stratus/ready', { auth: null }),
      (a) => assert.equal(a.status, 200, JSON.stringify(a.json)),
    );
    assert.ok(!seen.has(String(srv.child.pid)), 'the primary answers nothing itself');
  });

  test('a cookie session made on one worker works on the other', async () => {
    const login = await call('POST', 'accounts/action/?do=login', { body: { username: EMAIL, password: PASSWORD }, auth: null });
    assert.equal(login.status, 200, JSON.stringify(login.json));
    const cookies = ([] as string[]).concat(login.headers['set-cookie'] ?? []).map((c) => c.split(';')[0]);
    const cookie = cookies.filter((c) => /^(sessionid|csrftoken)=/.test(c)).join('; ');
    assert.match(cookie, /sessionid=/);
    const seen = await fromWorkers(
      2,
      () => call('GET', 'balance/', { auth: null, headers: { cookie } }),
      (a) => assert.equal(a.status, 200, JSON.stringify(a.json)),
    );
    assert.equal(seen.size, 2);
  });

  test('a rate limit counts the requests of every worker', async () => {
    // The six allowed requests alternate between the two workers: neither could have counted six alone.
    const agents = await pinned(2);
    const answers: Answer[] = [];
    try {
      for (let i = 0; i < 10; i++) answers.push(await call('GET', 'fwpolicies/', { agent: agents[i % 2] }));
    } finally {
      for (const agent of agents) agent.destroy();
    }
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200, 200, 200, 200, 429, 429, 429, 429],
    );
    assert.equal(new Set(answers.slice(0, 6).map((a) => a.worker)).size, 2);
  });

  test('a change made through either worker reaches a websocket opened on one of them', async () => {
    const auth = await call('POST', 'accounts/action/?do=authenticate_asynchronous');
    assert.equal(auth.status, 200);
    const cookie = String(auth.headers['set-cookie']).split(';')[0];
    const frames: { resource_uri: string }[] = [];
    const ws = new WebSocket(`ws://127.0.0.1:${port}/websocket`, { headers: { cookie } });
    ws.on('message', (m) => frames.push(JSON.parse(String(m)) as { resource_uri: string }));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    try {
      const made: Answer[] = [];
      for (let i = 0; i < 6 || new Set(made.map((a) => a.worker)).size < 2; i++) {
        const a = await call('POST', 'tags/', { body: { name: `stream-${i}` } });
        assert.equal(a.status, 201);
        made.push(a);
      }
      const uris = made.map((a) => (a.json as { objects: { resource_uri: string }[] }).objects[0].resource_uri);
      await until('a frame for every tag, whichever worker made it', () => uris.every((u) => frames.some((f) => f.resource_uri === u)));
    } finally {
      ws.close();
    }
  });

  test("a server's boot transition runs exactly once", async () => {
    const made = await call('POST', 'servers/', { body: { name: 'boot-once', cpu: 1000, mem: 536870912, vnc_password: 'secret12' } });
    assert.equal(made.status, 201, JSON.stringify(made.json));
    const uuid = (made.json as { objects: { uuid: string }[] }).objects[0].uuid;
    const started = await call('POST', `servers/${uuid}/action/?do=start`);
    assert.equal(started.status, 202, JSON.stringify(started.json));
    await until('the server runs', async () => ((await call('GET', `servers/${uuid}/`)).json as { status: string }).status === 'running');
    const logs = await call('GET', `logs/?uuid=${uuid}&limit=0`);
    assert.equal(logs.status, 200);
    const boots = (logs.json as { objects: { action: string }[] }).objects.filter((e) => e.action === 'boot');
    assert.equal(boots.length, 1, JSON.stringify(logs.json));
  });

  test('a killed worker is replaced, and requests keep being answered', async () => {
    const before = await fromWorkers(2, () => call('GET', 'tags/'));
    const victim = [...before][0];
    process.kill(Number(victim), 'SIGKILL');
    // A connection the worker had accepted as it died is reset (SIGKILL is not graceful): such failures are
    // allowed until the replacement answers; after that, none.
    const after = new Set<string>();
    await until('a replacement worker answers', async () => {
      const a = await call('GET', 'tags/').catch(() => null);
      if (a) {
        assert.equal(a.status, 200);
        after.add(a.worker);
      }
      return [...after].some((w) => !before.has(w));
    });
    await srv.printed(/worker died; starting another/);
    for (let i = 0; i < 10; i++) {
      const a = await call('GET', 'tags/');
      assert.equal(a.status, 200);
      assert.notEqual(a.worker, victim);
    }
  });

  test('SIGHUP replaces every worker one by one without a failed request', async () => {
    const before = await fromWorkers(2, () => call('GET', 'tags/'));
    let stop = false;
    const statuses: number[] = [];
    const errors: string[] = [];
    const seen = new Set<string>();
    const clients = Array.from({ length: 3 }, async () => {
      while (!stop) {
        try {
          const a = await call('GET', 'tags/');
          statuses.push(a.status);
          seen.add(a.worker);
        } catch (err) {
          errors.push(String(err));
        }
      }
    });
    await until('requests are flowing', () => statuses.length > 10);
    srv.child.kill('SIGHUP');
    await srv.printed(/workers restarted/, 60_000);
    // A few requests after the last replacement, then the loop ends.
    const at = statuses.length;
    await until('requests after the restart', () => statuses.length > at + 10);
    stop = true;
    await Promise.all(clients);
    assert.deepEqual(errors, []);
    assert.deepEqual(
      statuses.filter((s) => s !== 200),
      [],
    );
    const now = await fromWorkers(2, () => call('GET', 'tags/'));
    for (const w of now) assert.ok(!before.has(w), 'every worker is new');
    assert.ok(seen.size >= 3, `answers came from old and new workers: ${[...seen].join(', ')}`);
  });

  test('SIGTERM drains every worker, then the primary exits 0', async () => {
    const workers = await fromWorkers(2, () => call('GET', 'tags/'));
    srv.child.kill('SIGTERM');
    assert.equal(await srv.exited, 0);
    for (const w of workers) assert.throws(() => process.kill(Number(w), 0), /ESRCH/);
  });
});
