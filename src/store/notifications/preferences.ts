import type { Db, Tx } from '../db.js';

/** One stored preference: a contact's choice for a type on a medium. */
export interface PreferenceKey {
  contact: string;
  medium: string;
  type: string;
}

/**
 * Notification preferences (notification_preferences): only values that differ from the default are
 * stored (the default is the caller's: resources/notifications/types.ts).
 */
export class PreferenceQueries {
  /** The stored values of these contacts. */
  async of(db: Db | Tx, contacts: readonly string[]): Promise<(PreferenceKey & { value: boolean })[]> {
    if (!contacts.length) return [];
    const rows = await db
      .selectFrom('notification_preferences')
      .selectAll()
      .where('contact_uuid', 'in', [...contacts])
      .execute();
    return rows.map((r) => ({ contact: r.contact_uuid, medium: r.medium, type: r.type, value: r.value === 1 }));
  }

  /** Sets one preference: `value` stored, or null to keep none (the default applies). */
  async set(tx: Tx, key: PreferenceKey, value: boolean | null): Promise<void> {
    await tx
      .deleteFrom('notification_preferences')
      .where('contact_uuid', '=', key.contact)
      .where('medium', '=', key.medium)
      .where('type', '=', key.type)
      .execute();
    if (value !== null)
      await tx
        .insertInto('notification_preferences')
        .values({ contact_uuid: key.contact, medium: key.medium, type: key.type, value: value ? 1 : 0 })
        .execute();
  }

  /** A contact's preferences, when the contact is deleted. */
  async deleteOfContact(tx: Tx, contact: string): Promise<void> {
    await tx.deleteFrom('notification_preferences').where('contact_uuid', '=', contact).execute();
  }
}
