import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bannerText, prettyLine } from '../../src/http/log-format.js';
import { Client } from '../helpers/client.js';
import { cli } from '../helpers/cli.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { serveProcess, stratus, type Running } from '../helpers/process.js';

/**
 * Operations seen from real processes: the clock shared by two servers on one database (PostgreSQL, or one
 * SQLite file), `--seed` at start, the start banner as one structured event, the access log.
 */
const TOKEN = 'admin-token-for-tests-0123456789';
let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-procs-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, ms = 30_000): Promise<T> {
  for (const started = Date.now(); ;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() - started > ms) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const stop = async (p: Running) => {
  p.child.kill('SIGTERM');
  return p.exited;
};

describe('the clock is shared by every process', () => {
  test('moved through process A (or the command line), process B shows the moved time and runs the work that fell due', async () => {
    const db = engine === 'sqlite' ? { url: join(dir, 'clock.db'), drop: async () => {} } : await freshDatabase();
    // Creating a drive takes an hour of the injected clock: only a moved clock finishes it.
    const flags = ['--db', db.url, '--ci', '--delays', 'drive.create=3600000', '--admin-token', TOKEN, '--demo-login', 'ci@example.com:ci-secret'];
    const a = await serveProcess(flags);
    const b = await serveProcess(flags);
    try {
      const adminOf = (p: Running) => new Client(p.base);
      const clockOf = async (p: Running) => (await adminOf(p).request('GET', '/_stratus/admin/clock', { headers: { authorization: `Bearer ${TOKEN}` } })).json;
      const userB = new Client(b.base, { email: 'ci@example.com', password: 'ci-secret' });
      const first = (await userB.post('drives/', { name: 'one', size: 1 << 30, media: 'disk' })).json.objects[0].uuid;
      assert.equal((await userB.get(`drives/${first}/`)).json.status, 'creating');

      const moved = await adminOf(a).request('POST', '/_stratus/admin/clock', { body: { advance: '2h' }, headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(moved.status, 200, moved.text);
      assert.ok(moved.json.offset_ms >= 7_200_000);
      // B sees the moved time at its next scheduler tick, and the drive made through it is ready.
      await until('B shows the moved clock', async () => (await clockOf(b)).offset_ms >= 7_200_000);
      await until('the drive is created', async () => (await userB.get(`drives/${first}/`)).json.status === 'unmounted');
      const back = await adminOf(b).request('POST', '/_stratus/admin/clock', {
        body: { set: '2001-01-01T00:00:00Z' },
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(back.status, 400, 'backwards is refused');

      // With A gone, only B can run the work: the command line moves the clock (no process runs anything at once).
      assert.equal(await stop(a), 0);
      const second = (await userB.post('drives/', { name: 'two', size: 1 << 30, media: 'disk' })).json.objects[0].uuid;
      assert.equal((await userB.get(`drives/${second}/`)).json.status, 'creating');
      const res = await cli(['clock', 'advance', '90m', '--db', db.url]);
      assert.equal(res.status, 0, res.stderr);
      await until('B runs the due creation', async () => (await userB.get(`drives/${second}/`)).json.status === 'unmounted');
      assert.ok((await clockOf(b)).offset_ms >= 7_200_000 + 5_400_000);
    } finally {
      a.child.kill('SIGTERM');
      await a.exited;
      assert.equal(await stop(b), 0);
      await db.drop();
    }
  });
});

describe('--seed at start', () => {
  test('the seeded login works once the server answers; a second start with the same seed changes nothing; a bad seed stops start-up (exit 2)', async () => {
    const db = engine === 'sqlite' ? { url: join(dir, 'seed.db'), drop: async () => {} } : await freshDatabase();
    const seed = join(dir, 'seed.json');
    writeFileSync(
      seed,
      JSON.stringify({ users: [{ email: 'seed@example.com', password: 'seed-secret', drives: [{ name: 'd', size: 1 << 30, media: 'disk' }] }] }),
    );
    try {
      for (const round of [0, 1]) {
        const srv = await serveProcess(['--db', db.url, '--ci', '--seed', seed, '--log-format', 'json', '--admin-token', 'off']);
        try {
          const banner = JSON.parse(
            srv
              .stdout()
              .split('\n')
              .find((l) => l.includes('"event":"start"'))!,
          );
          assert.deepEqual(banner.seeded.created, round === 0 ? { users: 1, drives: 1 } : {});
          const c = new Client(srv.base, { email: 'seed@example.com', password: 'seed-secret' });
          assert.equal((await c.get('drives/')).json.meta.total_count, 1);
        } finally {
          assert.equal(await stop(srv), 0);
        }
      }
      writeFileSync(join(dir, 'rich.json'), '{"users": [{"email": "rich@example.com", "balance": "a lot"}]}');
      const bad = stratus(['serve', '--db', db.url, '--port', '0', '--seed', join(dir, 'rich.json')]);
      assert.equal(bad.status, 2, bad.stderr);
      assert.match(bad.stderr, /^stratus: seed: .*rich\.json: users\[0\]\.balance: balance is a non-negative decimal/);
      assert.doesNotMatch(bad.stderr, /\n\s+at /, 'no stack trace');
    } finally {
      await db.drop();
    }
  });
});

describe('logs', () => {
  test('json: the banner is one event with its fields; --access-log gives one info line per request with its id and user', async () => {
    const srv = await serveProcess(['--db', ':memory:', '--ci', '--demo-login', 'log@example.com:log-secret', '--log-format', 'json', '--access-log']);
    try {
      const lines = () =>
        srv
          .stdout()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l));
      const banner = lines().find((l) => l.event === 'start');
      assert.equal(banner.level, 30);
      assert.equal(banner.url, `${srv.base}/api/2.0/`);
      assert.deepEqual(banner.demo_login, { email: 'log@example.com', password: 'log-secret' });
      assert.equal(banner.admin.url, `${srv.base}/_stratus/admin/`);
      assert.match(banner.admin.token, /^[A-Za-z0-9]{32}$/);
      assert.match(banner.msg, /^Stratus listening at /);
      assert.equal(lines().filter((l) => l.event === 'start').length, 1, 'one event');

      const c = new Client(srv.base, { email: 'log@example.com', password: 'log-secret' });
      const ok = await c.get('profile/?format=json');
      const refused = await new Client(srv.base).get('tags/');
      // Other requests log lines too (the test client reads the OpenAPI document): wait for these two.
      const ids = [ok.headers['x-request-id'], refused.headers['x-request-id']];
      const access = await until('both access lines', async () => {
        const got = lines().filter((l) => l.msg === 'request');
        return ids.every((id) => got.some((l) => l.req_id === id)) && got;
      });
      const line = access.find((l) => l.req_id === ok.headers['x-request-id']);
      assert.ok(line, JSON.stringify(access));
      assert.equal(line.level, 30);
      assert.deepEqual([line.method, line.path, line.status, line.user], ['GET', '/api/2.0/profile/', 200, ok.json.uuid]);
      assert.equal(typeof line.duration_ms, 'number');
      const denied = access.find((l) => l.req_id === refused.headers['x-request-id']);
      assert.deepEqual([denied.status, denied.user], [401, null]);
    } finally {
      assert.equal(await stop(srv), 0);
    }
  });

  test('the request logger: at debug, lines of a request carry its id; at info, a request that succeeds logs nothing', async () => {
    const debug = await serveProcess([
      '--db',
      ':memory:',
      '--ci',
      '--demo-login',
      'log@example.com:log-secret',
      '--log-format',
      'json',
      '--log-level',
      'debug',
    ]);
    const info = await serveProcess(['--db', ':memory:', '--ci', '--demo-login', 'log@example.com:log-secret', '--log-format', 'json']);
    try {
      const lines = (srv: typeof debug) =>
        srv
          .stdout()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Record<string, unknown>);
      const ok = await new Client(debug.base, { email: 'log@example.com', password: 'log-secret' }).get('profile/');
      const id = ok.headers['x-request-id'];
      const mine = await until('the request lines', async () => {
        const got = lines(debug).filter((l) => l.reqId === id);
        return got.length >= 2 && got;
      });
      assert.deepEqual(
        mine.map((l) => l.msg),
        ['incoming request', 'request completed'],
      );
      assert.equal(await new Client(info.base, { email: 'log@example.com', password: 'log-secret' }).get('profile/').then((r) => r.status), 200);
      // Everything the process would log about that request is read once it has exited and its pipe closed.
      assert.equal(await stop(info), 0);
      if (!info.child.stdout!.closed) await once(info.child.stdout!, 'close');
      assert.deepEqual(
        lines(info).filter((l) => 'reqId' in l),
        [],
      );
    } finally {
      assert.equal(await stop(debug), 0);
      assert.equal(await stop(info), 0);
    }
  });

  test('pretty: the banner as lines a person reads, other lines as time, level, message and key=value', async () => {
    const srv = await serveProcess(['--db', ':memory:', '--ci', '--demo-login', 'log@example.com:log-secret', '--log-format', 'pretty', '--access-log']);
    try {
      const out = srv.stdout();
      assert.match(
        out,
        /^Stratus listening at http:\/\/127\.0\.0\.1:\d+\/api\/2\.0\/ \(database: sqlite :memory:\)\nDemo login: log@example\.com \/ log-secret\nTry: curl -u /m,
      );
      assert.match(out, /\nAdmin plane: http:\/\/127\.0\.0\.1:\d+\/_stratus\/admin\/ \(loopback only\); token [A-Za-z0-9]{32}\n/);
      const res = await new Client(srv.base, { email: 'log@example.com', password: 'log-secret' }).get('capabilities/');
      await srv.printed(
        new RegExp(
          `\\d\\d:\\d\\d:\\d\\d\\.\\d{3} INFO  request  req_id=${res.headers['x-request-id']} method=GET path=/api/2.0/capabilities/ status=200 duration_ms=`,
        ),
      );
    } finally {
      assert.equal(await stop(srv), 0);
    }
  });

  test('the formatter: an error with its stack, a line that is not JSON as it is, the banner without a demo login', () => {
    const line = prettyLine(
      JSON.stringify({ level: 50, time: Date.UTC(2026, 0, 1, 12, 0, 0, 5), msg: 'boom', req_id: 'r1', err: { message: 'x', stack: 'Error: x\n    at f' } }),
    );
    assert.equal(line, '12:00:00.005 ERROR boom  req_id=r1\n    Error: x\n        at f');
    assert.equal(prettyLine('not json'), 'not json');
    assert.equal(bannerText({ msg: 'Stratus listening at u', demo_login: null, admin: null }), 'Stratus listening at u');
  });
});
