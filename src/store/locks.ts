import type { Dialect } from './db.js';
import type { AnyQuery } from './repository.js';

/**
 * A select that locks the rows it reads until the transaction ends (`FOR UPDATE`, optionally
 * `SKIP LOCKED` so concurrent workers take different rows). SQLite runs one transaction at a time on
 * its connection: the plain select is already exclusive there. One place for the engines' difference:
 * `Store.locking` and the table families use it.
 */
export function lockRows<Q extends AnyQuery>(dialect: Dialect, q: Q, opts: { skipLocked?: boolean } = {}): Q {
  if (dialect !== 'postgres') return q;
  const locked = q.forUpdate() as Q;
  return opts.skipLocked ? (locked.skipLocked() as Q) : locked;
}
