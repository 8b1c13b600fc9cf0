import { sql, type RawBuilder } from 'kysely';
import type { Db, Tx } from '../db.js';
import type { ResourceSql } from './sql.js';
import { isSnapshot } from '../snapshots.js';

type Seqs = { seq: number }[];
type Kept = { n: number; rows: Seqs };

/**
 * The rows an ACL shares with a caller, kept between requests: reading them costs one walk of every
 * shared row (1,000 shares made a 20-row page 4-7x dearer than the same page with none), and they change
 * only when ACLs, tag membership or the set of rows change. Each of those writes raises the `sharing`
 * counter in its own transaction (SQLite: migration 0050's triggers; PostgreSQL: 0100's, a row per backend
 * summed), whoever writes, so one read of the counter tells whether a kept set still holds.
 *
 * SQLite reads the counter before the rows, each its own snapshot: a write committed in between makes the
 * rows newer than the counter they are kept under, and the next read of the counter misses. PostgreSQL reads
 * both in one statement (one snapshot, one round trip), and checks a kept set with a column of the page's
 * own statement (`counterSql`, `confirm`): a hit costs no statement of its own. Nothing is kept from inside
 * a transaction (it may roll back) but a read-only snapshot (Store.snapshot: a deep page reads the counter
 * and the rows in one). Only the seqs are kept, in creation order: a page reads its rows (and
 * their `updated_at`) afresh. `STRATUS_ANSWER_CACHE_VERIFY=1` reads the rows anyway and fails the request
 * when the kept ones differ.
 */
export class SharedSeqs {
  private readonly kept = new Map<string, Kept>();
  private rowsKept = 0;
  readonly verifying = process.env.STRATUS_ANSWER_CACHE_VERIFY === '1';

  constructor(
    private readonly sql: ResourceSql,
    /** At most this many rows over all kept sets (a set larger than a quarter of it is not kept). */
    readonly maxRows = 200_000,
    /**
     * At most this many sets: a caller shared nothing keeps an empty set, which no row bound counts, and a
     * set is kept per list shape and caller, so new accounts would add sets without end.
     */
    readonly maxSets = 10_000,
  ) {}

  /** Sets and rows kept (tests, the bench). */
  get size(): { sets: number; rows: number } {
    return { sets: this.kept.size, rows: this.rowsKept };
  }

  /** Whether sets read through `db` may be kept: outside a transaction, or in a read-only snapshot (nothing to roll back). */
  applies(db: Db | Tx): boolean {
    return (!db.isTransaction || isSnapshot(db)) && this.maxRows > 0;
  }

  /** The `sharing` counter as a scalar subquery (a column of another statement, see `confirm`). */
  counterSql(): RawBuilder<number> {
    return this.sql.dialect === 'postgres'
      ? sql<number>`(select coalesce(sum(n), 0)::bigint from change_counters where scope = 'sharing' or scope like 'sharing:%')`
      : sql<number>`(select n from change_counters where scope = 'sharing')`;
  }

  /** The shared rows of `key` (a shape and a caller) in creation order, kept or read by `read`. */
  async get(db: Db, key: string, read: () => Promise<Seqs>): Promise<readonly Readonly<Seqs[number]>[]> {
    return this.at(db, await this.counter(db), key, read);
  }

  /**
   * `get` with the counter already read (`counterSql`, a column of the caller's statement in the same
   * snapshot as `read`): the kept set when it still holds, or read by `read` and kept.
   */
  async at(db: Db, counter: unknown, key: string, read: () => Promise<Seqs>): Promise<readonly Readonly<Seqs[number]>[]> {
    const n = counter === undefined || counter === null ? undefined : Number(counter);
    const hit = n === undefined ? undefined : this.kept.get(key);
    if (hit && hit.n === n) {
      if (this.verifying) await this.check(db, key, hit, read);
      this.touch(key, hit);
      return hit.rows;
    }
    const rows = (await read()).sort((a, b) => a.seq - b.seq);
    if (n !== undefined) this.keep(key, n, rows);
    return rows;
  }

  /**
   * PostgreSQL: the kept set of `key` and the counter it was kept under, not yet checked: the caller's
   * statement reads `counterSql` and hands it to `confirm`.
   */
  peek(key: string): Readonly<Kept> | undefined {
    return this.kept.get(key);
  }

  /**
   * Whether the counter a statement read (`counterSql`) is `used`, the one the set it was given was kept
   * under; a stale set is dropped. Compared with what the statement used, not with what is kept now: another
   * request of the caller may have kept a newer set meanwhile, which says nothing of this statement's.
   */
  confirm(key: string, used: number, n: unknown): boolean {
    const hit = this.kept.get(key);
    const holds = n !== null && n !== undefined && Number(n) === used;
    if (hit?.n === used) {
      if (holds) this.touch(key, hit);
      else this.drop(key);
    }
    return holds;
  }

  /** PostgreSQL: the shared rows of `key` and the counter, read by one statement (`read`), and kept. */
  async load(key: string, read: () => Promise<{ n: unknown; seqs: readonly unknown[] }>): Promise<readonly Readonly<Seqs[number]>[]> {
    const { n, seqs } = await read();
    const rows = seqs.map((s) => ({ seq: Number(s) })).sort((a, b) => a.seq - b.seq);
    if (n !== null && n !== undefined) this.keep(key, Number(n), rows);
    return rows;
  }

  /** Verify mode: the kept set against a fresh read; a write between the two (the counter moved) is no verdict. */
  async check(db: Db, key: string, kept: Readonly<Kept>, read: () => Promise<Seqs>): Promise<void> {
    const fresh = (await read()).map((r) => Number(r.seq)).sort((a, b) => a - b);
    if (fresh.join(',') === kept.rows.map((r) => r.seq).join(',') || (await this.counter(db)) !== kept.n) return;
    throw new Error(`verify: the kept shared rows of ${key} are stale (${kept.rows.length} kept, ${fresh.length} now)`);
  }

  /** The `sharing` counter now; undefined without its row (a database imported without one: nothing is kept). */
  private async counter(db: Db): Promise<number | undefined> {
    const rows = await this.sql.shaped<{ n: number | string | null }, never>(
      db,
      'change-counters.sharing',
      () => db.selectNoFrom(this.counterSql().as('n')),
      {},
    );
    const n = rows[0]?.n;
    return n === undefined || n === null ? undefined : Number(n);
  }

  private drop(key: string): void {
    const old = this.kept.get(key);
    if (!old) return;
    this.kept.delete(key);
    this.rowsKept -= old.rows.length;
  }

  /** Most recently used last (the eviction order of `keep`). */
  private touch(key: string, hit: Kept): void {
    this.kept.delete(key);
    this.kept.set(key, hit);
  }

  private keep(key: string, n: number, rows: Seqs): void {
    this.drop(key);
    if (rows.length > this.maxRows / 4 || this.maxSets <= 0) return;
    // Oldest first out until the new set fits.
    for (const [k, v] of this.kept) {
      if (this.rowsKept + rows.length <= this.maxRows && this.kept.size < this.maxSets) break;
      this.kept.delete(k);
      this.rowsKept -= v.rows.length;
    }
    this.kept.set(key, { n, rows });
    this.rowsKept += rows.length;
  }
}
