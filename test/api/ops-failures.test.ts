import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PG_URL } from '../helpers/db.js';
import { cli } from '../helpers/cli.js';
import { stratus } from '../helpers/process.js';
import { onlyOn } from '../helpers/skips.js';

/**
 * Failures a person understands: every bad setting or environment problem is one line on stderr naming the
 * setting and what to do, exit code 2, no stack trace, and nothing created on the way.
 */
let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-fail-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

function assertOneLine(res: { status: number | null; stderr: string }, pattern: RegExp, what: string) {
  assert.equal(res.status, 2, `${what}: ${res.stderr}`);
  assert.match(res.stderr, /^stratus: [^\n]+\n$/, `${what}: one line: ${JSON.stringify(res.stderr)}`);
  assert.match(res.stderr, pattern, what);
  assert.doesNotMatch(res.stderr, /\n\s+at /, `${what}: no stack trace`);
}

describe('one line, exit code 2', () => {
  test('an unknown --db scheme is refused before anything is created', async () => {
    const cwd = process.cwd();
    process.chdir(dir);
    try {
      for (const url of ['mysql://x', 'sqlite://data/x.db', 'POSTGRES://u@h/d']) {
        const res = await cli(['users', 'list', '--db', url]);
        assertOneLine(res, /^stratus: db: "[A-Za-z]+:\/\/" databases are not supported; give a SQLite file path, :memory:, or postgres:\/\/user@host\/db/, url);
      }
      assert.equal(existsSync(join(dir, 'mysql:')), false);
      assert.equal(existsSync(join(dir, 'sqlite:')), false);
    } finally {
      process.chdir(cwd);
    }
  });

  test('PostgreSQL that is not running', async () => {
    const res = await cli(['users', 'list', '--db', 'postgres://nobody@127.0.0.1:1/none']);
    assertOneLine(res, /db: cannot connect to PostgreSQL at 127\.0\.0\.1:1 \(connection refused\): is it running/, 'refused');
    const unknown = await cli(['users', 'list', '--db', 'postgres://nobody@no-such-host.invalid/none']);
    assertOneLine(unknown, /db: the PostgreSQL host "no-such-host\.invalid" is not known/, 'unknown host');
  });

  test('PostgreSQL without the database, or refusing the user', { skip: onlyOn('postgres') }, async () => {
    const missing = new URL(PG_URL);
    missing.pathname = '/stratus_no_such_database';
    const res = await cli(['users', 'list', '--db', missing.toString()]);
    assertOneLine(res, /db: PostgreSQL at [^ ]+ has no database "stratus_no_such_database": create it \(createdb .*\) or fix --db/, 'missing database');
    const role = new URL(PG_URL);
    role.username = 'stratus_no_such_role';
    const refused = await cli(['users', 'list', '--db', role.toString()]);
    assertOneLine(refused, /db: PostgreSQL at [^ ]+ refused user "stratus_no_such_role" \(.*\): check the user and password in --db/, 'refused role');
  });

  test('a SQLite path that cannot be created, and a file that is not a SQLite database', async () => {
    const file = join(dir, 'plain-file');
    writeFileSync(file, 'not a folder');
    const res = await cli(['migrate', '--db', join(file, 'stratus.db')]);
    assertOneLine(
      res,
      /db: cannot create the SQLite file .*plain-file\/stratus\.db \((ENOTDIR|EEXIST): .*\): give --db a path in a writable folder/,
      'not a folder',
    );

    const corrupt = join(dir, 'corrupt.db');
    writeFileSync(corrupt, 'this is not a database\n'.repeat(400));
    const bad = await cli(['users', 'list', '--db', corrupt]);
    assertOneLine(
      bad,
      /db: .*corrupt\.db is not a SQLite database, or is damaged \(file is not a database\): restore it from a backup or give --db another file/,
      'corrupt',
    );
  });

  test('serve on a port in use (a real process)', async () => {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const res = stratus(['serve', '--db', ':memory:', '--port', String(port)]);
      assertOneLine(
        res,
        new RegExp(`^stratus: port: 127\\.0\\.0\\.1:${port} is already in use \\(another Stratus\\?\\): stop it or choose another --port`),
        'port',
      );
      const host = stratus(['serve', '--db', ':memory:', '--port', '0', '--host', '192.0.2.1']);
      assertOneLine(host, /^stratus: host: 192\.0\.2\.1 is not an address of this machine/, 'host');
    } finally {
      taken.close();
    }
  });
});
