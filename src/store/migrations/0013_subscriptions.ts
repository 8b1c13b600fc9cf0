import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';

/**
 * Subscriptions (reference §16.8): what an account bought at the subscription price for a window of
 * time. `parent_id` links an extension to the subscription it extends (a chain), `period` keeps the asked
 * period so an extension re-applies it from its own start. Coverage is read per (owner, window) at every
 * billing poll; lists page per owner by id.
 */
export const subscriptions = (dialect: Dialect): Migration => ({
  async up(db: Kysely<any>) {
    const serialPk = dialect === 'postgres' ? 'bigserial primary key' : 'integer primary key autoincrement';
    await db.schema
      .createTable('subscriptions')
      .addColumn('id', sql.raw(serialPk))
      .addColumn('uuid', 'varchar(64)', (c) => c.notNull().unique())
      .addColumn('owner_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('resource', 'varchar(64)', (c) => c.notNull())
      .addColumn('amount', 'bigint', (c) => c.notNull())
      .addColumn('start_time', 'varchar(40)', (c) => c.notNull())
      .addColumn('end_time', 'varchar(40)', (c) => c.notNull())
      .addColumn('period', 'varchar(64)')
      .addColumn('price', 'text', (c) => c.notNull())
      .addColumn('discount_amount', 'text', (c) => c.notNull())
      .addColumn('discount_percent', 'text', (c) => c.notNull())
      .addColumn('auto_renew', 'integer', (c) => c.notNull())
      .addColumn('subscribed_object', 'varchar(64)')
      .addColumn('parent_id', 'bigint')
      .addColumn('root_id', 'bigint')
      .addColumn('created_at', 'varchar(40)', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('subscriptions_owner').on('subscriptions').columns(['owner_uuid', 'id']).execute();
    await db.schema.createIndex('subscriptions_window').on('subscriptions').columns(['end_time', 'start_time']).execute();
    await db.schema.createIndex('subscriptions_parent').on('subscriptions').columns(['parent_id']).execute();
    await db.schema.createIndex('subscriptions_root').on('subscriptions').columns(['root_id', 'id']).execute();
  },
});
