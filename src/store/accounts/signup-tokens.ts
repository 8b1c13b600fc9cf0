import type { Insertable } from 'kysely';
import type { Db, Tx } from '../db.js';
import type { SignupTokensTable } from '../schema.js';

/**
 * One-time links (`signup_tokens`, by the SHA-256 of the token): sign-up confirmation and password reset.
 * The rules (lifetime, format, one live link per user) are resources/accounts/signup.ts's; this is their SQL.
 */
export class SignupTokenQueries {
  /** Makes `row` the user's only link, dropping their earlier links and every expired one. */
  async replace(tx: Tx, row: Insertable<SignupTokensTable>, nowMs: number): Promise<void> {
    await tx
      .deleteFrom('signup_tokens')
      .where((eb) => eb.or([eb('user_uuid', '=', row.user_uuid), eb('expires_ms', '<=', nowMs)]))
      .execute();
    await tx.insertInto('signup_tokens').values(row).execute();
  }

  /** The user a link is for while it is valid at `nowMs`. */
  async userOf(db: Db | Tx, tokenHash: string, nowMs: number): Promise<string | undefined> {
    const row = await db.selectFrom('signup_tokens').select('user_uuid').where('token_hash', '=', tokenHash).where('expires_ms', '>', nowMs).executeTakeFirst();
    return row?.user_uuid;
  }

  /** Uses a valid link up (one atomic delete: two submissions cannot both use it); answers its user. */
  async consume(db: Db | Tx, tokenHash: string, nowMs: number): Promise<string | undefined> {
    const used = await db
      .deleteFrom('signup_tokens')
      .where('token_hash', '=', tokenHash)
      .where('expires_ms', '>', nowMs)
      .returning('user_uuid')
      .executeTakeFirst();
    return used?.user_uuid;
  }

  async deleteOfUser(db: Db | Tx, userUuid: string): Promise<void> {
    await db.deleteFrom('signup_tokens').where('user_uuid', '=', userUuid).execute();
  }
}
