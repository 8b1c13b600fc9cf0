import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../src/config.js';
import { DEFAULT_LOGIN_PROTECTION } from '../../src/core/login-rules.js';
import { Client } from '../helpers/client.js';
import { basic } from '../helpers/auth.js';
import { cli } from '../helpers/cli.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { startServer, type TestServer } from '../helpers/server.js';

/** `--login-protection` and `stratus users unlock`: a pipeline's own wrong passwords never lock it out for good. */
let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-login-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

// Every test uses its own client addresses (127.0.0.x is all loopback), so their counters never meet.
let nextHost = 50;
const address = () => `127.0.0.${nextHost++}`;

const basicFrom = (srv: TestServer, from: string, email: string, password: string) =>
  new Client(srv.base).request('GET', '/api/2.0/profile/', { headers: { authorization: basic(email, password) }, localAddress: from });

async function fail(srv: TestServer, from: string, email: string, count: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push((await basicFrom(srv, from, email, `wrong-${i}`)).status);
  return out;
}

describe('--login-protection', () => {
  test('off, default, or rules over the defaults; --ci turns it off unless set', () => {
    assert.deepEqual(loadConfig({}, {}).loginProtection, DEFAULT_LOGIN_PROTECTION);
    assert.equal(loadConfig({ 'login-protection': 'off' }, {}).loginProtection, null);
    assert.equal(loadConfig({ ci: true }, {}).loginProtection, null);
    assert.deepEqual(loadConfig({ ci: true, 'login-protection': 'default' }, {}).loginProtection, DEFAULT_LOGIN_PROTECTION);
    assert.deepEqual(loadConfig({}, { STRATUS_LOGIN_PROTECTION: 'pair=10, address=off,window=90s,lock=1h' }).loginProtection, {
      pair: 10,
      address: null,
      account: 50,
      windowMs: 90_000,
      lockMs: 3_600_000,
    });
    for (const bad of ['on', 'pair=0', 'pair=x', 'pair=5,pair=6', 'window=10', 'lock=0s', 'lock=200h', 'tries=3', 'pair=5,'])
      assert.throws(
        () => loadConfig({ 'login-protection': bad }, {}),
        (e: unknown) => e instanceof ConfigError && /^login-protection: /.test((e as Error).message),
        bad,
      );
  });

  test('rules: a counter off never locks, a shorter lock ends sooner', async () => {
    const srv = await startServer({ 'login-protection': 'pair=2,address=off,account=off,lock=1m' });
    try {
      const u = await srv.user();
      const from = address();
      assert.deepEqual(await fail(srv, from, u.email, 2), [401, 429]);
      assert.equal((await basicFrom(srv, from, u.email, u.password)).status, 429);
      await srv.advance(60_000);
      assert.equal((await basicFrom(srv, from, u.email, u.password)).status, 200);
      // address=off: many accounts from one address, each under its pair limit, never lock the address.
      const spray = address();
      for (let i = 0; i < 25; i++) assert.equal((await basicFrom(srv, spray, `nobody${i}@example.com`, 'x')).status, 401);
      assert.equal((await basicFrom(srv, spray, u.email, u.password)).status, 200);
    } finally {
      await srv.close();
    }
  });

  test('off: any number of wrong passwords is a plain 401, and the right one still works', async () => {
    const srv = await startServer({ 'login-protection': 'off' });
    try {
      const u = await srv.user();
      const from = address();
      assert.deepEqual([...new Set(await fail(srv, from, u.email, 30))], [401]);
      assert.equal((await basicFrom(srv, from, u.email, u.password)).status, 200);
      const rows = await srv.services.store.db.selectFrom('login_failures').select('key').execute();
      assert.equal(rows.length, 0, 'nothing is counted');
    } finally {
      await srv.close();
    }
  });
});

describe('stratus users unlock', () => {
  let srv: TestServer;
  let url: string;
  before(async () => {
    url = engine === 'sqlite' ? join(dir, 'unlock.db') : (await freshDatabase()).url;
    srv = await startServer({ db: url, 'login-protection': 'default' });
  });
  after(() => srv.close());

  test('EMAIL clears the account from every address; --address IP the address for every account; --all everything', async () => {
    const u = await srv.user();
    const a = address();
    const b = address();
    // Both addresses locked out of the account (pair locks).
    assert.equal((await fail(srv, a, u.email, 5)).at(-1), 429);
    assert.equal((await fail(srv, b, u.email, 5)).at(-1), 429);
    const res = await cli(['users', 'unlock', u.email, '--db', url]);
    assert.equal(res.status, 0, res.stderr);
    assert.match(
      res.stdout,
      new RegExp(
        `^unlocked ${u.email.replace(/\./g, '\\.')}: 3 failed-login counter\\(s\\) cleared \\(login protection: pair=5,address=20,account=50,window=15m,lock=15m\\)\\n$`,
      ),
    );
    assert.equal((await basicFrom(srv, a, u.email, u.password)).status, 200);
    assert.equal((await basicFrom(srv, b, u.email, u.password)).status, 200);

    // 20 failures over many accounts lock the address out of every account, this one included.
    const sprayer = address();
    for (let i = 0; i < 20; i++) await basicFrom(srv, sprayer, `guess${i}@example.com`, 'x');
    assert.equal((await basicFrom(srv, sprayer, u.email, u.password)).status, 429);
    const byAddress = await cli(['users', 'unlock', '--address', sprayer, '--db', url]);
    assert.equal(byAddress.status, 0, byAddress.stderr);
    assert.match(byAddress.stdout, /21 failed-login counter/); // the address's own and its 20 pairs
    assert.equal((await basicFrom(srv, sprayer, u.email, u.password)).status, 200);

    await fail(srv, address(), u.email, 5);
    const all = await cli(['users', 'unlock', '--all', '--db', url]);
    assert.equal(all.status, 0, all.stderr);
    assert.match(all.stdout, /^unlocked every account and address: [1-9]\d* failed-login/);
    assert.equal((await srv.services.store.db.selectFrom('login_failures').select('key').execute()).length, 0);
  });

  test('mistakes are refused with exit code 2', async () => {
    for (const [args, pattern] of [
      [['users', 'unlock'], /give EMAIL, --address IP, or --all/],
      [['users', 'unlock', '--address', 'not-an-ip'], /--address must be an IPv4 or IPv6 address/],
      [['users', 'unlock', 'a@example.com', '--all'], /--all alone/],
      [['users', 'unlock', 'nobody@example.com'], /No user with e-mail nobody@example\.com/],
    ] as const) {
      const res = await cli([...args, '--db', url]);
      assert.equal(res.status, 2, `${args.join(' ')}: ${res.stderr}`);
      assert.match(res.stderr, pattern);
    }
  });
});
