import type { Kysely, Migration } from 'kysely';

/**
 * Login-protection counters an operator can clear (`stratus users unlock`): a pair counter (one account
 * from one address) also carries the keys of its account and of its address, so every counter of an
 * account, or of an address, is found without either being stored in clear. Rows from before stay as
 * they were and end with their 15-minute window.
 */
export const loginUnlock: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable('login_failures').addColumn('account_key', 'varchar(64)').execute();
    await db.schema.alterTable('login_failures').addColumn('address_key', 'varchar(64)').execute();
    await db.schema.createIndex('login_failures_account').on('login_failures').column('account_key').execute();
    await db.schema.createIndex('login_failures_address').on('login_failures').column('address_key').execute();
  },
};
