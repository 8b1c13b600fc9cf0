import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import { onlyOn } from '../helpers/skips.js';
import { until } from '../helpers/until.js';
import { Store } from '../../src/store/db.js';

/**
 * PostgreSQL (migrations 0120, 0131): a serving process announces its writes after their commit, from a row
 * its transaction kept; a process killed in between leaves the row, and the next to start sends it.
 */
let srv: TestServer;
before(async () => {
  srv = await startServer();
});
after(() => srv.close());

test('announcements a killed process left are sent by the next process to start', { skip: onlyOn('postgres') /* no NOTIFY on SQLite */ }, async () => {
  const heard = srv.services.store;
  const killed = await Store.open(srv.dbUrl);
  await killed.enableAnswerReuse();
  const pending = () => heard.db.selectFrom('announce_pending').select(['payloads', 'changes']).execute();
  try {
    // An ordinary write: its row is deleted by the NOTIFY that sends it.
    await killed.transaction((tx) => tx.insertInto('settings').values({ key: 'pending-1', value: '1' }).execute());
    assert.deepEqual(await pending(), []);
    // The process dies right after a commit: its announcement never leaves.
    killed.answerBarrier!.announce = () => new Promise<boolean>(() => undefined);
    const before = await heard.settleAnswers();
    void killed.transaction((tx) => tx.insertInto('settings').values({ key: 'pending-2', value: '2' }).execute());
    await until('the write committed', async () => (await heard.settings.get(heard.db, 'pending-2')) === '2');
    assert.deepEqual(await pending(), [{ payloads: '\n', changes: null }], 'kept by its transaction');
    assert.equal(await heard.settleAnswers(), before, 'not announced');
    // A process starting later (a supervisor's restart) sends it: older than a second, so not in flight.
    await heard.db
      .updateTable('announce_pending')
      .set((eb) => ({ created_ms: eb('created_ms', '-', 5000) }))
      .execute();
    const started = await Store.open(srv.dbUrl);
    try {
      await started.enableAnswerReuse();
      assert.deepEqual(await pending(), []);
      assert.notEqual(await heard.settleAnswers(), before, 'announced by the process that started');
    } finally {
      await started.close();
    }
  } finally {
    await killed.close().catch(() => undefined);
  }
});
