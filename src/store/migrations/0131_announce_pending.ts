import { sql, type Kysely, type Migration } from 'kysely';

/**
 * `announce_pending` (PostgreSQL): a serving process's announcements (migration 0120) of a transaction,
 * written by that transaction and deleted by the NOTIFY that sends them after the commit (store/db.ts
 * `announcedAfter`, store/answer-barrier.ts). A process killed between the two leaves its row: any process
 * sends it later (Store.drainAnnouncements: at start, and the `announce.drain` timer), so a kill -9 no
 * longer leaves kept answers stale or an event unsent. The table exists on SQLite too (unused) so the
 * schemas stay alike; no answer is made of it, so it announces nothing.
 */
export const announcePending = (serialPk: string): Migration => ({
  async up(db: Kysely<any>) {
    await db.schema
      .createTable('announce_pending')
      .addColumn('id', sql.raw(serialPk))
      .addColumn('payloads', 'text', (c) => c.notNull())
      .addColumn('changes', 'text')
      .addColumn('created_ms', 'bigint', (c) => c.notNull())
      .execute();
  },
});
