/**
 * The supervisor's promise with `serve --workers 2` (src/serve-workers.ts): no request sent after a worker's
 * death waits for an answer that never comes, and a rolling restart (SIGHUP) drops no request of a client that
 * keeps its connections alive. Each test prints what it tried and how it went.
 *
 * A dropped request is one the client sent and got no answer to: a reset, a connection closed under it, or no
 * answer within the client's timeout. A keep-alive connection the server closes while it is idle is not one: the
 * client's agent notices and opens another (node's Agent retries nothing, so the test sees every drop).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { engine, freshDatabase } from '../helpers/db.js';
import { serveProcess, type Running } from '../helpers/process.js';
import { until } from '../helpers/until.js';

const EMAIL = 'supervisor@example.com';
const PASSWORD = 'supervisor-secret';
const BASIC = `Basic ${Buffer.from(`${EMAIL}:${PASSWORD}`).toString('base64')}`;
/** The server's idle keep-alive timeout (short: a draining worker waits for its idle connections to time out). */
const KEEP_ALIVE_MS = 3000;
/** A client gives up on an answer after this long: an answer on localhost takes milliseconds. */
const CLIENT_TIMEOUT_MS = 3000;

type Outcome = { answered: true; status: number; worker: string } | { answered: false; error: string; ms: number };

let srv: Running;
let dir: string;
let port: number;

/** One request (on a connection of its own unless `agent` keeps them alive); never rejects: a failure is an outcome. */
function attempt(method: string, path: string, agent: http.Agent | false, body?: unknown, at = port): Promise<Outcome> {
  const text = body === undefined ? undefined : JSON.stringify(body);
  const started = performance.now();
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: at,
        method,
        path: `/api/2.0/${path}`,
        agent,
        headers: { authorization: BASIC, ...(text ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) } : {}) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ answered: true, status: res.statusCode ?? 0, worker: String(res.headers['x-stratus-worker'] ?? '') }));
        res.on('error', (err) => resolve({ answered: false, error: String(err), ms: performance.now() - started }));
      },
    );
    req.on('error', (err) => resolve({ answered: false, error: (err as NodeJS.ErrnoException).code ?? String(err), ms: performance.now() - started }));
    req.setTimeout(CLIENT_TIMEOUT_MS, () => req.destroy(Object.assign(new Error('no answer'), { code: 'TIMEOUT' })));
    req.end(text);
  });
}

/** The workers answering now: requests on fresh connections until `n` distinct ones not in `gone` have answered. */
async function liveWorkers(n: number, gone: Set<string>): Promise<string[]> {
  const seen = new Set<string>();
  await until(`${n} live workers answer`, async () => {
    const a = await attempt('GET', 'tags/', false);
    if (a.answered && a.status === 200 && !gone.has(a.worker)) seen.add(a.worker);
    return seen.size >= n;
  });
  return [...seen];
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const count = (text: string, pattern: RegExp) => text.match(new RegExp(pattern.source, 'g'))?.length ?? 0;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-supervisor-'));
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
    '--rate-limits',
    'off',
    '--keep-alive-timeout',
    String(KEEP_ALIVE_MS),
  ]);
  port = Number(new URL(srv.base).port);
});

