import type { Db, Tx } from '../db.js';

/**
 * What notifications read of accounts (the users table): the main contact shows and follows the account's
 * e-mail and is named after its profile; the fan-out skips events of accounts that are gone.
 */
export class AccountReads {
  /** The account's e-mail and profile (JSON text), or undefined when there is no such account. */
  async account(db: Db | Tx, uuid: string): Promise<{ email: string; profile: string } | undefined> {
    return db.selectFrom('users').select(['email', 'profile']).where('uuid', '=', uuid).executeTakeFirst();
  }

  /** The account's e-mail only (the fan-out's read per event). */
  async email(db: Db | Tx, uuid: string): Promise<string | undefined> {
    return (await db.selectFrom('users').select('email').where('uuid', '=', uuid).executeTakeFirst())?.email;
  }

  /** Each account's e-mail, by uuid. */
  async emails(db: Db | Tx, uuids: readonly string[]): Promise<Map<string, string>> {
    if (!uuids.length) return new Map();
    const rows = await db
      .selectFrom('users')
      .select(['uuid', 'email'])
      .where('uuid', 'in', [...uuids])
      .execute();
    return new Map(rows.map((r) => [r.uuid, r.email]));
  }
}
