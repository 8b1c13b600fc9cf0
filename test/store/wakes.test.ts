import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import { onlyOn } from '../helpers/skips.js';
import { until } from '../helpers/until.js';
import { Store } from '../../src/store/db.js';
import { insertTimer } from '../../src/store/timers.js';
import { WAKE_CLOCK, WAKE_NOTIFY, WAKE_TIMERS } from '../../src/store/wakes.js';
import { clockSyncer } from '../../src/admin/clock.js';
import type { AdjustableClock } from '../../src/core/clock.js';

const timer = (subject: string) => ({
  kind: 'test.never',
  subject,
  due_ms: Date.now() + 86_400_000,
  payload: '{}',
  state: 'pending' as const,
  attempts: 0,
  last_error: null,
  created_at: new Date().toISOString(),
  unique_key: null,
});

describe('wake-ups of background loops (store/wakes.ts, migration 0130)', { skip: onlyOn('postgres') /* SQLite's loops poll */ }, () => {
  let srv: TestServer;
  let other: Store;
  before(async () => {
    srv = await startServer();
    // Another process's store (an operator command): its writes NOTIFY in their own transaction.
    other = await Store.open(srv.dbUrl);
  });
  after(async () => {
    await other.close();
    await srv.close();
  });

  test('added timers and a moved clock wake the loops, whoever wrote them; they move no answer token', async () => {
    const store = srv.services.store;
    const heard: string[] = [];
    const stop = store.wakes!.on([WAKE_TIMERS, WAKE_NOTIFY, WAKE_CLOCK], (p) => heard.push(p));
    try {
      assert.equal(store.wakes!.listening, true);
      const token = await store.settleAnswers();
      await other.db.insertInto('timers').values(timer('a')).execute();
      await until('the other process’s timer heard', () => heard.includes(WAKE_TIMERS));
      assert.equal(await store.settleAnswers(), token, 'a timer changes no answer');
      // This process's own transaction announces after its commit (migration 0120).
      heard.length = 0;
      await store.transaction((tx) => insertTimer(tx, timer('b')));
      await until('this process’s timer heard', () => heard.includes(WAKE_TIMERS));
      // A retry moves a timer's due time: the loop that sleeps until the old one must hear of it.
      heard.length = 0;
      await other.db.updateTable('timers').set({ attempts: 1 }).where('subject', '=', 'a').execute();
      await until('the retried timer heard', () => heard.includes(WAKE_TIMERS));
      // Another setting wakes nothing; the clock's row does.
      heard.length = 0;
      await other.db.insertInto('settings').values({ key: 'wake-test', value: '1' }).execute();
      await other.db.insertInto('settings').values({ key: 'clock_offset_ms', value: '0' }).execute();
      await until('the clock move heard', () => heard.includes(WAKE_CLOCK));
      assert.deepEqual(heard, [WAKE_CLOCK]);
    } finally {
      stop();
    }
  });

  test('a scheduler pass reads the shared clock only after it moved', async () => {
    const store = srv.services.store;
    const clock = srv.services.clock as AdjustableClock;
    const sync = clockSyncer(srv.services);
    await sync();
    const read = store.statements;
    await sync();
    await sync();
    assert.equal(store.statements, read, 'nothing read while the clock did not move');
    let moved = false;
    const stop = store.wakes!.on([WAKE_CLOCK], () => (moved = true));
    try {
      await other.db
        .insertInto('settings')
        .values({ key: 'clock_offset_ms', value: '123456' })
        .onConflict((oc) => oc.column('key').doUpdateSet({ value: '123456' }))
        .execute();
      await until('the clock move heard', () => moved);
      await sync();
      assert.equal(clock.offset, 123456);
    } finally {
      stop();
    }
  });
});
