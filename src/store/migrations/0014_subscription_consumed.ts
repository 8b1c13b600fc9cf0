import type { Kysely, Migration } from 'kysely';

/**
 * Traffic subscriptions (reference §16.8) are used up by volume, not by time: `consumed` counts what
 * they covered so far (a used-up one has expired). Time-based subscriptions keep 0.
 */
export const subscriptionConsumed = (): Migration => ({
  async up(db: Kysely<any>) {
    await db.schema
      .alterTable('subscriptions')
      .addColumn('consumed', 'bigint', (c) => c.notNull().defaultTo(0))
      .execute();
  },
});
