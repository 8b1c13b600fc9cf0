import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engine, freshDatabase } from '../helpers/db.js';
import { Client, IDLE_MS } from '../helpers/client.js';
import { cli } from '../helpers/cli.js';
import { serveProcess, stratus } from '../helpers/process.js';
import { startServer } from '../helpers/server.js';

/**
 * The CLI and the server as real processes sharing one database, with signals and crashes. Operator
 * commands that only seed run in-process (test/helpers/cli.ts); one of each kind still runs as a process.
 */
let dir: string;
let db: { url: string; drop: () => Promise<void> };

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-proc-'));
  db = engine === 'sqlite' ? { url: join(dir, 'nested', 'stratus.db'), drop: async () => {} } : await freshDatabase();
});
after(async () => {
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

// These tests share nothing (the first has the database to itself): their process start-ups overlap.
describe('stratus command', { concurrency: true }, () => {
  test('migrate, users add, then serve on the same --db: the added user can log in; the demo login is printed and works', async () => {
    const migrate = stratus(['migrate', '--db', db.url]);
    assert.equal(migrate.status, 0, migrate.stderr);
    assert.match(migrate.stdout, /^schema of (sqlite|postgres) .* created: \d+ migration\(s\) applied, now at \d{4}_\w+\n$/);
    const add = stratus(['users', 'add', 'ops@example.com', '--password', 'ops-secret', '--db', db.url]);
    assert.equal(add.status, 0, add.stderr);
    assert.match(add.stdout, /created ops@example\.com [0-9a-f-]{36}/);
    const dup = await cli(['users', 'add', 'OPS@example.com', '--password', 'x', '--db', db.url]);
    assert.notEqual(dup.status, 0);
    assert.match(dup.stderr, /already exists/);

    const srv = await serveProcess(['--db', db.url]);
    try {
      const ops = new Client(srv.base, { email: 'ops@example.com', password: 'ops-secret' });
      assert.equal((await ops.get('profile/')).json.email, 'ops@example.com');
      // A database that already had users gets no demo account.
      assert.doesNotMatch(srv.stdout(), /Demo login/);
      const list = await cli(['users', 'list', '--db', db.url]);
      assert.match(list.stdout, /REGULAR\s+ops@example\.com/);
    } finally {
      srv.child.kill('SIGTERM');
      assert.equal(await srv.exited, 0);
    }
  });

  test('invalid configuration stops start-up with a clear message', async () => {
    // The process's own exit code and output once; the other cases take the same path in-process.
    const real = stratus(['serve', '--port', 'eighty']);
    assert.equal(real.status, 2, real.stderr);
    assert.match(real.stderr, /^stratus: port must be a whole number, got "eighty"$/m);
    assert.doesNotMatch(real.stderr, /\n\s+at /, 'no stack trace');
    for (const [args, env, pattern] of [
      [['serve', '--port', 'eighty'], {}, /port must be a whole number/],
      [['serve', '--port', '70000'], {}, /port must be between/],
      [['serve'], { STRATUS_LOG_LEVEL: 'loud' }, /log-level must be one of/],
      [['serve', '--capabilities', '/nonexistent.json'], {}, /cannot read capabilities file/],
      [['serve', '--bogus'], {}, /unknown option "--bogus": stratus serve/],
      [['frobnicate'], {}, /unknown command/],
    ] as const) {
      const res = await cli([...args], env);
      assert.equal(res.status, 2, `${args.join(' ')}: ${res.stderr}`);
      assert.match(res.stderr, pattern);
      assert.doesNotMatch(res.stderr, /\n\s+at /, 'no stack trace');
    }
  });

  test('an unreachable PostgreSQL stops start-up with a non-zero exit', () => {
    const res = stratus(['serve', '--db', 'postgres://nobody@127.0.0.1:1/none']);
    assert.notEqual(res.status, 0);
    assert.match(res.stderr, /stratus:/);
  });
});

describe('server lifecycle', () => {
  test('first start creates a demo account and prints a working login; later starts print the same', async () => {
    const fresh = engine === 'sqlite' ? { url: join(dir, 'demo.db'), drop: async () => {} } : await freshDatabase();
    try {
      let login: string[] = [];
      for (let round = 0; round < 2; round++) {
        const srv = await serveProcess(['--db', fresh.url]);
        try {
          const m = /Demo login: (\S+) \/ (\S+)/.exec(srv.stdout());
          assert.ok(m, srv.stdout());
          if (round === 0) login = [m[1], m[2]];
          else assert.deepEqual([m[1], m[2]], login);
          assert.match(srv.stdout(), /curl -u '/);
          const demo = new Client(srv.base, { email: login[0], password: login[1] });
          assert.equal((await demo.get('profile/')).status, 200);
        } finally {
          srv.child.kill('SIGTERM');
          assert.equal(await srv.exited, 0);
        }
      }
    } finally {
      await fresh.drop();
    }
  });

  test('an acknowledged write survives kill -9', async () => {
    assert.equal((await cli(['users', 'add', 'crash@example.com', '--password', 'crash-pw', '--db', db.url])).status, 0);
    const first = await serveProcess(['--db', db.url]);
    const c = new Client(first.base, { email: 'crash@example.com', password: 'crash-pw' });
    const made = await c.post('tags/', { name: 'durable' });
    assert.equal(made.status, 201);
    first.child.kill('SIGKILL');
    await first.exited;
    const second = await serveProcess(['--db', db.url]);
    try {
      const c2 = new Client(second.base, { email: 'crash@example.com', password: 'crash-pw' });
      const got = await c2.get(made.json.objects[0].resource_uri);
      assert.equal(got.status, 200);
      assert.equal(got.json.name, 'durable');
    } finally {
      second.child.kill('SIGTERM');
      await second.exited;
    }
  });

  test('SIGTERM lets an in-flight request finish, then exits 0', async () => {
    assert.equal((await cli(['users', 'add', 'term@example.com', '--password', 'term-pw', '--db', db.url])).status, 0);
    // Debug logging shows when the server has the request (`incoming request`) and has the signal (`shutting down`).
    const srv = await serveProcess(['--db', db.url, '--log-level', 'debug', '--log-format', 'json']);
    const url = new URL(srv.base);
    // Send a request whose body is still arriving when the signal lands.
    const sock = net.connect(Number(url.port), url.hostname);
    await new Promise((r) => sock.once('connect', r));
    const body = JSON.stringify({ name: 'in-flight' });
    const auth = Buffer.from('term@example.com:term-pw').toString('base64');
    sock.write(
      `POST /api/2.0/tags/ HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ${auth}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`,
    );
    await srv.printed(/"msg":"incoming request"/);
    srv.child.kill('SIGTERM');
    await srv.printed(/"msg":"shutting down"/);
    let reply = '';
    sock.on('data', (d) => (reply += d));
    const closed = new Promise((r) => sock.on('close', r));
    sock.write(body.slice(5));
    await closed;
    assert.match(reply, /^HTTP\/1\.1 201/);
    assert.equal(await srv.exited, 0);
  });

  // The timeout is the HTTP server's own (src/app.ts): an in-process server shows it as well as a process.
  test('a client that never finishes its request is timed out', async () => {
    const srv = await startServer({ db: db.url, 'request-timeout': '500' });
    try {
      const url = new URL(srv.base);
      const sock = net.connect(Number(url.port), url.hostname);
      let reply = '';
      sock.on('data', (d) => (reply += d));
      const closed = new Promise((r) => sock.on('close', r));
      const auth = Buffer.from('term@example.com:term-pw').toString('base64');
      sock.write(`POST /api/2.0/tags/ HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ${auth}\r\nContent-Length: 100\r\n\r\n{"na`);
      await closed;
      // The 408 is the server's timeout speaking (no bound on how long the machine took to get there).
      assert.match(reply, /^HTTP\/1\.1 408/, JSON.stringify(reply));
      const body = JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4));
      assert.equal(body[0].error_type, 'validation');
    } finally {
      await srv.close();
    }
  });

  // A client reusing an idle connection the server is closing reads ECONNRESET: the server says how long it
  // keeps one (Keep-Alive: timeout=…), keeps it at least that long, and the tests' client lets go sooner.
  test('an idle keep-alive connection is announced and kept for the keep-alive timeout', async () => {
    const srv = await startServer({ db: db.url, 'keep-alive-timeout': '2000' });
    try {
      const url = new URL(srv.base);
      const sock = net.connect(Number(url.port), url.hostname);
      let reply = '';
      sock.on('data', (d) => (reply += d));
      const closed = new Promise<number>((r) => sock.on('close', () => r(Date.now())));
      await new Promise((r) => sock.once('connect', r));
      const sent = Date.now();
      sock.write('GET /api/2.0/capabilities/ HTTP/1.1\r\nHost: x\r\n\r\n');
      // Closed by the server only after at least the announced idle time (a lower bound: load only lengthens it).
      assert.ok((await closed) - sent >= 2000, 'closed before the keep-alive timeout');
      assert.match(reply, /^HTTP\/1\.1 401/); // (an answer: which one does not matter here)
      assert.match(reply, /\r\nKeep-Alive: timeout=2\r\n/i);
    } finally {
      await srv.close();
    }
    const defaults = await startServer({ db: db.url });
    try {
      const res = await new Client(defaults.base).get('capabilities/');
      const announced = Number(/timeout=(\d+)/.exec(String(res.headers['keep-alive']))?.[1]) * 1000;
      assert.ok(announced >= 60_000 && IDLE_MS < announced, `the server keeps idle connections ${announced} ms, the tests' client ${IDLE_MS} ms`);
    } finally {
      await defaults.close();
    }
  });

  // A test and its in-process server share one event loop: a long synchronous stretch (SQLite work) holds back
  // both sides' timers, and the first request after it must not go into a connection whose server-side
  // keep-alive timer is overdue (it would fire before the request is read, and reset the connection).
  test("the tests' client does not reuse a connection idle past IDLE_MS while the loop was busy", async () => {
    const srv = await startServer({ db: db.url, 'keep-alive-timeout': String(IDLE_MS + 500) });
    try {
      const c = new Client(srv.base);
      assert.equal((await c.get('capabilities/')).status, 401);
      // Busy past both the client's idle time and the server's keep-alive timeout: no timer runs meanwhile.
      for (const end = Date.now() + IDLE_MS + 1500; Date.now() < end;);
      assert.equal((await c.get('capabilities/')).status, 401);
    } finally {
      await srv.close();
    }
  });
});
