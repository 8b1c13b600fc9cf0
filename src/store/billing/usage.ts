import { bulkInsert, type BulkColumn } from '../bulk.js';
import type { Dialect, Tx } from '../db.js';

/**
 * The usage records the billing poll writes (`usage_records`, `burst_usage`, `burst_usage_daily`;
 * billing/usage-records.ts says what each is), set-wise (store/bulk.ts): a poll of 10,000 servers is a
 * handful of statements. Their lists are kinds over their own tables (resources/billing/usage.ts).
 */
export type PollRecords = readonly [owner: string, pollMs: number, n: number, records: string];
export type BurstRecord = readonly [uuid: string, owner: string, dateMs: number, resource: string, amount: string, usage: number];
export type DailySum = readonly [owner: string, day: string, resource: string, amount: string, unitSeconds: string];

const USAGE_COLUMNS: BulkColumn[] = [
  { name: 'owner_uuid', pg: 'varchar' },
  { name: 'poll_ms', pg: 'bigint' },
  { name: 'n', pg: 'integer' },
  { name: 'records', pg: 'text' },
];
const BURST_COLUMNS: BulkColumn[] = [
  { name: 'uuid', pg: 'varchar' },
  { name: 'owner_uuid', pg: 'varchar' },
  { name: 'date_ms', pg: 'bigint' },
  { name: 'resource_type', pg: 'varchar' },
  { name: 'amount', pg: 'text' },
  { name: 'usage', pg: 'bigint' },
];
const DAILY_COLUMNS: BulkColumn[] = [
  { name: 'owner_uuid', pg: 'varchar' },
  { name: 'day', pg: 'varchar' },
  { name: 'resource_type', pg: 'varchar' },
  { name: 'amount', pg: 'text' },
  { name: 'unit_seconds', pg: 'text' },
];

export class UsageQueries {
  constructor(private readonly dialect: Dialect) {}

  /** Each account's records of one poll, a row per account. */
  async insertPolls(tx: Tx, rows: readonly PollRecords[]): Promise<void> {
    await bulkInsert(tx, this.dialect, 'usage_records', USAGE_COLUMNS, rows);
  }

  async insertBursts(tx: Tx, rows: readonly BurstRecord[]): Promise<void> {
    await bulkInsert(tx, this.dialect, 'burst_usage', BURST_COLUMNS, rows);
  }

  /** The day's running sums these accounts have so far, one read per 1,000 accounts. */
  async dailySums(
    tx: Tx,
    day: string,
    owners: readonly string[],
  ): Promise<{ owner_uuid: string; resource_type: string; amount: string; unit_seconds: string }[]> {
    const out = [];
    for (let i = 0; i < owners.length; i += 1000)
      out.push(
        ...(await tx
          .selectFrom('burst_usage_daily')
          .select(['owner_uuid', 'resource_type', 'amount', 'unit_seconds'])
          .where('day', '=', day)
          .where('owner_uuid', 'in', owners.slice(i, i + 1000))
          .execute()),
      );
    return out;
  }

  /** The day's running sums as given (inserted or replaced). */
  async writeDailySums(tx: Tx, rows: readonly DailySum[]): Promise<void> {
    await bulkInsert(
      tx,
      this.dialect,
      'burst_usage_daily',
      DAILY_COLUMNS,
      rows,
      'on conflict (owner_uuid, day, resource_type) do update set amount = excluded.amount, unit_seconds = excluded.unit_seconds',
    );
  }

  /**
   * Delete the records before `cutoffMs` (the days before `cutoffDay`). Every account with records has a
   * balance row (the poll that wrote them locked it), so each table is pruned by its (owner, time) index,
   * account by account, in one statement; an index by time alone would cost every poll's inserts more than
   * it saves the hourly prune.
   */
  async prune(tx: Tx, cutoffMs: number, cutoffDay: string): Promise<{ usage_records: number; burst_usage: number; burst_usage_daily: number }> {
    const accounts = tx.selectFrom('billing_accounts').select('owner_uuid');
    const usage = await tx.deleteFrom('usage_records').where('owner_uuid', 'in', accounts).where('poll_ms', '<', cutoffMs).executeTakeFirst();
    const burst = await tx.deleteFrom('burst_usage').where('owner_uuid', 'in', accounts).where('date_ms', '<', cutoffMs).executeTakeFirst();
    const daily = await tx.deleteFrom('burst_usage_daily').where('day', '<', cutoffDay).executeTakeFirst();
    return {
      usage_records: Number(usage.numDeletedRows),
      burst_usage: Number(burst.numDeletedRows),
      burst_usage_daily: Number(daily.numDeletedRows),
    };
  }
}
