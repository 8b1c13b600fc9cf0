import SQLite from 'better-sqlite3';
import type { Db, Store } from '../db.js';
import type { Riders } from '../pg-client.js';

type SQLiteDatabase = InstanceType<typeof SQLite>;
type SQLiteStatement = SQLite.Statement<unknown[]>;

/** One fixed window of one rule for one subject (user or client address). */
export interface Bucket {
  /** `<subject>|<rule id>|<window start ms>`: a new window is a new key, so nothing needs resetting. */
  key: string;
  /** The rule's count: the bucket is not incremented past it. */
  limit: number;
  /** Window end (ms since the epoch); after it the row is garbage. */
  expiresAt: number;
}

/**
 * Where request counts live. `take` is the whole protocol: each bucket below its limit is incremented
 * atomically and its new count returned; a bucket already at its limit is left alone and answers null.
 * So refused requests cost nothing, and a budget is never overdrawn however many processes race for it.
 */
export interface CounterStore {
  take(buckets: Bucket[]): Promise<(number | null)[]>;
  /**
   * `take`, with its statement sent along with the next one this process sends (PostgreSQL: no round trip
   * of its own); the function returned waits for the counts (sending the statement alone if nothing has
   * carried it yet). Absent where counting costs no round trip anyway.
   */
  takeAlong?(buckets: Bucket[]): () => Promise<(number | null)[]>;
  /** Gives back one unit to each bucket: a request refused by one rule does not consume the others. */
  giveBack(keys: string[]): Promise<void>;
  /** Drops windows that ended at or before `now`; answers how many. */
  prune(now: number): Promise<number>;
  /** Releases what the store holds (connections). */
  close(): Promise<void>;
}

/**
 * Counters in the process's memory: exact for one process, gone on restart (a restart forgets the
 * current windows). Used on SQLite, which is single-process by design; see RateLimiter.create for the
 * measurement behind that choice.
 */
export class MemoryCounters implements CounterStore {
  private readonly counts = new Map<string, { count: number; expiresAt: number }>();

  /**
   * `maxEntries` bounds memory against a flood from ever-new addresses (IPv6): past it the oldest window
   * is forgotten (its subject gets a fresh budget) rather than the process growing without limit.
   */
  constructor(private readonly maxEntries = 1_000_000) {}

  async take(buckets: Bucket[]): Promise<(number | null)[]> {
    return buckets.map((b) => {
      const c = this.counts.get(b.key);
      if (!c) {
        if (this.counts.size >= this.maxEntries) this.counts.delete(this.counts.keys().next().value!);
        this.counts.set(b.key, { count: 1, expiresAt: b.expiresAt });
        return 1;
      }
      if (c.count >= b.limit) return null;
      return ++c.count;
    });
  }

  async giveBack(keys: string[]): Promise<void> {
    for (const k of keys) {
      const c = this.counts.get(k);
      if (c && c.count > 0) c.count--;
    }
  }

  async prune(now: number): Promise<number> {
    let n = 0;
    for (const [k, c] of this.counts)
      if (c.expiresAt <= now) {
        this.counts.delete(k);
        n++;
      }
    return n;
  }

  get size(): number {
    return this.counts.size;
  }

  async close(): Promise<void> {}
}

/**
 * Counters in the `rate_counters` table, shared by every API process on one database. One statement per
 * request, whatever the number of rules it matches:
 *
 *   insert into rate_counters (bucket, count, lim, expires_at) values (…, 1, …, …), (…)
 *   on conflict (bucket) do update set count = rate_counters.count + 1
 *     where rate_counters.count < excluded.lim
 *   returning bucket, count
 *
 * A bucket at its limit matches the conflict but not the `where`, so it is neither changed nor returned.
 * Rows are locked in key order (the values are sorted) so two requests of one user cannot deadlock.
 */
export class TableCounters implements CounterStore {
  constructor(private readonly db: Db) {}

  /** On PostgreSQL: the counters tuned for the request path (see PostgresCounters). */
  static postgres(store: Store): PostgresCounters {
    if (!store.riders) throw new Error('TableCounters.postgres: not a PostgreSQL store');
    return new PostgresCounters(store.db, store.riders);
  }

  /** The store's connections: the store closes them. */
  async close(): Promise<void> {}

  async take(buckets: Bucket[]): Promise<(number | null)[]> {
    const values = [...buckets]
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
      .map((b) => ({ bucket: b.key, count: 1, lim: b.limit, expires_at: b.expiresAt }));
    const rows = await this.db
      .insertInto('rate_counters')
      .values(values)
      .onConflict((oc) =>
        oc
          .column('bucket')
          .doUpdateSet((eb) => ({ count: eb('rate_counters.count', '+', 1), lim: eb.ref('excluded.lim') }))
          .where((eb) => eb('rate_counters.count', '<', eb.ref('excluded.lim'))),
      )
      .returning(['bucket', 'count'])
      .execute();
    const got = new Map(rows.map((r) => [r.bucket, Number(r.count)]));
    return buckets.map((b) => got.get(b.key) ?? null);
  }

