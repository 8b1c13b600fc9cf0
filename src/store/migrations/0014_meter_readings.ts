import type { Kysely, Migration } from 'kysely';

/**
 * Volume metering (reference §16.2 `tx`, §16.8): the billing poll charges traffic by what a server's
 * counter grew since the previous poll, so it keeps the last reading it billed per (key, object) —
 * every byte is billed once whatever happened between polls (a stop, an operator's burst). Traffic
 * subscriptions are consumed by volume: `consumed` counts what they covered (a depleted one has expired).
 */
export const meterReadings = (): Migration => ({
  async up(db: Kysely<any>) {
    await db.schema
      .createTable('meter_readings')
      .addColumn('key', 'varchar(64)', (c) => c.notNull())
      .addColumn('uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('owner_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('reading', 'bigint', (c) => c.notNull())
      .addColumn('updated_at', 'varchar(40)', (c) => c.notNull())
      .addPrimaryKeyConstraint('meter_readings_pk', ['key', 'uuid'])
      .execute();
    await db.schema.createIndex('meter_readings_owner').on('meter_readings').columns(['owner_uuid']).execute();
    await db.schema
      .alterTable('subscriptions')
      .addColumn('consumed', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  },
});
