import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { Store } from '../../src/store/db.js';
import { freshDatabase } from '../helpers/db.js';
import { onlyOn } from '../helpers/skips.js';

/**
 * PostgreSQL's `sharing` counter (migrations 0100, 0161): a write raising it never waits for the counter row
 * another transaction holds (two backends whose pids collide mod 64 deadlocked, each holding the row the
 * other waited for). Here another transaction holds the very row of the writer's backend: the write goes
 * on at once (a lock wait would end it: lock_timeout), and the sum of the rows still counts it.
 */
test('raising the sharing counter never waits for a row another transaction holds', { skip: onlyOn('postgres') }, async () => {
  const db = await freshDatabase();
  const store = await Store.open(db.url, { poolSize: 1 });
  await store.close();
  const holder = new pg.Client({ connectionString: db.url });
  const writer = new pg.Client({ connectionString: db.url });
  await holder.connect();
  await writer.connect();
  try {
    const sum = async () => Number((await holder.query(`select coalesce(sum(n), 0)::bigint as n from change_counters where scope like 'sharing:%'`)).rows[0].n);
    const before = await sum();
    const pid = Number((await writer.query('select pg_backend_pid() as p')).rows[0].p);
    await holder.query('begin');
    // Held (made first if it is not there): the row the writer's backend raises.
    await holder.query(`insert into change_counters (scope, n) values ($1, 0) on conflict (scope) do update set n = change_counters.n`, [
      `sharing:${pid % 64}`,
    ]);
    await writer.query('begin');
    await writer.query(`set local lock_timeout = '1ms'`);
    await writer.query(
      `insert into resources (kind, uuid, owner_uuid, name, status, body, created_at, updated_at) values ('servers', 'u-1', 'o-1', 'n', 'stopped', '{}', 't', 't')`,
    );
    await writer.query('commit');
    await holder.query('commit');
    assert.equal(await sum(), before + 1, 'the write raised the counter once');
  } finally {
    await holder.end();
    await writer.end();
    await db.drop();
  }
});
