import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type TestServer } from '../helpers/server.js';
import { stratusAsync } from '../helpers/process.js';
import { engine } from '../helpers/db.js';
import { fromDatabaseError } from '../../src/store/errors.js';

/**
 * Two processes writing one SQLite file (a server and an operator command, a process of its own: in one process better-sqlite3's busy wait would block the event loop): a write transaction that has
 * read before the other process committed must still commit (it began IMMEDIATE and the other waited),
 * not fail with SQLITE_BUSY_SNAPSHOT, which busy_timeout does not wait out.
 */
let srv: TestServer | undefined;
let dir: string | undefined;
before(async () => {
  if (engine !== 'sqlite') return;
  dir = mkdtempSync(join(tmpdir(), 'stratus-writers-'));
  srv = await startServer({ db: join(dir, 'stratus.db') });
});
after(async () => {
  await srv?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test(
  'a transaction that read before another process committed still commits; the other process waited',
  { skip: engine !== 'sqlite' && 'SQLite only' },
  async () => {
    const s = srv!;
    const user = await s.user();
    const before = (await user.get('balance/')).json.balance as string;
    const t0 = Date.now();
    let cliDoneAt: number | undefined;
    const result = await s.services.store.transaction(async (tx) => {
      await tx.selectFrom('settings').selectAll().execute();
      // The operator command runs now: with a deferred BEGIN it would commit at once (and this transaction
      // could not write any more); with IMMEDIATE it waits for this one to commit.
      const topup = stratusAsync(['billing', 'topup', user.email, '25', '--db', s.dbUrl]).then((r) => {
        cliDoneAt = Date.now() - t0;
        return r;
      });
      await Promise.race([topup, new Promise((r) => setTimeout(r, 1500))]);
      await tx.insertInto('settings').values({ key: 'writers-test', value: 'x' }).execute();
      return { topup, committingAt: Date.now() - t0 };
    });
    const topup = await result.topup;
    assert.equal(topup.status, 0, `${topup.stderr} (finished at ${cliDoneAt} ms; this transaction committed at ${result.committingAt} ms)`);
    assert.ok(
      cliDoneAt! > result.committingAt,
      `the operator command finished at ${cliDoneAt} ms, after this transaction's commit at ${result.committingAt} ms`,
    );
    assert.notEqual((await user.get('balance/')).json.balance, before);
    const row = await s.services.store.db.selectFrom('settings').select('value').where('key', '=', 'writers-test').executeTakeFirst();
    assert.equal(row?.value, 'x');
  },
);

test('a lost race of any SQLite busy or locked code is a 503 concurrency, not a 500', () => {
  for (const code of ['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_TIMEOUT', 'SQLITE_LOCKED', 'SQLITE_LOCKED_SHAREDCACHE'])
    assert.equal(fromDatabaseError({ code })?.type, 'concurrency', code);
  assert.equal(fromDatabaseError({ code: 'SQLITE_IOERR' }), null);
});
