import type { Dialect, Tx } from '../db.js';
import { lockRows } from '../locks.js';

/** An outbox event as the fan-out reads it. */
export interface OutboxRow {
  seq: number;
  type: string;
  owner_uuid: string | null;
  payload: string;
  created_at: string;
}

/**
 * The fan-out's bookkeeping: which outbox events (event_outbox) are already turned into notifications
 * (notification_fanout, keyed by the event's seq, so an event is fanned out once even across processes).
 */
export class FanoutQueries {
  constructor(private readonly dialect: Dialect) {}

  /**
   * Up to `limit` events of `types` not yet fanned out, oldest first, locked for this transaction (on
   * PostgreSQL SKIP LOCKED: another process takes the next ones).
   */
  async claim(tx: Tx, types: readonly string[], limit: number): Promise<OutboxRow[]> {
    const q = tx
      .selectFrom('event_outbox as o')
      .select(['o.seq', 'o.type', 'o.owner_uuid', 'o.payload', 'o.created_at'])
      .where('o.type', 'in', [...types])
      .where(({ not, exists, selectFrom }) => not(exists(selectFrom('notification_fanout as d').select('d.seq').whereRef('d.seq', '=', 'o.seq'))))
      .orderBy('o.seq')
      .limit(limit);
    return lockRows(this.dialect, q, { skipLocked: true }).execute();
  }

  async markDone(tx: Tx, seq: number): Promise<void> {
    await tx.insertInto('notification_fanout').values({ seq }).execute();
  }
}
