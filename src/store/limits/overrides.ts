import type { Db, Tx } from '../db.js';

/**
 * Accounts' own rate limits (`rate_limit_overrides`): one row per account that has one, its rules as the
 * canonical rule text. What the text means is resources/accounts/rate-limits.ts's; this is its SQL.
 */
export class OverrideQueries {
  /** An account's stored override text, or undefined (none). */
  async of(db: Db | Tx, userUuid: string): Promise<string | undefined> {
    return (await db.selectFrom('rate_limit_overrides').select('rules').where('user_uuid', '=', userUuid).executeTakeFirst())?.rules;
  }

  async set(db: Db | Tx, userUuid: string, rules: string, updatedAt: string): Promise<void> {
    await db
      .insertInto('rate_limit_overrides')
      .values({ user_uuid: userUuid, rules, updated_at: updatedAt })
      .onConflict((oc) => oc.column('user_uuid').doUpdateSet({ rules, updated_at: updatedAt }))
      .execute();
  }

  async clear(db: Db | Tx, userUuid: string): Promise<void> {
    await db.deleteFrom('rate_limit_overrides').where('user_uuid', '=', userUuid).execute();
  }
}
