import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type TestServer } from '../helpers/server.js';
import { stratusChild } from '../helpers/process.js';
import { engine } from '../helpers/db.js';
import { fromDatabaseError } from '../../src/store/errors.js';
import { onlyOn } from '../helpers/skips.js';
import SQLite from 'better-sqlite3';

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

/**
 * Whether the process is sleeping in SQLite's busy handler: its main thread (better-sqlite3 is synchronous)
 * in nanosleep/clock_nanosleep rather than its event loop's epoll wait (Linux: /proc/PID/syscall).
 */
const SLEEP_CALLS: Record<string, number[]> = { x64: [35, 230], arm64: [101, 115] };
function inBusyWait(pid: number): boolean {
  const call = Number(readFileSync(`/proc/${pid}/syscall`, 'utf8').split(' ')[0]);
  return (SLEEP_CALLS[process.arch] ?? []).includes(call);
}

test('a transaction that read before another process committed still commits; the other process waited', { skip: onlyOn('sqlite') }, async () => {
  const s = srv!;
  const user = await s.user();
  const before = (await user.get('balance/')).json.balance as string;
  let cliDone = false;
  let waited = false;
  const committed = await s.services.store.transaction(async (tx) => {
    await tx.selectFrom('settings').selectAll().execute();
    // The operator command runs now: with a deferred BEGIN it would commit at once (and this transaction
    // could not write any more); with IMMEDIATE it waits for this one to commit. This transaction stays
    // open until the command is seen waiting (however slowly its process starts), so the race happens.
    const cli = stratusChild(['billing', 'topup', user.email, '25', '--db', s.dbUrl]);
    const topup = cli.done.then((r) => {
      cliDone = true;
      return r;
    });
    for (const deadline = Date.now() + 60_000; !waited && !cliDone && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 5));
      waited = cli.child.exitCode === null && inBusyWait(cli.child.pid!);
    }
    await tx.insertInto('settings').values({ key: 'writers-test', value: 'x' }).execute();
    return { topup, cliDoneBeforeCommit: cliDone };
  });
  const topup = await committed.topup;
  assert.equal(topup.status, 0, topup.stderr);
  assert.ok(waited, 'the operator command was seen waiting for the lock while this transaction was open');
  assert.equal(committed.cliDoneBeforeCommit, false, 'the operator command finished only after this transaction committed');
  assert.notEqual((await user.get('balance/')).json.balance, before);
  const row = await s.services.store.db.selectFrom('settings').select('value').where('key', '=', 'writers-test').executeTakeFirst();
  assert.equal(row?.value, 'x');
});

test('a lost race of any SQLite busy or locked code is a 503 concurrency, not a 500', () => {
  for (const code of ['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_TIMEOUT', 'SQLITE_LOCKED', 'SQLITE_LOCKED_SHAREDCACHE'])
    assert.equal(fromDatabaseError({ code })?.type, 'concurrency', code);
  assert.equal(fromDatabaseError({ code: 'SQLITE_IOERR' }), null);
});

test('a serving process waiting for another process write lock waits on the event loop', { skip: onlyOn('sqlite') }, async () => {
  const s = srv!;
  s.services.store.waitForWritesOnEventLoop();
  // Another connection to the file (in this process: were the wait SQLite's busy handler, it would stall
  // this very event loop, and this connection's commit below could never run: SQLITE_BUSY after 5 s).
  const other = new SQLite(s.dbUrl);
  try {
    other.exec('begin immediate');
    let written = false;
    const write = s.services.store
      .transaction((tx) => tx.insertInto('settings').values({ key: 'writers-yield', value: 'y' }).execute())
      .then(() => (written = true));
    // The event loop turns while the write waits for the lock (timers, sockets, answers kept in memory).
    const t0 = Date.now();
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(Date.now() - t0 < 2000, `a 50 ms timer took ${Date.now() - t0} ms`);
    assert.equal(written, false, 'the write waits for the other connection');
    other.exec('commit');
    await write;
  } finally {
    if (other.inTransaction) other.exec('rollback');
    other.close();
  }
  const row = await s.services.store.db.selectFrom('settings').select('value').where('key', '=', 'writers-yield').executeTakeFirst();
  assert.equal(row?.value, 'y');
});
