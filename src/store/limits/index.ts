import { OverrideQueries } from './overrides.js';

/**
 * The limits family's SQL (store/tables.ts family `limits`), exposed as `store.limits`: accounts' rate-limit
 * overrides. The request counters (`rate_counters`, or memory on SQLite) are a CounterStore of their own
 * (counters.ts), opened by the rate limiter (http/ratelimit/limiter.ts) with a pool of their own on PostgreSQL.
 */
export class LimitQueries {
  readonly overrides = new OverrideQueries();
}
