import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../src/config.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { cli } from '../helpers/cli.js';

/**
 * The operator's `stratus users …` commands on a real database (run in-process through src/cli, as
 * bin/stratus.js runs them), and the accounts settings.
 */
let dir: string;
let db: { url: string; drop: () => Promise<void> };

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-users-'));
  db = engine === 'sqlite' ? { url: join(dir, 'stratus.db'), drop: async () => {} } : await freshDatabase();
});
after(async () => {
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

describe('stratus users', () => {
  test('add, set-state, set-password, list: an operator runs accounts without SQL', async () => {
    assert.equal((await cli(['migrate', '--db', db.url])).status, 0);
    const add = await cli(['users', 'add', 'ci@example.com', '--password', 'ci-secret-1', '--db', db.url]);
    assert.equal(add.status, 0, add.stderr);

    for (const state of ['guest', 'REGULAR']) {
      const res = await cli(['users', 'set-state', 'ci@example.com', state, '--db', db.url]);
      assert.equal(res.status, 0, res.stderr);
      assert.match(res.stdout, new RegExp(`state of ci@example\\.com set to ${state.toUpperCase()}`));
    }
    const bad = await cli(['users', 'set-state', 'ci@example.com', 'ADMIN', '--db', db.url]);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /state must be one of REGULAR, TRIAL, GUEST, NEW_USER/);
    const missing = await cli(['users', 'set-state', 'nobody@example.com', 'TRIAL', '--db', db.url]);
    assert.equal(missing.status, 2);
    assert.match(missing.stderr, /No user/);
    const noState = await cli(['users', 'set-state', 'ci@example.com', '--db', db.url]);
    assert.equal(noState.status, 2);

    const pw = await cli(['users', 'set-password', 'ci@example.com', '--db', db.url]);
    assert.equal(pw.status, 0, pw.stderr);
    assert.match(pw.stdout, /password set for ci@example\.com: \S+/);

    const list = await cli(['users', 'list', '--db', db.url]);
    assert.equal(list.status, 0, list.stderr);
    assert.match(list.stdout, /[0-9a-f-]{36}\s+REGULAR\s+ci@example\.com\n/);
  });
});

describe('accounts settings', () => {
  test('defaults', () => {
    const c = loadConfig({}, {});
    assert.equal(c.smtpUrl, null);
    assert.equal(c.outbox, './data/outbox');
    assert.equal(c.publicUrl, null);
    assert.deepEqual(c.promoCodes, []);
    assert.equal(c.digestNonceTtl, 300);
  });

  test('flags and environment', () => {
    const c = loadConfig(
      { 'smtp-url': 'smtps://u:p@mail.example.com:465', 'public-url': 'https://cloud.example.com/' },
      { STRATUS_PROMO_CODES: ' A1, B2 ,', STRATUS_DIGEST_NONCE_TTL: '60', STRATUS_OUTBOX: '/tmp/out' },
    );
    assert.equal(c.smtpUrl, 'smtps://u:p@mail.example.com:465');
    assert.equal(c.publicUrl, 'https://cloud.example.com');
    assert.deepEqual(c.promoCodes, ['A1', 'B2']);
    assert.equal(c.digestNonceTtl, 60);
    assert.equal(c.outbox, '/tmp/out');
  });

  test('invalid values name the setting', () => {
    for (const [flags, pattern] of [
      [{ 'smtp-url': 'http://mail.example.com' }, /smtp-url/],
      [{ 'smtp-url': 'not a url' }, /smtp-url/],
      [{ 'public-url': 'ftp://x' }, /public-url/],
      [{ 'public-url': 'https://x/?a=1' }, /public-url/],
      [{ 'promo-codes': 'ok,has space' }, /promo-codes/],
      [{ 'digest-nonce-ttl': '0' }, /digest-nonce-ttl/],
      [{ 'digest-nonce-ttl': 'soon' }, /digest-nonce-ttl/],
      [{ 'mail-from': 'nobody' }, /mail-from/],
      [{ outbox: ' ' }, /outbox/],
    ] as const) {
      assert.throws(
        () => loadConfig(flags, {}),
        (e: unknown) => e instanceof ConfigError && pattern.test((e as Error).message),
        JSON.stringify(flags),
      );
    }
  });

  test('a bad setting stops the server with exit code 2', async () => {
    const res = await cli(['serve', '--smtp-url', 'http://nope', '--db', ':memory:']);
    assert.equal(res.status, 2);
    assert.match(res.stderr, /smtp-url/);
  });
});
