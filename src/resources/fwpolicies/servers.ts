import type { Db, Tx } from '../../store/db.js';
import { setPoliciesOf, usersOfPolicies } from '../../store/network.js';

/**
 * Which servers use each firewall policy (`fwpolicy_servers`), written with the server's NICs. A policy's
 * `servers` is read from here for a whole page at once, and its delete locks exactly these servers.
 */
export const setServerPolicies = (tx: Tx, server: string, policies: string[], opts: { created?: boolean } = {}): Promise<void> =>
  setPoliciesOf(tx, server, policies, opts);

/** The servers using each of `policies` (uuid order), one query. */
export async function serversOf(db: Db | Tx, policies: readonly string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const r of await usersOfPolicies(db, policies, { ordered: true })) out.set(r.policy_uuid, [...(out.get(r.policy_uuid) ?? []), r.server_uuid]);
  return out;
}
