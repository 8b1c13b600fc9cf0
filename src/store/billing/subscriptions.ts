import type { Insertable, Selectable } from 'kysely';
import type { Db, Tx } from '../db.js';
import type { SubscriptionsTable } from '../schema.js';

/**
 * Subscriptions bought (`subscriptions`): what they cover at a moment (every billing poll reads it), the
 * traffic they have left, their extension chains, and the few columns that change after purchase.
 */
export type SubscriptionRow = Selectable<SubscriptionsTable>;

/** A row as read: PostgreSQL hands bigint columns back as strings; the code works with numbers. */
export const subscriptionRow = (r: SubscriptionRow): SubscriptionRow => ({
  ...r,
  id: Number(r.id),
  amount: Number(r.amount),
  parent_id: r.parent_id === null ? null : Number(r.parent_id),
  root_id: r.root_id === null ? null : Number(r.root_id),
  consumed: Number(r.consumed ?? 0),
  start_ms: Number(r.start_ms),
  end_ms: Number(r.end_ms),
});

export class SubscriptionQueries {
  /** Subscriptions in their window at `t` (ms) with something left: `consumed < amount` (time-based ones have 0 consumed). */
  private inForce(db: Db | Tx, t: number, owner?: string) {
    let q = db.selectFrom('subscriptions').where('start_ms', '<=', t).where('end_ms', '>', t).whereRef('consumed', '<', 'amount');
    if (owner !== undefined) q = q.where('owner_uuid', '=', owner);
    return q;
  }

  /** What is left of the subscriptions in force at `t`, summed per (account, resource). */
  async coveredAt(db: Db | Tx, t: number, owner?: string): Promise<{ owner_uuid: string; resource: string; amount: number }[]> {
    const rows = await this.inForce(db, t, owner)
      .select((eb) => ['owner_uuid', 'resource', eb.fn.sum<number>(eb('amount', '-', eb.ref('consumed'))).as('amount')])
      .groupBy(['owner_uuid', 'resource'])
      .execute();
    return rows.map((r) => ({ ...r, amount: Number(r.amount) }));
  }

  /** The oldest traffic subscription in force at `t` per (account, resource): the ones being consumed. */
  async consuming(db: Db | Tx, t: number, owner?: string): Promise<Set<number>> {
    const rows = await this.inForce(db, t, owner)
      .select((eb) => ['owner_uuid', 'resource', eb.fn.min<number>('id').as('id')])
      // Traffic: `tx`, `tx_…`.
      .where((eb) => eb.or([eb('resource', '=', 'tx'), eb('resource', 'like', 'tx_%')]))
      .groupBy(['owner_uuid', 'resource'])
      .execute();
    return new Set(rows.map((r) => Number(r.id)));
  }

  /** An account's subscriptions of `resource` in force at `t`, oldest first, with what they have used. */
  async inForceOf(tx: Tx, owner: string, resource: string, t: number): Promise<{ id: number; amount: number; consumed: number }[]> {
    const rows = await this.inForce(tx, t, owner).select(['id', 'amount', 'consumed']).where('resource', '=', resource).orderBy('id').execute();
    return rows.map((r) => ({ id: Number(r.id), amount: Number(r.amount), consumed: Number(r.consumed) }));
  }

  async setConsumed(tx: Tx, id: number, consumed: number): Promise<void> {
    await tx.updateTable('subscriptions').set({ consumed }).where('id', '=', id).execute();
  }

  async insert(tx: Tx, row: Omit<Insertable<SubscriptionsTable>, 'id' | 'consumed'>): Promise<SubscriptionRow> {
    return subscriptionRow(await tx.insertInto('subscriptions').values(row).returningAll().executeTakeFirstOrThrow());
  }

  async byId(db: Db | Tx, id: number): Promise<SubscriptionRow | undefined> {
    const row = await db.selectFrom('subscriptions').selectAll().where('id', '=', id).executeTakeFirst();
    return row && subscriptionRow(row);
  }

  /** An account's subscription, or undefined. */
  async own(db: Db | Tx, owner: string, id: number): Promise<SubscriptionRow | undefined> {
    const row = await db.selectFrom('subscriptions').selectAll().where('owner_uuid', '=', owner).where('id', '=', id).executeTakeFirst();
    return row && subscriptionRow(row);
  }

  async ownerOf(db: Db | Tx, id: number): Promise<string | undefined> {
    return (await db.selectFrom('subscriptions').select('owner_uuid').where('id', '=', id).executeTakeFirst())?.owner_uuid;
  }

  /** Whether the subscription was extended (a later one names it as its parent). */
  async extended(db: Db | Tx, id: number): Promise<boolean> {
    return (await db.selectFrom('subscriptions').select('id').where('parent_id', '=', id).executeTakeFirst()) !== undefined;
  }

  /** The chain whose first subscription is `root`, first to last. */
  async chain(db: Db | Tx, root: number): Promise<SubscriptionRow[]> {
    const rows = await db
      .selectFrom('subscriptions')
      .selectAll()
      .where((eb) => eb.or([eb('id', '=', root), eb('root_id', '=', root)]))
      .orderBy('id')
      .execute();
    return rows.map(subscriptionRow);
  }

  /** The chains whose first subscriptions are `roots`, each first to last, by root. */
  async chains(db: Db | Tx, roots: readonly number[]): Promise<Map<number, SubscriptionRow[]>> {
    const out = new Map<number, SubscriptionRow[]>(roots.map((r) => [r, []]));
    if (!roots.length) return out;
    const rows = await db
      .selectFrom('subscriptions')
      .selectAll()
      .where((eb) => eb.or([eb('id', 'in', [...roots]), eb('root_id', 'in', [...roots])]))
      .orderBy('id')
      .execute();
    for (const r of rows.map(subscriptionRow)) out.get(r.root_id ?? r.id)?.push(r);
    return out;
  }

  /** The extensions made directly of these subscriptions, oldest first. */
  async children(db: Db | Tx, ids: readonly number[]): Promise<SubscriptionRow[]> {
    if (!ids.length) return [];
    const rows = await db
      .selectFrom('subscriptions')
      .selectAll()
      .where('parent_id', 'in', [...ids])
      .orderBy('id')
      .execute();
    return rows.map(subscriptionRow);
  }

  /** The object (an IP, a VLAN) a subscription brought. */
  async setObject(tx: Tx, id: number, object: string): Promise<void> {
    await tx.updateTable('subscriptions').set({ subscribed_object: object }).where('id', '=', id).execute();
  }

  async setAutoRenew(tx: Tx, id: number, autoRenew: boolean): Promise<void> {
    await tx
      .updateTable('subscriptions')
      .set({ auto_renew: autoRenew ? 1 : 0 })
      .where('id', '=', id)
      .execute();
  }
}
