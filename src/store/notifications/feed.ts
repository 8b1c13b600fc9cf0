import type { Insertable } from 'kysely';
import type { Db, Tx } from '../db.js';
import type { NotificationsTable } from '../schema.js';

/** The notification feed's writes (`notifications`, the `api` medium); its pages are core/table-kind.ts's. */
export class FeedQueries {
  async insert(tx: Tx, row: Omit<Insertable<NotificationsTable>, 'seq'>): Promise<void> {
    await tx.insertInto('notifications').values(row).execute();
  }

  /** Marks an entry read (at `readAt`) or unread (null); false when the owner has no such entry. */
  async setRead(db: Db | Tx, owner: string, uuid: string, readAt: string | null): Promise<boolean> {
    const res = await db.updateTable('notifications').set({ read_at: readAt }).where('uuid', '=', uuid).where('owner_uuid', '=', owner).executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }
}
