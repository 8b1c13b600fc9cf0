import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';

/**
 * Usage records (reference §16.7), written by the billing poll in its transaction: what each object used
 * at each poll (`/usage/`; one row per account per poll holding its objects' records: a poll of 10,000
 * servers writes a thousand rows, not twenty thousand), each account's burst per charged resource per poll (`/burstusage/`), and its
 * running sum per day (`/dailyburstusage/`). Times are ms since the epoch (bigint): small keys for the
 * (owner, time) indexes every filter and page reads. The retention prune deletes by those indexes too, account
 * by account (every account with records has a balance row): no index by time alone to keep up at every insert.
 */
export const usage = (dialect: Dialect): Migration => ({
  async up(db: Kysely<any>) {
    const serialPk = dialect === 'postgres' ? 'bigserial primary key' : 'integer primary key autoincrement';
    await db.schema
      .createTable('usage_records')
      .addColumn('id', sql.raw(serialPk))
      .addColumn('owner_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('poll_ms', 'bigint', (c) => c.notNull())
      // The poll's records of the account, `[[resource, uuid, amount], …]` (JSON), and how many.
      .addColumn('n', 'integer', (c) => c.notNull())
      .addColumn('records', 'text', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('usage_records_owner_poll').on('usage_records').columns(['owner_uuid', 'poll_ms', 'id']).execute();
    await db.schema
      .createTable('burst_usage')
      .addColumn('id', sql.raw(serialPk))
      .addColumn('uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('owner_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('date_ms', 'bigint', (c) => c.notNull())
      .addColumn('resource_type', 'varchar(64)', (c) => c.notNull())
      .addColumn('amount', 'text', (c) => c.notNull())
      .addColumn('usage', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('burst_usage_owner_date').on('burst_usage').columns(['owner_uuid', 'date_ms', 'id']).execute();
    await db.schema.createIndex('burst_usage_uuid').on('burst_usage').columns(['uuid']).execute();
    await db.schema
      .createTable('burst_usage_daily')
      .addColumn('owner_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('day', 'varchar(10)', (c) => c.notNull())
      .addColumn('resource_type', 'varchar(64)', (c) => c.notNull())
      .addColumn('amount', 'text', (c) => c.notNull())
      // Σ burst units × seconds over the day, exact (a decimal integer as text: bytes × seconds exceed 2^53).
      .addColumn('unit_seconds', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('burst_usage_daily_pk', ['owner_uuid', 'day', 'resource_type'])
      .execute();
    await db.schema.createIndex('burst_usage_daily_day').on('burst_usage_daily').columns(['day']).execute();
  },
});
