import type { Db, Tx } from '../../store/db.js';

/**
 * Which servers use each firewall policy (`fwpolicy_servers`), written with the server's NICs. A policy's
 * `servers` is read from here for a whole page at once, and its delete locks exactly these servers.
 */
export async function setServerPolicies(tx: Tx, server: string, policies: string[], opts: { created?: boolean } = {}): Promise<void> {
  // A server created in this transaction has no rows yet.
  if (!opts.created) await tx.deleteFrom('fwpolicy_servers').where('server_uuid', '=', server).execute();
  if (policies.length)
    await tx
      .insertInto('fwpolicy_servers')
      .values(policies.map((policy_uuid) => ({ policy_uuid, server_uuid: server })))
      .execute();
}

/** The servers using each of `policies` (uuid order), one query. */
export async function serversOf(db: Db | Tx, policies: readonly string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (!policies.length) return out;
  const rows = await db
    .selectFrom('fwpolicy_servers')
    .select(['policy_uuid', 'server_uuid'])
    .where('policy_uuid', 'in', [...policies])
    .orderBy('server_uuid')
    .execute();
  for (const r of rows) out.set(r.policy_uuid, [...(out.get(r.policy_uuid) ?? []), r.server_uuid]);
  return out;
}
