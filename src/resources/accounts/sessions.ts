import { randomBytes } from 'node:crypto';
import { isoTimestamp } from '../../core/clock.js';
import type { Caller, Services } from '../../core/context.js';
import { randomAlnum, sha256Hex } from '../../core/passwords.js';
import type { Tx } from '../../store/db.js';

/**
 * Cookie sessions (browser clients), server-side in the database so any API process can serve them.
 * The session id is a secret the client holds; the table keeps only its SHA-256, so a leaked table
 * yields no usable session. The CSRF token is not a credential on its own (it is sent in a readable
 * cookie and echoed in `X-CSRFToken`), so it is stored as is. Session ids and tokens come from the
 * CSPRNG, never from the injectable id generator (tests may make that one predictable).
 *
 * A session that ends early (logout, a new password, an account reset) is announced on the change feed
 * as SESSION_ENDED with its hash, in the deleting transaction: every API process's event stream closes
 * the sockets opened with it (notify/stream.ts). Expiry needs no announcement: a socket knows its end.
 */
export const SESSION_TTL_MS = 14 * 24 * 3600_000; // reference 4.3: sessionid Max-Age=1209600
export const CSRF_COOKIE_MAX_AGE_S = 31_449_600; // reference 4.3: csrftoken Max-Age (a year)

const SESSION_ID_RE = /^[0-9a-f]{32}$/;

/** The change-feed kind of an ended session: `{owner: user, kind: SESSION_ENDED, uuid: id hash}`. */
export const SESSION_ENDED = 'session-ended';

export interface Session {
  caller: Caller;
  csrfToken: string;
  /** SHA-256 of the id: what the table and the change feed name it by. */
  idHash: string;
  expiresMs: number;
}

/** Starts a session for a user; returns the session id (32 hex) and its CSRF token (32 characters). */
export async function startSession(s: Services, userUuid: string): Promise<{ id: string; csrfToken: string; maxAgeS: number }> {
  const now = s.clock.now();
  const id = randomBytes(16).toString('hex');
  const csrfToken = randomAlnum(32);
  await s.store.db
    .insertInto('sessions')
    .values({ id_hash: sha256Hex(id), user_uuid: userUuid, csrf_token: csrfToken, created_at: isoTimestamp(now), expires_ms: now.getTime() + SESSION_TTL_MS })
    .execute();
  // Ended sessions are forgotten as new ones start (indexed; cheap).
  await s.store.db.deleteFrom('sessions').where('expires_ms', '<=', now.getTime()).execute();
  return { id, csrfToken, maxAgeS: SESSION_TTL_MS / 1000 };
}

/** The live session with this id and its user, or null (unknown, malformed, expired or logged out). */
export async function findSession(s: Services, id: string): Promise<Session | null> {
  if (!SESSION_ID_RE.test(id)) return null;
  const idHash = sha256Hex(id);
  const row = await s.store.db
    .selectFrom('sessions')
    .innerJoin('users', 'users.uuid', 'sessions.user_uuid')
    .select(['users.uuid', 'users.email', 'users.state', 'sessions.csrf_token', 'sessions.expires_ms'])
    .where('sessions.id_hash', '=', idHash)
    .executeTakeFirst();
  const expiresMs = Number(row?.expires_ms);
  if (!row || expiresMs <= s.clock.now().getTime()) return null;
  return { caller: { uuid: row.uuid, email: row.email, state: row.state }, csrfToken: row.csrf_token, idHash, expiresMs };
}

/** Ends sessions (logout). Unknown ids are fine. */
export async function endSession(s: Services, ...ids: string[]): Promise<void> {
  const hashes = ids.filter((id) => SESSION_ID_RE.test(id)).map(sha256Hex);
  if (hashes.length) await s.store.transaction((tx) => dropSessions(tx, s, { hashes }));
}

/** Ends every session of a user (a new password, an account reset); answers how many. */
export const endUserSessions = (tx: Tx, s: Pick<Services, 'store'>, userUuid: string): Promise<number> => dropSessions(tx, s, { user: userUuid });

/** Ends every session (a reset of the whole service); answers how many. */
export const endAllSessions = (tx: Tx, s: Pick<Services, 'store'>): Promise<number> => dropSessions(tx, s, 'all');

async function dropSessions(tx: Tx, s: Pick<Services, 'store'>, which: { hashes: string[] } | { user: string } | 'all'): Promise<number> {
  let q = tx.deleteFrom('sessions');
  if (which !== 'all') q = 'user' in which ? q.where('user_uuid', '=', which.user) : q.where('id_hash', 'in', which.hashes);
  const gone = await q.returning(['id_hash', 'user_uuid']).execute();
  for (const g of gone) s.store.changes.announce(tx, { owner: g.user_uuid, kind: SESSION_ENDED, uuid: g.id_hash });
  return gone.length;
}
