import type { Insertable, Selectable } from 'kysely';
import type { Db, Tx } from '../db.js';
import type { NotificationsTable } from '../schema.js';

export type FeedRow = Selectable<NotificationsTable>;

/** What a page of the feed is filtered by: AND-groups of types (each an OR), and read / unread groups. */
export interface FeedFilter {
  owner: string;
  /** Each group: the entry's type is one of these. */
  types: readonly (readonly string[])[];
  /** Each group: true = read only, false = unread only (a group that asks for both, or neither, is not given). */
  read: readonly boolean[];
}

/** The notification feed (`notifications`, the `api` medium): an account's entries, newest first. */
export class FeedQueries {
  async insert(tx: Tx, row: Omit<Insertable<NotificationsTable>, 'seq'>): Promise<void> {
    await tx.insertInto('notifications').values(row).execute();
  }

  /** One page (limit 0: all) and the count of every entry the filter matches. */
  async page(db: Db | Tx, filter: FeedFilter, offset: number, limit: number): Promise<{ total: number; rows: FeedRow[] }> {
    let q = db.selectFrom('notifications').where('owner_uuid', '=', filter.owner);
    for (const values of filter.types) q = q.where('type', 'in', [...values]);
    for (const read of filter.read) q = read ? q.where('read_at', 'is not', null) : q.where('read_at', 'is', null);
    const total = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    let page = q.selectAll().orderBy('seq', 'desc').offset(offset);
    if (limit > 0) page = page.limit(limit);
    else page = page.limit(1_000_000_000);
    return { total: Number(total.n), rows: await page.execute() };
  }

  async get(db: Db | Tx, owner: string, uuid: string): Promise<FeedRow | undefined> {
    return db.selectFrom('notifications').selectAll().where('uuid', '=', uuid).where('owner_uuid', '=', owner).executeTakeFirst();
  }

  /** Marks an entry read (at `readAt`) or unread (null); false when the owner has no such entry. */
  async setRead(db: Db | Tx, owner: string, uuid: string, readAt: string | null): Promise<boolean> {
    const res = await db.updateTable('notifications').set({ read_at: readAt }).where('uuid', '=', uuid).where('owner_uuid', '=', owner).executeTakeFirst();
    return Number(res.numUpdatedRows) > 0;
  }
}
