import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';

/**
 * Notifications (issue 15): contacts are stored resources (`notification_contacts`); this adds a
 * contact's preferences that differ from the default, the outbox events already fanned out, the
 * deliveries (one e-mail or webhook call each, retried until sent) and the user's feed (`api` medium).
 */
export function notifications(dialect: Dialect): Migration {
  const serialPk = dialect === 'postgres' ? 'bigserial primary key' : 'integer primary key autoincrement';
  return {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('notification_preferences')
        .addColumn('contact_uuid', 'varchar(64)', (c) => c.notNull())
        .addColumn('medium', 'varchar(16)', (c) => c.notNull())
        .addColumn('type', 'varchar(64)', (c) => c.notNull())
        .addColumn('value', 'integer', (c) => c.notNull())
        .addPrimaryKeyConstraint('notification_preferences_pk', ['contact_uuid', 'medium', 'type'])
        .execute();

      // An outbox event is fanned out once: its mark commits with the deliveries it made.
      await db.schema
        .createTable('notification_fanout')
        .addColumn('seq', 'bigint', (c) => c.primaryKey())
        .execute();

      await db.schema
        .createTable('notification_deliveries')
        .addColumn('id', sql.raw(serialPk))
        .addColumn('owner_uuid', 'varchar(64)', (c) => c.notNull())
        .addColumn('channel', 'varchar(16)', (c) => c.notNull())
        .addColumn('target_uuid', 'varchar(64)', (c) => c.notNull())
        .addColumn('address', 'text', (c) => c.notNull())
        .addColumn('type', 'varchar(64)', (c) => c.notNull())
        .addColumn('message_id', 'varchar(200)', (c) => c.notNull())
        .addColumn('content', 'text', (c) => c.notNull())
        .addColumn('state', 'varchar(16)', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull())
        .addColumn('due_at', 'varchar(40)', (c) => c.notNull())
        .addColumn('last_error', 'text')
        .addColumn('created_at', 'varchar(40)', (c) => c.notNull())
        .addColumn('sent_at', 'varchar(40)')
        .execute();
      await db.schema.createIndex('notification_deliveries_due').on('notification_deliveries').columns(['state', 'due_at']).execute();
      await db.schema.createIndex('notification_deliveries_target').on('notification_deliveries').columns(['target_uuid', 'id']).execute();

      await db.schema
        .createTable('notifications')
        .addColumn('seq', sql.raw(serialPk))
        .addColumn('uuid', 'varchar(64)', (c) => c.notNull().unique())
        .addColumn('owner_uuid', 'varchar(64)', (c) => c.notNull())
        .addColumn('contact_uuid', 'varchar(64)', (c) => c.notNull())
        .addColumn('type', 'varchar(64)', (c) => c.notNull())
        .addColumn('subject', 'text', (c) => c.notNull())
        .addColumn('text', 'text', (c) => c.notNull())
        .addColumn('created_at', 'varchar(40)', (c) => c.notNull())
        .addColumn('read_at', 'varchar(40)')
        .execute();
      await db.schema.createIndex('notifications_owner').on('notifications').columns(['owner_uuid', 'seq']).execute();
    },
  };
}
