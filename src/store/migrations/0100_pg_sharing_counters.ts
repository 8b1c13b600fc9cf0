import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';

/** The tables whose writes can change which rows an ACL shares with whom (as 0050_change_counters.ts). */
const SHARING_TABLES = ['acl_grantees', 'acl_rules', 'acl_tags', 'tag_members'] as const;

/**
 * PostgreSQL's `sharing` counter (SQLite's is 0050's): the same writes raise it, in their own transaction,
 * so a process can keep what an ACL shares with a caller and check it in the page's own statement
 * (store/resources/shared-seqs.ts). One row raised by every write would make concurrent writers queue on
 * its lock, so each backend raises a row of its own, `sharing:<backend pid mod 64>` (two backends share a
 * row only when their pids collide, and then merely wait for each other); readers take the sum. Rows only
 * grow and are never deleted, so the sum moves with every committed sharing write and with nothing else: a
 * rolled-back write raises nothing, like the write itself.
 *
 * Statement triggers on the ACL and membership tables (one raise per statement, however many rows) and on
 * inserts and deletes of `resources`; a row trigger on its updates, raising only when a row moves (uuid,
 * kind or owner), so a PUT or a status change raises nothing.
 */
export const pgSharingCounters = (dialect: Dialect): Migration => ({
  async up(db: Kysely<any>) {
    if (dialect !== 'postgres') return;
    await sql`create or replace function stratus_raise_sharing() returns trigger language plpgsql as $$
      begin
        insert into change_counters (scope, n) values ('sharing:' || (pg_backend_pid() % 64), 1)
          on conflict (scope) do update set n = change_counters.n + 1;
        return null;
      end $$`.execute(db);
    for (const table of SHARING_TABLES)
      await sql`create trigger stratus_raise_sharing after insert or update or delete or truncate on ${sql.table(table)}
        for each statement execute function stratus_raise_sharing()`.execute(db);
    await sql`create trigger stratus_raise_sharing after insert or delete or truncate on resources
      for each statement execute function stratus_raise_sharing()`.execute(db);
    await sql`create trigger stratus_raise_sharing_move after update of uuid, kind, owner_uuid on resources for each row
      when (old.uuid is distinct from new.uuid or old.kind is distinct from new.kind or old.owner_uuid is distinct from new.owner_uuid)
      execute function stratus_raise_sharing()`.execute(db);
  },
});
