import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';

/** The tables whose writes can change which rows an ACL shares with whom (see `SHARING`). */
const SHARING_TABLES = ['acl_grantees', 'acl_rules', 'acl_tags', 'tag_members'] as const;

/**
 * Counters that a write raises in its own transaction, so a process can keep something derived from those
 * writes and know, with one read of the counter, that it still holds (store/resources/shared-seqs.ts).
 *
 * SQLite: row triggers raise `sharing` with every write to the ACL and membership tables, and with every
 * row of `resources` inserted, deleted or moved (uuid, kind, owner): whatever the writer (this process,
 * another on the same file, an operator command, an import). PostgreSQL gets its triggers in
 * 0100_pg_sharing_counters.ts (a row per backend, summed: one row updated by every membership write would
 * make concurrent writers queue on it).
 */
export const changeCounters = (dialect: Dialect): Migration => ({
  async up(db: Kysely<any>) {
    await db.schema
      .createTable('change_counters')
      .addColumn('scope', 'varchar(32)', (c) => c.primaryKey())
      .addColumn('n', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.insertInto('change_counters').values({ scope: 'sharing', n: 0 }).execute();
    if (dialect !== 'sqlite') return;
    const bump = sql.raw(`update change_counters set n = n + 1 where scope = 'sharing'`);
    for (const table of SHARING_TABLES)
      for (const op of ['insert', 'update', 'delete'])
        await sql`create trigger ${sql.raw(`sharing_${table}_${op}`)} after ${sql.raw(op)} on ${sql.table(table)} begin ${bump}; end`.execute(db);
    for (const [name, op] of [
      ['insert', 'insert'],
      ['delete', 'delete'],
      ['move', 'update of uuid, kind, owner_uuid'],
    ])
      await sql`create trigger ${sql.raw(`sharing_resources_${name}`)} after ${sql.raw(op)} on resources begin ${bump}; end`.execute(db);
  },
});
