import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';
import { answerChannel } from '../changes.js';
import { WAKE_CLOCK, WAKE_NOTIFY, WAKE_TIMERS } from '../wakes.js';

/**
 * PostgreSQL: new background work wakes the processes that do it (store/wakes.ts) instead of their polling
 * for it. A statement inserting timers announces `w:t`, one inserting outbox events or deliveries `w:n`, a
 * move of the shared clock `w:c`, on the schema's answer channel through `stratus_announce` (0120: after
 * the commit for a serving process, with its commit for any other writer); so does a statement updating
 * timers (a retry's later due time). Listeners raise no answer generation for them. Updates of deliveries
 * (leases, retries) are not announced: only the loop's own process writes them, and it reads their next due
 * time after each pass. Nothing on SQLite, whose processes poll.
 */
export const wakeOnWork = (dialect: Dialect): Migration => ({
  async up(db: Kysely<any>) {
    if (dialect !== 'postgres') return;
    const schema = (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0].s;
    const channel = sql.lit(answerChannel(schema));
    await sql`create or replace function stratus_announce_work() returns trigger language plpgsql as $$
      begin
        perform stratus_announce(TG_ARGV[0], TG_ARGV[1]);
        return null;
      end $$`.execute(db);
    // Timers are updated only for a retry (a later due time the owner of the loop must learn of).
    await sql`create trigger stratus_wake after insert or update on timers
      for each statement execute function stratus_announce_work(${channel}, ${sql.lit(WAKE_TIMERS)})`.execute(db);
    for (const table of ['event_outbox', 'notification_deliveries'])
      await sql`create trigger stratus_wake after insert on ${sql.table(table)}
        for each statement execute function stratus_announce_work(${channel}, ${sql.lit(WAKE_NOTIFY)})`.execute(db);
    // Only the clock's row: the other settings change nothing a background loop waits for.
    await sql`create trigger stratus_wake after insert or update on settings
      for each row when (new.key = 'clock_offset_ms') execute function stratus_announce_work(${channel}, ${sql.lit(WAKE_CLOCK)})`.execute(db);
  },
});
