import { sql } from 'kysely';
import type { Db, Tx } from '../db.js';
import type { ArgOf } from '../shapes.js';
import type { ResourceSql } from './sql.js';

/**
 * Kept counts of each owner's rows per kind (`resource_counts`): a list's `total_count` is one row read
 * instead of a count over the owner's index, and a limit (servers per account) is checked on it. Rows
 * note their inserts and deletes here; the changes are written once, last thing before the commit.
 */
export class ResourceCounts {
  /** Per open transaction: the change of each (kind, owner) count, written just before commit (flush). */
  private readonly pending = new WeakMap<Tx, Map<string, number>>();

  constructor(private readonly sql: ResourceSql) {}

  /** An insert (+1) or delete (-1) of an owner's row of a kind, in this transaction. */
  note(tx: Tx, kind: string, owner: string | null, by: number): void {
    let m = this.pending.get(tx);
    if (!m) this.pending.set(tx, (m = new Map()));
    const key = `${kind}\n${owner ?? ''}`;
    m.set(key, (m.get(key) ?? 0) + by);
  }

  /**
   * Writes the transaction's count changes, last thing before it commits (Store.transaction calls this).
   * Late and in one sorted order: on PostgreSQL a count row stays locked until commit, and every
   * transaction taking them in the same order, after all its other locks, can never deadlock on them.
   */
  async flush(tx: Tx): Promise<void> {
    const m = this.pending.get(tx);
    if (!m) return;
    this.pending.delete(tx);
    for (const key of [...m.keys()].sort()) {
      const by = m.get(key)!;
      if (by === 0) continue;
      const [kind, owner] = key.split('\n');
      await this.sql.shaped(
        tx,
        'counts.add',
        (arg: ArgOf<'kind' | 'owner' | 'by'>) =>
          tx
            .insertInto('resource_counts')
            .values({ kind: arg('kind'), owner_uuid: arg('owner'), n: arg('by') })
            .onConflict((oc) =>
              oc
                .columns(['kind', 'owner_uuid'])
                .doUpdateSet((eb) => ({ n: eb('resource_counts.n', '+', eb.ref('excluded.n')), version: eb('resource_counts.version', '+', 1) })),
            ),
        { kind, owner, by },
      );
    }
  }

  /**
   * How many objects of a kind an owner will have when this transaction commits, with no other
   * transaction able to change that until then (a limit is checked on it). On PostgreSQL an advisory
   * lock per (kind, owner), held to commit, makes the checkers take turns; SQLite runs one transaction at
   * a time. Take it before any row lock the check needs, in one order (see StoredHooks.beforeCreate).
   */
  async forLimit(tx: Tx, kind: string, owner: string): Promise<number> {
    if (this.sql.dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext(${`count/${kind}/${owner}`}))`.execute(tx);
    const pending = this.pending.get(tx)?.get(`${kind}\n${owner}`) ?? 0;
    return (await this.of(tx, kind, owner)) + pending;
  }

  /** How many objects of a kind an owner has (null: the ownerless library). */
  async of(db: Db | Tx, kind: string, owner: string | null): Promise<number> {
    return (await this.row(db, kind, owner)).n;
  }

  /** The kept count and its version (raised with every insert or delete of the kind by the owner). */
  async row(db: Db | Tx, kind: string, owner: string | null): Promise<{ n: number; version: number }> {
    const rows = await this.sql.shaped<{ n: number; version: number }, 'kind' | 'owner'>(
      db,
      'counts.get',
      (arg) => db.selectFrom('resource_counts').select(['n', 'version']).where('kind', '=', arg('kind')).where('owner_uuid', '=', arg('owner')),
      { kind, owner: owner ?? '' },
    );
    return { n: Number(rows[0]?.n ?? 0), version: Number(rows[0]?.version ?? 0) };
  }
}
