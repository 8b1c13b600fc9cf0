import type { Insertable, Selectable } from 'kysely';
import type { Db, Dialect, Tx } from '../db.js';
import { lockRows } from '../locks.js';
import type { UsersTable } from '../schema.js';

export type UserRow = Selectable<UsersTable>;

/** The fields a user's row presents as its profile (the profile itself is JSON text). */
export type ProfileRow = Pick<UserRow, 'uuid' | 'email' | 'state' | 'profile'>;

/**
 * Accounts (`users`): one row per user with its credentials (scrypt hash, Digest HA1), state and profile.
 * The rules (e-mail normalising, states, the opening balance) are resources/users/users.ts's; this is their SQL.
 */
export class UserQueries {
  constructor(private readonly dialect: Dialect) {}

  /** The user with this (normalised) e-mail. */
  byEmail(db: Db | Tx, email: string): Promise<UserRow | undefined> {
    return db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst();
  }

  byUuid(db: Db | Tx, uuid: string): Promise<UserRow | undefined> {
    return db.selectFrom('users').selectAll().where('uuid', '=', uuid).executeTakeFirst();
  }

  /** Every user, oldest first (then by e-mail). */
  list(db: Db | Tx): Promise<UserRow[]> {
    return db.selectFrom('users').selectAll().orderBy('created_at').orderBy('email').execute();
  }

  /** Whether the database has any user at all. */
  async any(db: Db | Tx): Promise<boolean> {
    return (await db.selectFrom('users').select('uuid').limit(1).executeTakeFirst()) !== undefined;
  }

  async insert(tx: Tx, row: Insertable<UsersTable>): Promise<void> {
    await tx.insertInto('users').values(row).execute();
  }

  /** Sets credentials and/or state of one user. */
  async update(db: Db | Tx, uuid: string, values: Partial<Pick<UserRow, 'password_hash' | 'digest_ha1' | 'state'>>): Promise<void> {
    await db.updateTable('users').set(values).where('uuid', '=', uuid).execute();
  }

  /** Gives a user with a password but no Digest HA1 (a database from before Digest) its HA1. */
  async fillMissingHa1(db: Db | Tx, email: string, ha1: string): Promise<void> {
    await db
      .updateTable('users')
      .set({ digest_ha1: ha1 })
      .where('email', '=', email)
      .where('digest_ha1', 'is', null)
      .where('password_hash', 'is not', null)
      .execute();
  }

  /** What the profile presents of a user. */
  profileOf(db: Db | Tx, uuid: string): Promise<ProfileRow | undefined> {
    return db.selectFrom('users').select(['uuid', 'email', 'state', 'profile']).where('uuid', '=', uuid).executeTakeFirst();
  }

  /** A user's profile text, locked until the transaction ends (a read-modify-write of the profile). */
  async lockProfile(tx: Tx, uuid: string): Promise<string | undefined> {
    return (await lockRows(this.dialect, tx.selectFrom('users').select('profile').where('uuid', '=', uuid)).executeTakeFirst())?.profile;
  }

  async setProfile(tx: Tx, uuid: string, profile: string): Promise<void> {
    await tx.updateTable('users').set({ profile }).where('uuid', '=', uuid).execute();
  }

  /** A user's e-mail (the notification fan-out's read per event), or undefined when there is no such user. */
  async emailOf(db: Db | Tx, uuid: string): Promise<string | undefined> {
    return (await db.selectFrom('users').select('email').where('uuid', '=', uuid).executeTakeFirst())?.email;
  }

  /** Each user's e-mail, by uuid (the main notification contacts follow it). */
  async emails(db: Db | Tx, uuids: readonly string[]): Promise<Map<string, string>> {
    if (!uuids.length) return new Map();
    const rows = await db
      .selectFrom('users')
      .select(['uuid', 'email'])
      .where('uuid', 'in', [...uuids])
      .execute();
    return new Map(rows.map((r) => [r.uuid, r.email]));
  }

  /** A user's state (`REGULAR`, `TRIAL`, ...: it sets a NIC owner's network restriction level); undefined: no such user. */
  async stateOf(db: Db | Tx, uuid: string): Promise<string | undefined> {
    return (await db.selectFrom('users').select('state').where('uuid', '=', uuid).executeTakeFirst())?.state;
  }
}
