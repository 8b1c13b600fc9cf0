import type { Tx } from './db.js';

/**
 * The transactions Store.snapshot opened: read only, so nothing read in them can be rolled back, and what
 * they read may be kept like a read outside a transaction (resources/shared-seqs.ts). Its own module: the
 * store's queries ask it, and db.ts (which opens them) imports those queries.
 */
const snapshots = new WeakSet<object>();

export function markSnapshot(tx: Tx): void {
  snapshots.add(tx);
}

export function isSnapshot(db: object): boolean {
  return snapshots.has(db);
}
