import type { Db, Dialect, Tx } from './db.js';
import { lockRows } from './locks.js';

/**
 * The deployment's own values (`settings`, key -> text; reset keeps them): the Digest secret
 * (http/auth/digest.ts), the shared clock's offset (admin/clock.ts), the demo login (resources/users/users.ts).
 * What a value means is its owner's; this is their SQL.
 */
export class SettingQueries {
  constructor(private readonly dialect: Dialect) {}

  /** A value, or undefined when none is stored. */
  async get(db: Db | Tx, key: string): Promise<string | undefined> {
    return (await db.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst())?.value;
  }

  /** Stores a value unless one is there already (the first process to insert wins). */
  async insertIfAbsent(db: Db | Tx, key: string, value: string): Promise<void> {
    await db
      .insertInto('settings')
      .values({ key, value })
      .onConflict((oc) => oc.column('key').doNothing())
      .execute();
  }

  /** Stores a value, replacing any. */
  async put(db: Db | Tx, key: string, value: string): Promise<void> {
    await db
      .insertInto('settings')
      .values({ key, value })
      .onConflict((oc) => oc.column('key').doUpdateSet({ value }))
      .execute();
  }

  /** A value read and locked until the transaction ends (it must exist: insertIfAbsent first). */
  async lock(tx: Tx, key: string): Promise<string> {
    return (await lockRows(this.dialect, tx.selectFrom('settings').select('value').where('key', '=', key)).executeTakeFirstOrThrow()).value;
  }

  /** Removes a value if it contains `fragment` (the demo login of an account whose password changed). */
  async deleteIfContains(db: Db | Tx, key: string, fragment: string): Promise<void> {
    await db.deleteFrom('settings').where('key', '=', key).where('value', 'like', `%${fragment}%`).execute();
  }
}
