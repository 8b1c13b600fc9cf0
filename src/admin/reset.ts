import type { Services } from '../core/context.js';
import { endUserSessions, SESSION_ENDED } from '../resources/accounts/sessions.js';

/**
 * Empties the service (`POST /_stratus/admin/reset`, `stratus reset`): every user and everything they own,
 * every count, session, lock and pending timer, in one transaction, as the table description says
 * (store/tables.ts: `settings`, the recurring timers and the drive library stay). What is left is a service
 * as it was just after its first start, with the same credentials. The caller puts back what a start puts
 * back (the library catalogue, the demo login) and drops what its process caches.
 */
export async function resetAll(s: Services): Promise<Record<string, number>> {
  return s.store.transaction(async (tx) => {
    const { deleted, endedSessionsOf } = await s.store.state.emptyAll(tx);
    // Ended sessions are announced: their event-stream sockets close.
    for (const owner of endedSessionsOf) s.store.changes.announce(tx, { owner, kind: SESSION_ENDED, uuid: null });
    return deleted;
  });
}

/**
 * Empties one account (`POST /_stratus/admin/reset {"email"}`, `stratus reset EMAIL`): everything it owns
 * (resources, their tags, ACLs, network and simulator state, pending timers), its counts, sessions,
 * audit log and events, in one transaction. The user stays with its password, state, profile and rate-limit
 * override: a pipeline resets its test account between runs and logs in as before. Other accounts are
 * untouched (their tags lose members that were this account's objects).
 */
export async function resetAccount(s: Services, userUuid: string): Promise<Record<string, number>> {
  return s.store.transaction(async (tx) => {
    const deleted = await s.store.state.emptyAccount(tx, userUuid);
    deleted.sessions = await endUserSessions(tx, s, userUuid);
    return deleted;
  });
}
