import type { Insertable } from 'kysely';
import type { Db, Tx } from '../db.js';
import type { SessionsTable } from '../schema.js';

/** A live session's row with what its user is now. */
export interface SessionUser {
  uuid: string;
  email: string;
  state: string;
  csrf_token: string;
  expires_ms: number;
}

/**
 * Cookie sessions (`sessions`), keyed by the SHA-256 of the session id. The rules (lifetime, id format,
 * what ending a session announces) are resources/accounts/sessions.ts's; this is their SQL.
 */
export class SessionQueries {
  async insert(db: Db | Tx, row: Insertable<SessionsTable>): Promise<void> {
    await db.insertInto('sessions').values(row).execute();
  }

  /** Forgets sessions that ended at or before `nowMs`. */
  async deleteExpired(db: Db | Tx, nowMs: number): Promise<void> {
    await db.deleteFrom('sessions').where('expires_ms', '<=', nowMs).execute();
  }

  /** The session with this id hash and its user (expired or not: the caller compares with its clock). */
  async find(db: Db | Tx, idHash: string): Promise<SessionUser | undefined> {
    const row = await db
      .selectFrom('sessions')
      .innerJoin('users', 'users.uuid', 'sessions.user_uuid')
      .select(['users.uuid', 'users.email', 'users.state', 'sessions.csrf_token', 'sessions.expires_ms'])
      .where('sessions.id_hash', '=', idHash)
      .executeTakeFirst();
    return row && { ...row, expires_ms: Number(row.expires_ms) };
  }

  async delete(db: Db | Tx, idHash: string): Promise<void> {
    await db.deleteFrom('sessions').where('id_hash', '=', idHash).execute();
  }

  /** Ends every session of a user; answers how many. */
  async deleteOfUser(db: Db | Tx, userUuid: string): Promise<number> {
    const gone = await db.deleteFrom('sessions').where('user_uuid', '=', userUuid).executeTakeFirst();
    return Number(gone.numDeletedRows);
  }

  /** Ends every session; answers the user of each. */
  async deleteAll(db: Db | Tx): Promise<string[]> {
    return (await db.deleteFrom('sessions').returning('user_uuid').execute()).map((g) => g.user_uuid);
  }
}
