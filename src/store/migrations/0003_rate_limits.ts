import type { Kysely, Migration } from 'kysely';

/**
 * Rate limits: request counters shared by every API process on one database (one row per subject, rule
 * and fixed window, pruned once the window has ended), and per-account rule overrides set by an operator.
 */
export const rateLimits: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .createTable('rate_counters')
      .addColumn('bucket', 'varchar(400)', (c) => c.primaryKey())
      .addColumn('count', 'integer', (c) => c.notNull())
      .addColumn('lim', 'integer', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .execute();
    await db.schema.createIndex('rate_counters_expiry').on('rate_counters').column('expires_at').execute();

    await db.schema
      .createTable('rate_limit_overrides')
      .addColumn('user_uuid', 'varchar(64)', (c) => c.primaryKey().references('users.uuid').onDelete('cascade'))
      .addColumn('rules', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'varchar(40)', (c) => c.notNull())
      .execute();
  },
};