after(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe(`serve --workers 2: deaths and restarts (${engine})`, () => {
  test('a request sent 0–50 ms after a worker is killed is answered or refused at once, never left hanging', async () => {
    const KILLS = 7;
    const OFFSETS_MS = [0, 5, 10, 20, 30, 40, 50];
    // The primary stops the service after 5 deaths within 10 s of their workers' start (a crash loop): kills
    // at least 2.8 s apart stay below that.
    const SPACING_MS = 2800;
    const gone = new Set<string>();
    const failures: { kill: number; offset: number; error: string; ms: number }[] = [];
    let answered = 0;
    let last = 0;
    for (let k = 0; k < KILLS; k++) {
      const [victim] = await liveWorkers(2, gone);
      const wait = last + SPACING_MS - Date.now();
      if (wait > 0) await sleep(wait);
      last = Date.now();
      process.kill(Number(victim), 'SIGKILL');
      gone.add(victim);
      const outcomes = await Promise.all(OFFSETS_MS.map(async (offset) => [offset, await sleep(offset).then(() => attempt('GET', 'tags/', false))] as const));
      for (const [offset, o] of outcomes) {
        if (o.answered) {
          assert.equal(o.status, 200, `kill ${k}, ${offset} ms after: ${JSON.stringify(o)}`);
          assert.notEqual(o.worker, victim, 'a killed worker answers nothing');
          answered++;
        } else failures.push({ kill: k, offset, error: o.error, ms: Math.round(o.ms) });
      }
    }
    const hung = failures.filter((f) => f.error === 'TIMEOUT');
    console.log(
      `kill -9 of a worker, ${KILLS} times; ${KILLS * OFFSETS_MS.length} requests on fresh connections 0–50 ms after: ` +
        `${answered} answered, ${failures.length - hung.length} refused at once, ${hung.length} hung (no answer within ${CLIENT_TIMEOUT_MS} ms)` +
        (failures.length ? `: ${JSON.stringify(failures)}` : ''),
    );
    assert.deepEqual(hung, [], 'no request waits for a dead worker');
    // A refusal is only allowed at once (the kernel's reset of a connection the dead worker held).
    for (const f of failures) assert.ok(f.ms < 1000, `refused at once: ${JSON.stringify(f)}`);
    await until('the primary saw every death', () => count(srv.stdout(), /worker died; starting another/) >= KILLS);
    assert.equal(count(srv.stdout(), /worker died; starting another/), KILLS);
  });

  test('SIGHUP restarts drop no request of clients that keep their connections alive', async () => {
    const RESTARTS = 3;
    const CLIENTS = 4;
    // A realistic client: node's own keep-alive agent, which closes an idle connection before the server's
    // announced `Keep-Alive: timeout` runs out.
    const agent = new http.Agent({ keepAlive: true });
    const dropped: string[] = [];
    const statuses = new Map<number, number>();
    const workers = new Set<string>();
    let requests = 0;
    let stop = false;
    const note = (what: string, o: Outcome) => {
      requests++;
      if (!o.answered) return dropped.push(`${what}: ${o.error} after ${Math.round(o.ms)} ms`);
      statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1);
      workers.add(o.worker);
    };
    const clients = Array.from({ length: CLIENTS }, async (_, c) => {
      for (let i = 0; !stop; i++) {
        note('POST tags/', await attempt('POST', 'tags/', agent, { name: `hup-${c}-${i}` }));
        note('GET tags/', await attempt('GET', 'tags/?limit=1', agent));
        // A client that pauses now and then leaves its connections idle, as real ones do.
        if (i % 4 === 3) await sleep(1 + ((c * 7 + i) % 15));
      }
    });
    let restarted = 0;
    try {
      await until('requests are flowing', () => requests > 40);
      const before = await liveWorkers(2, new Set());
      for (let r = 1; r <= RESTARTS; r++) {
        const at = requests;
        srv.child.kill('SIGHUP');
        // A new worker starts in about a second; the old one stops accepting at once (it drains meanwhile).
        await until(`restart ${r} is done`, () => count(srv.stdout(), /workers restarted/) >= r, 20_000);
        restarted = r;
        await until('requests after the restart', () => requests > at + 40);
      }
      stop = true;
      await Promise.all(clients);
      const now = await liveWorkers(2, new Set(before));
      assert.deepEqual(dropped, []);
      assert.deepEqual(
        [...statuses.keys()].filter((s) => s !== 200 && s !== 201),
        [],
      );
      assert.ok(
        now.every((w) => !before.includes(w)),
        'every worker is new',
      );
      // The old workers' drains end: their idle connections ran out the keep-alive timeout (the clients closed them first).
      await until('every old worker has exited', () => before.every((pid) => !alive(Number(pid))), KEEP_ALIVE_MS + 10_000);
    } finally {
      stop = true;
      await Promise.all(clients);
      agent.destroy();
      console.log(
        `${restarted} of ${RESTARTS} rolling restarts done under ${CLIENTS} keep-alive clients: ${requests} requests, ${dropped.length} dropped` +
          `${dropped.length ? ` (${dropped.slice(0, 5).join('; ')})` : ''}; statuses ${JSON.stringify(Object.fromEntries(statuses))}; answered by ${workers.size} workers`,
      );
    }
  });

  test('SIGTERM still stops the primary and every worker', async () => {
    srv.child.kill('SIGTERM');
    assert.equal(await srv.exited, 0);
  });

  test("SIGTERM during a restart: the old workers' idle keep-alive connections end at once, not when they time out", async () => {
    const db = engine === 'sqlite' ? join(dir, 'stop-during-restart.db') : (await freshDatabase()).url;
    const own = await serveProcess([
      '--db',
      db,
      '--workers',
      '2',
      '--ci',
      '--log-level',
      'info',
      '--demo-login',
      `${EMAIL}:${PASSWORD}`,
      '--keep-alive-timeout',
      '60000',
    ]);
    const at = Number(new URL(own.base).port);
    // An idle keep-alive connection to each worker.
    const agents = new Map<string, http.Agent>();
    try {
      await until('a connection to each worker', async () => {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        const a = await attempt('GET', 'tags/', agent, undefined, at);
        if (!a.answered || agents.has(a.worker)) agent.destroy();
        else agents.set(a.worker, agent);
        return agents.size === 2;
      });
      own.child.kill('SIGHUP');
      await own.printed(/workers restarted/, 20_000);
      const started = Date.now();
      own.child.kill('SIGTERM');
      assert.equal(await own.exited, 0);
      const ms = Date.now() - started;
      console.log(`SIGTERM while 2 old workers drained idle keep-alive connections (timeout 60 s): the primary exited 0 after ${ms} ms`);
      assert.ok(ms < 10_000, `a stop waits for no keep-alive timeout (exited after ${ms} ms)`);
    } finally {
      for (const agent of agents.values()) agent.destroy();
    }
  });
});
