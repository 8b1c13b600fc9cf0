import type { Db, Tx } from '../db.js';
import type { ResourceSql } from './sql.js';

type Seqs = { seq: number; updated_at: string }[];

/**
 * The rows an ACL shares with a caller, kept between requests on SQLite: reading them costs one walk of
 * every shared row (1,000 shares made a 20-row page 7.5x dearer than the same page with none), and they
 * change only when ACLs, tag membership or the set of rows change. Each of those writes raises the
 * `sharing` counter in its own transaction (migration 0050's triggers, whoever writes), so one read of
 * the counter tells whether a kept set still holds.
 *
 * The counter is read before the rows, each read its own snapshot: a write committed in between makes
 * the rows newer than the counter they are kept under, and the next read of the counter misses. Nothing
 * is kept from inside a transaction (it may roll back). Only the seqs are kept, in creation order: a
 * page reads its rows (and their `updated_at`) afresh. `STRATUS_ANSWER_CACHE_VERIFY=1` reads the rows
 * anyway and fails the request when the kept ones differ.
 */
export class SharedSeqs {
  private readonly kept = new Map<string, { n: number; rows: Seqs }>();
  private rowsKept = 0;
  private readonly verify = process.env.STRATUS_ANSWER_CACHE_VERIFY === '1';

  constructor(
    private readonly sql: ResourceSql,
    /** At most this many rows over all kept sets (a set larger than a quarter of it is not kept). */
    readonly maxRows = 200_000,
  ) {}

  /** Whether sets read through `db` may be kept: SQLite, outside a transaction. */
  applies(db: Db | Tx): boolean {
    return this.sql.dialect === 'sqlite' && !db.isTransaction && this.maxRows > 0;
  }

  /** The shared rows of `key` (a shape and a caller) in creation order, kept or read by `read`. */
  async get(db: Db, key: string, read: () => Promise<Seqs>): Promise<readonly Readonly<Seqs[number]>[]> {
    const n = await this.counter(db);
    const hit = n === undefined ? undefined : this.kept.get(key);
    if (hit && hit.n === n) {
      if (this.verify) await this.check(db, key, hit, read);
      this.kept.delete(key);
      this.kept.set(key, hit);
      return hit.rows;
    }
    const rows = (await read()).sort((a, b) => a.seq - b.seq);
    if (n !== undefined) this.keep(key, n, rows);
    return rows;
  }

  /** The `sharing` counter now; undefined without its row (a database imported without one: nothing is kept). */
  private async counter(db: Db): Promise<number | undefined> {
    const rows = await this.sql.shaped<{ n: number | string }, never>(
      db,
      'change-counters.sharing',
      () => db.selectFrom('change_counters').select('n').where('scope', '=', 'sharing'),
      {},
    );
    return rows[0] === undefined ? undefined : Number(rows[0].n);
  }

  private keep(key: string, n: number, rows: Seqs): void {
    const old = this.kept.get(key);
    if (old) {
      this.kept.delete(key);
      this.rowsKept -= old.rows.length;
    }
    if (rows.length > this.maxRows / 4) return;
    // Oldest first out until the new set fits.
    for (const [k, v] of this.kept) {
      if (this.rowsKept + rows.length <= this.maxRows) break;
      this.kept.delete(k);
      this.rowsKept -= v.rows.length;
    }
    this.kept.set(key, { n, rows });
    this.rowsKept += rows.length;
  }

  /** Verify mode: the kept set against a fresh read; a write between the two (the counter moved) is no verdict. */
  private async check(db: Db, key: string, kept: { n: number; rows: Seqs }, read: () => Promise<Seqs>): Promise<void> {
    const fresh = (await read()).map((r) => r.seq).sort((a, b) => a - b);
    if (fresh.join(',') === kept.rows.map((r) => r.seq).join(',') || (await this.counter(db)) !== kept.n) return;
    throw new Error(`verify: the kept shared rows of ${key} are stale (${kept.rows.length} kept, ${fresh.length} now)`);
  }
}
