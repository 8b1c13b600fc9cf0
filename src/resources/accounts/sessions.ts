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
 * Ending credentials reaches the event stream (http/event-stream.ts) of every API process through the change
 * feed, in the deleting transaction, as SESSION_ENDED: a new password or an account reset ends every
 * credential of the account (`uuid: null`: all its sockets close); a logout ends the `async_auth` cookie it
 * carries (`uuid`: that cookie's credential id, http/auth/async-auth.ts).
 */
export const SESSION_TTL_MS = 14 * 24 * 3600_000; // reference 4.3: sessionid Max-Age=1209600
export const CSRF_COOKIE_MAX_AGE_S = 31_449_600; // reference 4.3: csrftoken Max-Age (a year)

const SESSION_ID_RE = /^[0-9a-f]{32}$/;

/** The change-feed kind of an ended credential: `{owner: user, kind: SESSION_ENDED, uuid: credential id, or null for all}`. */
export const SESSION_ENDED = 'session-ended';

export interface Session {
  caller: Caller;
  csrfToken: string;
}

/** Starts a session for a user; returns the session id (32 hex) and its CSRF token (32 characters). */
export async function startSession(s: Services, userUuid: string): Promise<{ id: string; csrfToken: string; maxAgeS: number }> {
  const now = s.clock.now();
  const id = randomBytes(16).toString('hex');
  const csrfToken = randomAlnum(32);
  const sessions = s.store.accounts.sessions;
  await sessions.insert(s.store.db, {
    id_hash: sha256Hex(id),
    user_uuid: userUuid,
    csrf_token: csrfToken,
    created_at: isoTimestamp(now),
    expires_ms: now.getTime() + SESSION_TTL_MS,
  });
  // Ended sessions are forgotten as new ones start (indexed; cheap).
  await sessions.deleteExpired(s.store.db, now.getTime());
  return { id, csrfToken, maxAgeS: SESSION_TTL_MS / 1000 };
}

/** The live session with this id and its user, or null (unknown, malformed, expired or logged out). */
export async function findSession(s: Services, id: string): Promise<Session | null> {
  if (!SESSION_ID_RE.test(id)) return null;
  const row = await s.store.accounts.sessions.find(s.store.db, sha256Hex(id));
  if (!row || row.expires_ms <= s.clock.now().getTime()) return null;
  return { caller: { uuid: row.uuid, email: row.email, state: row.state }, csrfToken: row.csrf_token };
}

/**
 * Logout: ends a session (unknown ids are fine) and, when the request carried one, the event-stream cookie
 * it holds (`streamCredential` of `owner`): its socket closes in every process.
 */
export async function endSession(s: Services, id: string | undefined, stream?: { owner: string; credential: string }): Promise<void> {
  await s.store.transaction(async (tx) => {
    if (id && SESSION_ID_RE.test(id)) await s.store.accounts.sessions.delete(tx, sha256Hex(id));
    if (stream) s.store.changes.announce(tx, { owner: stream.owner, kind: SESSION_ENDED, uuid: stream.credential });
  });
}

/** Ends every credential of a user (a new password, an account reset): sessions and sockets; answers how many sessions. */
export async function endUserSessions(tx: Tx, s: Pick<Services, 'store'>, userUuid: string): Promise<number> {
  const gone = await s.store.accounts.sessions.deleteOfUser(tx, userUuid);
  s.store.changes.announce(tx, { owner: userUuid, kind: SESSION_ENDED, uuid: null });
  return gone;
}

/** Ends every session (a reset of the whole service) and the sockets of their users; answers how many. */
export async function endAllSessions(tx: Tx, s: Pick<Services, 'store'>): Promise<number> {
  const gone = await s.store.accounts.sessions.deleteAll(tx);
  for (const owner of new Set(gone)) s.store.changes.announce(tx, { owner, kind: SESSION_ENDED, uuid: null });
  return gone.length;
}
