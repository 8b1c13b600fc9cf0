import type { Kysely, Migration } from 'kysely';
import { representable, timeMs } from '../../core/clock.js';

/**
 * Times that SQL compares are epoch milliseconds, not text. Timers, deliveries and subscription windows
 * were compared as ISO text, which orders as time only while every year has four digits: an `end_time`
 * rounded into the year 10000 (`+010000-…`) sorted before every other time, so its renewal timer was always
 * due and renewed itself in a loop. Timers and deliveries keep only `due_ms`; subscriptions keep their
 * `start_time`/`end_time` text (the API prints it as stored) beside `start_ms`/`end_ms`, which queries use.
 * A row already out of range (written by the bug) is read as the time it names; its timer is failed, so it
 * stops.
 */
export const timesAsTimes = (): Migration => ({
  async up(db: Kysely<any>) {
    await db.schema
      .alterTable('timers')
      .addColumn('due_ms', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    for (const t of await db.selectFrom('timers').select(['id', 'due_at']).execute()) {
      const ms = timeMs(String(t.due_at));
      const row = representable(ms)
        ? { due_ms: ms }
        : { due_ms: 0, state: 'failed', unique_key: null, last_error: `due time out of range: ${String(t.due_at)}` };
      await db.updateTable('timers').set(row).where('id', '=', t.id).execute();
    }
    await db.schema.dropIndex('timers_due').execute();
    await db.schema.alterTable('timers').dropColumn('due_at').execute();
    await db.schema.createIndex('timers_due').on('timers').columns(['state', 'due_ms']).execute();

    await db.schema
      .alterTable('notification_deliveries')
      .addColumn('due_ms', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    for (const d of await db.selectFrom('notification_deliveries').select(['id', 'due_at']).execute()) {
      const ms = timeMs(String(d.due_at));
      await db
        .updateTable('notification_deliveries')
        .set({ due_ms: representable(ms) ? ms : 0 })
        .where('id', '=', d.id)
        .execute();
    }
    await db.schema.dropIndex('notification_deliveries_due').execute();
    await db.schema.alterTable('notification_deliveries').dropColumn('due_at').execute();
    await db.schema.createIndex('notification_deliveries_due').on('notification_deliveries').columns(['state', 'due_ms']).execute();

    await db.schema
      .alterTable('subscriptions')
      .addColumn('start_ms', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .alterTable('subscriptions')
      .addColumn('end_ms', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    for (const s of await db.selectFrom('subscriptions').select(['id', 'start_time', 'end_time']).execute()) {
      await db
        .updateTable('subscriptions')
        .set({ start_ms: timeMs(String(s.start_time)), end_ms: timeMs(String(s.end_time)) })
        .where('id', '=', s.id)
        .execute();
    }
    await db.schema.dropIndex('subscriptions_window').execute();
    await db.schema.createIndex('subscriptions_window').on('subscriptions').columns(['end_ms', 'start_ms']).execute();
  },
});
