import type { Tx } from '../db.js';

/**
 * The two reads of the `users` table that resource code makes: an ACL's grantee looked up by uuid or
 * e-mail, and the profile's clone naming. They belong with the accounts family's SQL (store.accounts,
 * being built beside this); they wait here, named for what they read, to move there after the merge.
 */
export class UserReads {
  /** The user with this uuid, or else with this e-mail (an ACL grantee as a request names it). */
  async byUuidOrEmail(tx: Tx, who: { uuid?: string; email?: string }): Promise<{ uuid: string; email: string } | undefined> {
    let q = tx.selectFrom('users').select(['uuid', 'email']);
    q = who.uuid ? q.where('uuid', '=', who.uuid) : q.where('email', '=', who.email!);
    return q.executeTakeFirst();
  }

  /** A user's profile as stored (JSON text); throws when there is no such user. */
  async profileText(tx: Tx, uuid: string): Promise<string> {
    return (await tx.selectFrom('users').select('profile').where('uuid', '=', uuid).executeTakeFirstOrThrow()).profile;
  }
}
