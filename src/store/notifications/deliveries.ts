import type { Insertable, Selectable } from 'kysely';
import type { Db, Dialect, Tx } from '../db.js';
import { lockRows } from '../locks.js';
import type { NotificationDeliveriesTable } from '../schema.js';

export type DeliveryRow = Selectable<NotificationDeliveriesTable>;
/** What a sender needs of a claimed delivery. */
export type ClaimedRow = Pick<DeliveryRow, 'id' | 'owner_uuid' | 'channel' | 'target_uuid' | 'address' | 'type' | 'message_id' | 'content' | 'attempts'>;

/**
 * The durable delivery queue (notification_deliveries): one row per e-mail or webhook call. The policy
 * (lease, backoff, when to give up) is the caller's (resources/notifications/deliveries.ts); this is its SQL.
 */
export class DeliveryQueries {
  constructor(private readonly dialect: Dialect) {}

  async insert(tx: Tx, row: Omit<Insertable<NotificationDeliveriesTable>, 'id'>): Promise<void> {
    await tx.insertInto('notification_deliveries').values(row).execute();
  }

  /** When (epoch ms) the first pending delivery falls due, a leased one's retry included (null: none). */
  async nextDue(db: Db): Promise<number | null> {
    const row = await db
      .selectFrom('notification_deliveries')
      .select((eb) => eb.fn.min<number>('due_ms').as('due'))
      .where('state', '=', 'pending')
      .executeTakeFirst();
    return row?.due === null || row?.due === undefined ? null : Number(row.due);
  }

  /**
   * Up to `limit` pending deliveries due at `nowMs`, taken for this process: locked (SKIP LOCKED on
   * PostgreSQL), their due time moved to `leaseUntilMs` and their attempt counted. Answers them with the
   * attempt counted.
   */
  async claimDue(tx: Tx, nowMs: number, leaseUntilMs: number, limit: number): Promise<ClaimedRow[]> {
    const q = tx
      .selectFrom('notification_deliveries')
      .select(['id', 'owner_uuid', 'channel', 'target_uuid', 'address', 'type', 'message_id', 'content', 'attempts'])
      .where('state', '=', 'pending')
      .where('due_ms', '<=', nowMs)
      .orderBy('due_ms')
      .orderBy('id')
      .limit(limit);
    const rows = await lockRows(this.dialect, q, { skipLocked: true }).execute();
    if (!rows.length) return [];
    await tx
      .updateTable('notification_deliveries')
      .set((eb) => ({ due_ms: leaseUntilMs, attempts: eb('attempts', '+', 1) }))
      .where(
        'id',
        'in',
        rows.map((r) => r.id),
      )
      .execute();
    return rows.map((r) => ({ ...r, attempts: r.attempts + 1 }));
  }

  /** Sets a delivery's outcome: sent, retried at `due_ms`, or given up. */
  async setOutcome(tx: Tx, id: number, outcome: Pick<DeliveryRow, 'state' | 'last_error'> & Partial<Pick<DeliveryRow, 'sent_at' | 'due_ms'>>): Promise<void> {
    await tx.updateTable('notification_deliveries').set(outcome).where('id', '=', id).execute();
  }

  /** The latest `limit` deliveries to one target (a webhook's `deliveries/` view), newest first. */
  async recentOf(
    db: Db | Tx,
    target: string,
    limit: number,
  ): Promise<Pick<DeliveryRow, 'message_id' | 'type' | 'state' | 'attempts' | 'last_error' | 'created_at' | 'sent_at' | 'due_ms'>[]> {
    return db
      .selectFrom('notification_deliveries')
      .select(['message_id', 'type', 'state', 'attempts', 'last_error', 'created_at', 'sent_at', 'due_ms'])
      .where('target_uuid', '=', target)
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
  }
}
