import type { Dialect } from '../db.js';
import { DeliveryQueries } from './deliveries.js';
import { FanoutQueries } from './fanout.js';
import { FeedQueries } from './feed.js';
import { PreferenceQueries } from './preferences.js';

/**
 * The notifications family's SQL (store/tables.ts family `notifications`), exposed as `store.notifications`:
 * the fan-out's bookkeeping, the delivery queue, the feed, preferences. Contacts and webhooks are resources
 * (`store.resources`); what notifications read of accounts is `store.accounts.users`'s.
 */
export class NotificationQueries {
  readonly fanout: FanoutQueries;
  readonly deliveries: DeliveryQueries;
  readonly feed = new FeedQueries();
  readonly preferences = new PreferenceQueries();

  constructor(dialect: Dialect) {
    this.fanout = new FanoutQueries(dialect);
    this.deliveries = new DeliveryQueries(dialect);
  }
}

export type { OutboxRow } from './fanout.js';
export type { ClaimedRow, DeliveryRow } from './deliveries.js';
export type { PreferenceKey } from './preferences.js';
