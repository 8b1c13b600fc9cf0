import type { Dialect } from '../db.js';
import { AccountQueries } from './accounts.js';
import { LevelQueries } from './levels.js';
import { SubscriptionQueries } from './subscriptions.js';
import { UsageQueries } from './usage.js';

/**
 * The billing family's SQL (store/tables.ts family `billing`), exposed as `store.billing`: balances and
 * the ledger, burst levels, usage records, subscriptions. Pages of its kinds (ledger, usage, subscriptions)
 * are store/table-pages.ts's, declared in resources/billing/.
 */
export class BillingQueries {
  readonly accounts: AccountQueries;
  readonly levels = new LevelQueries();
  readonly usage: UsageQueries;
  readonly subscriptions = new SubscriptionQueries();

  constructor(dialect: Dialect) {
    this.accounts = new AccountQueries(dialect);
    this.usage = new UsageQueries(dialect);
  }
}

export type { AccountRow, LedgerEntry } from './accounts.js';
export type { LevelRow } from './levels.js';
export { subscriptionRow, type SubscriptionRow } from './subscriptions.js';
export type { BurstRecord, DailySum, PollRecords } from './usage.js';
