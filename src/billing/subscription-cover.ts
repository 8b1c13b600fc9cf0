import type { Services } from '../core/context.js';
import type { Db, Tx } from '../store/db.js';

/**
 * What subscriptions cover (reference §16.8, §16.9): per account and usage key, what the subscriptions in
 * force at a moment leave to cover (read by every billing poll and by `/currentusage/`); the traffic
 * subscriptions being consumed (the oldest in force per account and resource); and traffic covered, used
 * up in order. A subscription ending at a poll still covered the cycle it closes: callers ask at poll − 1 ms.
 */
type S = Pick<Services, 'store'>;

/** What active subscriptions cover at `at`, per account and usage key: one grouped read. */
export async function subscribedAt(db: Db | Tx, s: S, at: Date, owner?: string): Promise<Map<string, Map<string, number>>> {
  const out = new Map<string, Map<string, number>>();
  for (const r of await s.store.billing.subscriptions.coveredAt(db, at.getTime(), owner)) {
    let mine = out.get(r.owner_uuid);
    if (!mine) out.set(r.owner_uuid, (mine = new Map()));
    mine.set(r.resource, r.amount);
  }
  return out;
}

/**
 * The traffic subscriptions being consumed now, one per (account, resource): the oldest in its window and
 * not used up. `owner` limits it to one account.
 */
export function consumingNow(db: Db | Tx, s: S, at: Date, owner?: string): Promise<Set<number>> {
  return s.store.billing.subscriptions.consuming(db, at.getTime(), owner);
}

/** Traffic covered by an account's traffic subscriptions: used up in order, the oldest first. */
export async function consumeVolume(tx: Tx, s: S, owner: string, resource: string, amount: number, at: Date): Promise<void> {
  let left = amount;
  for (const r of await s.store.billing.subscriptions.inForceOf(tx, owner, resource, at.getTime())) {
    if (left <= 0) break;
    const take = Math.min(r.amount - r.consumed, left);
    await s.store.billing.subscriptions.setConsumed(tx, r.id, r.consumed + take);
    left -= take;
  }
}