  async giveBack(keys: string[]): Promise<void> {
    if (keys.length === 0) return;
    await this.db
      .updateTable('rate_counters')
      .set((eb) => ({ count: eb('count', '-', 1) }))
      .where('bucket', 'in', keys)
      .where('count', '>', 0)
      .execute();
  }

  async prune(now: number): Promise<number> {
    const res = await this.db.deleteFrom('rate_counters').where('expires_at', '<=', now).executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}

/**
 * The table counters on PostgreSQL, on the store's own connections, tuned for the request path:
 * - `take` is one named (server-side prepared) statement taking arrays, so its text is parsed and planned
 *   once per connection whatever the number of rules (~280 µs -> ~150 µs, about one round trip);
 * - its transaction does not wait for its WAL flush: the statement itself sets `synchronous_commit` off for
 *   its own transaction (`set_config(…, true)`), so the sessions keep waiting for every other write's flush.
 *   A database crash can lose the last fraction of a second of counts, which only means a few requests more
 *   than the limit (a flush per count cost ~570 µs -> ~280 µs sequential, and ~4 ms on a busy disk);
 * - `takeAlong` sends it with the request's next statement (store/pg-client.ts Riders): a GET's read and its
 *   count travel in one round trip (http/ratelimit/limiter.ts decides when a request may wait for its count).
 */
export class PostgresCounters extends TableCounters {
  static readonly TAKE =
    'insert into rate_counters (bucket, count, lim, expires_at) ' +
    'select b, 1, l, e from unnest($1::varchar[], $2::integer[], $3::bigint[]) as t(b, l, e) ' +
    "where set_config('synchronous_commit', 'off', true) is not null order by b " +
    'on conflict (bucket) do update set count = rate_counters.count + 1 where rate_counters.count < excluded.lim ' +
    'returning bucket, count';

  constructor(
    db: Db,
    private readonly riders: Riders,
  ) {
    super(db);
  }

  takeAlong(buckets: Bucket[]): () => Promise<(number | null)[]> {
    const ride = this.riders.add<{ bucket: string; count: number }>('stratus_rate_take', PostgresCounters.TAKE, [
      buckets.map((b) => b.key),
      buckets.map((b) => b.limit),
      buckets.map((b) => b.expiresAt),
    ]);
    return async () => {
      const got = new Map((await ride.result()).map((r) => [r.bucket, Number(r.count)]));
      return buckets.map((b) => got.get(b.key) ?? null);
    };
  }

  override take(buckets: Bucket[]): Promise<(number | null)[]> {
    return this.takeAlong(buckets)();
  }
}

/**
 * Counters shared by the API processes of one SQLite file (`serve --workers N`), kept in a file of their
 * own beside it (`<db>-ratelimits`, WAL mode), not in the database: every count is a write, and a write to
 * the database itself would move the token kept answers are checked against (its `total_changes` and
 * `data_version`, http/answer-cache.ts), so no answer would ever be reused while limits count. The file
 * holds nothing but current windows: losing it loses only them. Its one table is made here when missing
 * (it is no part of the migrated schema). One statement per bucket in one IMMEDIATE transaction, ~20 µs.
 */
export class SqliteFileCounters implements CounterStore {
  private readonly db: SQLiteDatabase;
  private readonly takeOne: SQLiteStatement;
  private readonly giveOne: SQLiteStatement;
  private readonly pruneOld: SQLiteStatement;
  private readonly takeAll: (buckets: Bucket[]) => (number | null)[];

  constructor(path: string) {
    this.db = new SQLite(path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = OFF');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(
      'create table if not exists rate_counters (bucket text primary key, count integer not null, lim integer not null, expires_at integer not null)',
    );
    this.db.exec('create index if not exists rate_counters_expiry on rate_counters (expires_at)');
    this.takeOne = this.db
      .prepare<unknown[]>(
        'insert into rate_counters (bucket, count, lim, expires_at) values (?, 1, ?, ?) ' +
          'on conflict (bucket) do update set count = count + 1, lim = excluded.lim where count < excluded.lim returning count',
      )
      .pluck();
    this.giveOne = this.db.prepare<unknown[]>('update rate_counters set count = count - 1 where bucket = ? and count > 0');
    this.pruneOld = this.db.prepare<unknown[]>('delete from rate_counters where expires_at <= ?');
    const takeAll = this.db.transaction((buckets: Bucket[]) =>
      buckets.map((b) => (this.takeOne.get(b.key, b.limit, b.expiresAt) as number | undefined) ?? null),
    );
    this.takeAll = (buckets) => takeAll.immediate(buckets);
  }

  /** The side file of the SQLite database at `dbPath`. */
  static besideDatabase(dbPath: string): SqliteFileCounters {
    return new SqliteFileCounters(`${dbPath}-ratelimits`);
  }

  async take(buckets: Bucket[]): Promise<(number | null)[]> {
    return this.takeAll(buckets);
  }

  async giveBack(keys: string[]): Promise<void> {
    for (const k of keys) this.giveOne.run(k);
  }

  async prune(now: number): Promise<number> {
    return this.pruneOld.run(now).changes;
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
