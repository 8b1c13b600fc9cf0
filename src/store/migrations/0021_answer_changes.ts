import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';
import { answerChannel } from '../changes.js';

/**
 * Tables whose writes never change an API answer, and that requests write all the time: authentication,
 * rate limits and background bookkeeping. Every other table announces its writes.
 */
export const UNANNOUNCED_TABLES = [
  'kysely_migration',
  'kysely_migration_lock',
  'rate_counters',
  'digest_nonces',
  'login_failures',
  'sessions',
  'timers',
  'event_outbox',
  'notification_fanout',
] as const;

/**
 * PostgreSQL: every write to a table an answer is made of NOTIFYs the schema's answer channel, from a
 * statement trigger, so kept GET answers are dropped whoever wrote: this process, another API process,
 * an operator command (store/answer-barrier.ts). PostgreSQL sends one notification per transaction
 * however many statements fire it (same channel, same payload), and only if it commits. A table added
 * later gets the trigger with `announceWrites` in its own migration (a test checks every table).
 * Nothing on SQLite, whose token reads the engine's own change counters.
 */
export function answerChanges(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<any>) {
      if (dialect !== 'postgres') return;
      const schema = (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0].s;
      await sql`create or replace function stratus_announce_write() returns trigger language plpgsql as $$
        begin
          perform pg_notify(TG_ARGV[0], '');
          return null;
        end $$`.execute(db);
      const tables = await sql<{ t: string }>`select table_name as t from information_schema.tables
        where table_schema = ${schema} and table_type = 'BASE TABLE' order by 1`.execute(db);
      for (const { t } of tables.rows) if (!(UNANNOUNCED_TABLES as readonly string[]).includes(t)) await announceWrites(db, t);
    },
  };
}

/** The statement trigger that announces `table`'s writes on the schema's answer channel (PostgreSQL). */
export async function announceWrites(db: Kysely<any>, table: string): Promise<void> {
  const schema = (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0].s;
  const channel = answerChannel(schema);
  await sql`create trigger stratus_announce_write after insert or update or delete or truncate on ${sql.table(table)}
    for each statement execute function stratus_announce_write(${sql.lit(channel)})`.execute(db);
}
