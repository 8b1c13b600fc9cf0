import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';

/**
 * Billing (reference §16): each account's balance (an exact decimal kept as text; SQLite has no decimal
 * type), the ledger of every debit and credit, and the burst levels in force. A ledger entry of a billing
 * cycle is unique per (account, cycle, resource, interval), so a cycle is never billed twice, whatever
 * runs it. Ledger pages are read newest first by (owner, time) and filtered by (owner, billing_cycle).
 */
export const billing = (dialect: Dialect): Migration => ({
  async up(db: Kysely<any>) {
    const serialPk = dialect === 'postgres' ? 'bigserial primary key' : 'integer primary key autoincrement';
    await db.schema
      .createTable('billing_accounts')
      .addColumn('owner_uuid', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('balance', 'text', (c) => c.notNull())
      .addColumn('currency', 'varchar(3)', (c) => c.notNull())
      .addColumn('credit_limit', 'text')
      // The last out-of-money notice (soon, very_soon, stopped), so each is given once per descent.
      .addColumn('notice', 'varchar(16)')
      .addColumn('updated_at', 'varchar(40)', (c) => c.notNull())
      .execute();
    await db.schema
      .createTable('ledger')
      .addColumn('id', sql.raw(serialPk))
      .addColumn('owner_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('amount', 'text', (c) => c.notNull())
      .addColumn('billing_cycle', 'bigint')
      .addColumn('initial', 'text', (c) => c.notNull())
      .addColumn('end_balance', 'text', (c) => c.notNull())
      .addColumn('interval', 'integer')
      .addColumn('human_interval', 'varchar(32)')
      .addColumn('poll_time', 'varchar(40)', (c) => c.notNull())
      .addColumn('reason', 'text', (c) => c.notNull())
      .addColumn('resource', 'varchar(64)')
      .addColumn('resource_amount', 'text')
      .addColumn('time', 'varchar(40)', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('ledger_owner_time').on('ledger').columns(['owner_uuid', 'time', 'id']).execute();
    await db.schema.createIndex('ledger_cycle_once').unique().on('ledger').columns(['owner_uuid', 'billing_cycle', 'resource', 'interval']).execute();
    await db.schema
      .createTable('burst_levels')
      .addColumn('resource', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('current', 'integer', (c) => c.notNull())
      .addColumn('next', 'integer', (c) => c.notNull())
      .addColumn('updated_at', 'varchar(40)', (c) => c.notNull())
      .execute();
  },
});
