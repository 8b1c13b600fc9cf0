import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';

/**
 * Durable follow-up work (a boot completes, a clone finishes) and the audit log. A timer row is written
 * in the same transaction as the change that needs it, so a restart resumes it; several processes on
 * PostgreSQL claim rows with FOR UPDATE SKIP LOCKED, so none runs twice.
 */
export function scheduler(dialect: Dialect): Migration {
  const serialPk = dialect === 'postgres' ? 'bigserial primary key' : 'integer primary key autoincrement';
  return {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('timers')
        .addColumn('id', sql.raw(serialPk))
        .addColumn('kind', 'varchar(64)', (c) => c.notNull())
        .addColumn('subject', 'varchar(64)', (c) => c.notNull())
        .addColumn('due_at', 'varchar(40)', (c) => c.notNull())
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('state', 'varchar(16)', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'varchar(40)', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('timers_due').on('timers').columns(['state', 'due_at']).execute();
      await db.schema.createIndex('timers_subject').on('timers').columns(['subject', 'kind']).execute();

      await db.schema
        .createTable('audit_log')
        .addColumn('seq', sql.raw(serialPk))
        .addColumn('owner_uuid', 'varchar(64)', (c) => c.notNull())
        .addColumn('actor_uuid', 'varchar(64)')
        .addColumn('action', 'varchar(32)', (c) => c.notNull())
        .addColumn('category', 'varchar(32)', (c) => c.notNull())
        .addColumn('uuid', 'varchar(64)', (c) => c.notNull())
        .addColumn('details', 'text', (c) => c.notNull())
        .addColumn('success', 'integer', (c) => c.notNull()) // 0|1: one spelling for both engines
        .addColumn('error_type', 'varchar(32)')
        .addColumn('error_point', 'varchar(128)')
        .addColumn('error_message', 'text', (c) => c.notNull())
        .addColumn('timestamp', 'varchar(40)', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('audit_log_owner').on('audit_log').columns(['owner_uuid', 'seq']).execute();
      await db.schema.createIndex('audit_log_uuid').on('audit_log').columns(['uuid', 'seq']).execute();
    },
  };
}
