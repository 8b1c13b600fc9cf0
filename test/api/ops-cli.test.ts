import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cli } from '../helpers/cli.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { serveProcess } from '../helpers/process.js';
import { startServer, type TestServer } from '../helpers/server.js';

/**
 * Operator command lines whose success paths nothing else runs: `--admin-access any`, `stratus billing
 * show`, `stratus faults boot|clone` and `stratus users add --state`. Each runs on the database a server of
 * the engine under test uses, and the test looks at what the command changed through that server.
 */
const TOKEN = 'ops-cli-admin-token-0123456789';
let dir: string;
let url: string;
let srv: TestServer;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-ops-cli-'));
  url = engine === 'sqlite' ? join(dir, 'stratus.db') : (await freshDatabase()).url;
  srv = await startServer({ db: url, 'admin-token': TOKEN, 'admin-access': 'any' });
});
after(async () => {
  await srv.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('--admin-access any', () => {
  test('the admin plane answers a client that is not on loopback (with the token); the banner says so', async () => {
    // The test server listens on 127.0.0.1 only; a request from elsewhere is made through inject.
    const from = (token: string) =>
      srv.app.inject({ method: 'GET', url: '/_stratus/admin/clock', headers: { authorization: `Bearer ${token}` }, remoteAddress: '192.0.2.7' });
    const open = await from(TOKEN);
    assert.equal(open.statusCode, 200, open.body);
    assert.ok(JSON.parse(open.body).now, open.body);
    assert.equal((await from('wrong-token-wrong-token')).statusCode, 401, 'still only with the token');

    const proc = await serveProcess(['--db', url, '--admin-token', TOKEN, '--admin-access', 'any']);
    try {
      assert.match(proc.stdout(), new RegExp(`Admin plane: ${proc.base}/_stratus/admin/ \\(any client\\); token from --admin-token`));
    } finally {
      proc.child.kill('SIGTERM');
      await proc.exited;
    }
  });
});

describe('stratus billing show', () => {
  test("prints the account's balance and currency, and follows a top-up", async () => {
    const u = await srv.user();
    const balance = (await u.get('balance/')).json;
    const show = async () => {
      const res = await cli(['billing', 'show', u.email, '--db', url]);
      assert.equal(res.status, 0, res.stderr);
      return res.stdout;
    };
    assert.equal(await show(), `${u.email}: balance ${Number(balance.balance).toFixed(20)} ${balance.currency}\n`);
    const topup = await cli(['billing', 'topup', u.email, '25.5', '--db', url]);
    assert.equal(topup.status, 0, topup.stderr);
    assert.equal(await show(), `${u.email}: balance ${(Number(balance.balance) + 25.5).toFixed(20)} ${balance.currency}\n`);
    const missing = await cli(['billing', 'show', `nobody-${u.email}`, '--db', url]);
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /No user with e-mail/);
  });
});

describe('stratus faults', () => {
  test('boot SERVER: the next boot of that server fails, the one after succeeds', async () => {
    const u = await srv.user();
    const sid = (await u.post('servers/', { name: 's', cpu: 1000, mem: 536870912, vnc_password: 'pw' })).json.objects[0].uuid;
    const res = await cli(['faults', 'boot', sid, '--db', url]);
    assert.equal(res.status, 0, res.stderr);
    assert.equal(res.stdout, `the next boot of server ${sid} fails\n`);
    await srv.advance(1); // the server's scheduler takes the fault in
    const boot = async () => {
      assert.equal((await u.post(`servers/${sid}/action/?do=start`)).status, 202);
      await srv.advance(60_000);
      return (await u.get(`servers/${sid}/`)).json.status;
    };
    assert.equal(await boot(), 'stopped', 'the boot failed');
    assert.equal(await boot(), 'running', 'only the next boot');
    const missing = await cli(['faults', 'boot', '00000000-0000-0000-0000-000000000000', '--db', url]);
    assert.equal(missing.status, 2);
  });

  for (const which of ['DRIVE', 'any drive'] as const)
    test(`clone ${which === 'DRIVE' ? 'DRIVE' : '(no drive)'}: the next clone fails (unavailable), the one after succeeds`, async () => {
      const u = await srv.user();
      const src = (await u.post('drives/', { name: 'src', size: 1 << 30, media: 'disk' })).json.objects[0].uuid;
      await srv.advance(60_000);
      const res = await cli(['faults', 'clone', ...(which === 'DRIVE' ? [src] : []), '--db', url]);
      assert.equal(res.status, 0, res.stderr);
      assert.equal(res.stdout, `the next clone of ${which === 'DRIVE' ? `drive ${src}` : 'any drive'} fails\n`);
      const clone = async () => {
        const made = await u.post(`drives/${src}/action/?do=clone`, { name: 'c' });
        assert.equal(made.status, 202, made.text);
        await srv.advance(60_000);
        return (await u.get(`drives/${made.json.objects[0].uuid}/`)).json.status;
      };
      assert.equal(await clone(), 'unavailable', 'the clone failed');
      assert.equal(await clone(), 'unmounted', 'only the next clone');
    });
});

describe('stratus users add --state', () => {
  test('the account starts in the given state; a state that does not exist creates nothing', async () => {
    const email = `state-${process.pid}-${Date.now()}@example.com`;
    const add = await cli(['users', 'add', email, '--password', 'state-secret-1', '--state', 'GUEST', '--db', url]);
    assert.equal(add.status, 0, add.stderr);
    // The state's name in any case, as the admin API takes it.
    const lower = await cli(['users', 'add', `lower-${email}`, '--password', 'state-secret-1', '--state', 'trial', '--db', url]);
    assert.equal(lower.status, 0, lower.stderr);
    const list = await cli(['users', 'list', '--db', url]);
    assert.match(list.stdout, new RegExp(`[0-9a-f-]{36}\\s+GUEST\\s+${email.replace(/\./g, '\\.')}\\n`));
    assert.match(list.stdout, new RegExp(`[0-9a-f-]{36}\\s+TRIAL\\s+lower-${email.replace(/\./g, '\\.')}\\n`));
    const bad = await cli(['users', 'add', `bad-${email}`, '--password', 'state-secret-1', '--state', 'ADMIN', '--db', url]);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /State must be one of REGULAR, TRIAL, GUEST, NEW_USER/);
    assert.doesNotMatch((await cli(['users', 'list', '--db', url])).stdout, new RegExp(`bad-${email.replace(/\./g, '\\.')}`));
  });
});
