import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../src/config.js';
import { DEFAULT_RULES } from '../../src/core/rate-rules.js';
import { DEFAULT_DELAYS } from '../../src/sim/delays.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { Client } from '../helpers/client.js';
import { serveProcess, stratus } from '../helpers/process.js';

/**
 * The first five minutes of a pipeline: known credentials (`--demo-login`), a ready file to wait on
 * (`--ready-file`), and the `--ci` preset.
 */
let dir: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-ops-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Polls for a file as a pipeline would (the server writes it whole, by rename). */
async function waitForFile(path: string, ms = 60_000): Promise<any> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (existsSync(path)) return JSON.parse(readFileSync(path, 'utf8'));
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${path} did not appear`);
}

describe('the --ci preset', () => {
  test('turns rate limits off and simulated durations to 0; each part is still settable on its own', () => {
    const plain = loadConfig({}, {});
    assert.deepEqual(plain.rateLimits, DEFAULT_RULES);
    assert.deepEqual(plain.delays, DEFAULT_DELAYS);
    assert.equal(plain.ci, false);

    for (const c of [loadConfig({ ci: true }, {}), loadConfig({}, { STRATUS_CI: '1' }), loadConfig({}, { STRATUS_CI: 'true' })]) {
      assert.equal(c.ci, true);
      assert.equal(c.rateLimits, null);
      for (const [name, ms] of Object.entries(c.delays))
        assert.equal(ms, name === 'drive.write_rate' || name === 'nic.tx_rate' ? DEFAULT_DELAYS[name] : 0, name);
    }
    const mixed = loadConfig({ ci: true, 'rate-limits': 'default', delays: 'server.boot=500' }, {});
    assert.deepEqual(mixed.rateLimits, DEFAULT_RULES);
    assert.equal(mixed.delays['server.boot'], 500);
    assert.equal(mixed.delays['drive.create'], 0);
    // Without the preset, --delays stays on top of the defaults.
    assert.equal(loadConfig({ delays: 'server.boot=500' }, {}).delays['drive.create'], DEFAULT_DELAYS['drive.create']);
    // The flag wins over the environment.
    assert.equal(loadConfig({ ci: false }, { STRATUS_CI: '1' }).rateLimits, DEFAULT_RULES);
    assert.throws(
      () => loadConfig({}, { STRATUS_CI: 'maybe' }),
      (e: unknown) => e instanceof ConfigError && /^ci must be 1 or 0/.test((e as Error).message),
    );
  });
});

describe('--demo-login', () => {
  test('EMAIL:PASSWORD, split at the first colon; anything else names the setting', () => {
    assert.deepEqual(loadConfig({ 'demo-login': 'CI@Example.com:pa:ss word' }, {}).demoLogin, { email: 'ci@example.com', password: 'pa:ss word' });
    assert.deepEqual(loadConfig({}, { STRATUS_DEMO_LOGIN: 'a@b.c:x' }).demoLogin, { email: 'a@b.c', password: 'x' });
    assert.equal(loadConfig({}, {}).demoLogin, null);
    for (const bad of ['nobody', 'ci@example.com', 'ci@example.com:', ':pw', 'not an email:pw', 'a@b.c:line\nbreak'])
      assert.throws(
        () => loadConfig({ 'demo-login': bad }, {}),
        (e: unknown) => e instanceof ConfigError && /^demo-login/.test((e as Error).message),
        bad,
      );
  });
});

describe('a pipeline starts stratus and waits on its ready file', () => {
  test('known credentials work at once, 130 quick GETs all answer 200 under --ci, and the file goes at SIGTERM', async () => {
    const db = engine === 'sqlite' ? { url: ':memory:', drop: async () => {} } : await freshDatabase();
    const ready = join(dir, 'ready.json');
    writeFileSync(ready, '{"stale": true}'); // an earlier run's file must not count
    const srv = await serveProcess(['--db', db.url, '--ci', '--demo-login', 'ci@example.com:ci:secret', '--ready-file', ready]);
    try {
      const info = await waitForFile(ready);
      assert.deepEqual(Object.keys(info).sort(), ['admin_token', 'email', 'password', 'pid', 'url']);
      assert.equal(info.pid, srv.child.pid);
      assert.equal(info.url, `${srv.base}/api/2.0/`);
      assert.equal(info.email, 'ci@example.com');
      assert.equal(info.password, 'ci:secret');
      assert.match(info.admin_token, /^[A-Za-z0-9]{32}$/, 'a generated admin token');
      assert.match(srv.stdout(), new RegExp(`Admin plane: ${srv.base}/_stratus/admin/ \\(loopback only\\); token ${info.admin_token}`));
      const clock = await fetch(`${srv.base}/_stratus/admin/clock`, { headers: { authorization: `Bearer ${info.admin_token}` } });
      assert.equal(clock.status, 200);
      assert.equal(statSync(ready).mode & 0o777, 0o600, 'it holds a password: owner only');
      assert.match(srv.stdout(), /Demo login: ci@example\.com \/ ci:secret/);
      const c = new Client(srv.base, { email: info.email, password: info.password });
      const statuses = await Promise.all(Array.from({ length: 130 }, () => c.get('capabilities/').then((r) => r.status)));
      assert.deepEqual([...new Set(statuses)], [200]);
    } finally {
      srv.child.kill('SIGTERM');
      assert.equal(await srv.exited, 0);
    }
    assert.equal(existsSync(ready), false, 'a stopped server leaves no ready file');
    await db.drop();
  });

  test("the generated demo account (npm start) is not rate-limited for a person's 110 quick GETs; other accounts keep the spec's limits", async () => {
    const db = engine === 'sqlite' ? { url: ':memory:', drop: async () => {} } : await freshDatabase();
    const srv = await serveProcess(['--db', db.url, '--admin-token', 'demo-limits-token-0123']);
    try {
      const [, email, password] = /Demo login: (\S+) \/ (\S+)/.exec(srv.stdout())!;
      const demo = new Client(srv.base, { email, password });
      const statuses = await Promise.all(Array.from({ length: 110 }, () => demo.get('capabilities/').then((r) => r.status)));
      assert.deepEqual([...new Set(statuses)], [200]);
      const admin = { authorization: 'Bearer demo-limits-token-0123', 'content-type': 'application/json' };
      const made = await fetch(`${srv.base}/_stratus/admin/users`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({ email: 'other@example.com', password: 'other-secret' }),
      });
      assert.equal(made.status, 201, await made.clone().text());
      const other = new Client(srv.base, { email: 'other@example.com', password: 'other-secret' });
      assert.equal((await other.get('capabilities/')).headers['x-ratelimit-limit'], '100', 'the spec limit for everyone else');
    } finally {
      srv.child.kill('SIGTERM');
      await srv.exited;
    }
    await db.drop();
  });

  test('a configured login is made true on a database that has users: created, or its password reset', async () => {
    const db = engine === 'sqlite' ? { url: join(dir, 'users.db'), drop: async () => {} } : await freshDatabase();
    try {
      const first = await serveProcess(['--db', db.url, '--demo-login', 'first@example.com:one']);
      const generated = /Demo login: (\S+) \/ (\S+)/.exec(first.stdout());
      assert.ok(generated);
      first.child.kill('SIGTERM');
      await first.exited;
      // A later start with another password for the same account: the new one works, the old one no longer.
      const env = { STRATUS_DEMO_LOGIN: 'first@example.com:two' };
      const second = await serveProcess(['--db', db.url], env);
      try {
        assert.equal((await new Client(second.base, { email: 'first@example.com', password: 'two' }).get('profile/')).status, 200);
        assert.equal((await new Client(second.base, { email: 'first@example.com', password: 'one' }).get('profile/')).status, 401);
      } finally {
        second.child.kill('SIGTERM');
        await second.exited;
      }
    } finally {
      await db.drop();
    }
  });

  test('a ready file that cannot be written stops start-up: one line naming the setting, exit code 2', () => {
    const res = stratus(['serve', '--db', ':memory:', '--port', '0', '--ready-file', join(dir, 'missing', 'ready.json')]);
    assert.equal(res.status, 2, res.stderr);
    assert.match(res.stderr, /^stratus: ready-file: cannot write .*missing\/ready\.json \(ENOENT\); give a path in a writable folder\n$/);
  });
});
