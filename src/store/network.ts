import type { Db, Tx } from './db.js';
import type { AnyQuery } from './repository.js';

/**
 * The SQL of the network relations: which server uses which IP (`ip_servers`: static configurations and
 * DHCP leases), which servers are in which VLAN (`vlan_servers`), which servers use which firewall policy
 * (`fwpolicy_servers`). Each is written with the server's NICs (or its power-on) in that change's
 * transaction.
 */

// ---------------------------------------------------------------------------------------------------------
// IPs

/** The server using each of `addresses` (absent: none), one query. */
export async function serversOfIps(db: Db | Tx, addresses: readonly string[]): Promise<Map<string, string>> {
  if (!addresses.length) return new Map();
  const rows = await db
    .selectFrom('ip_servers')
    .select(['address', 'server_uuid'])
    .where('address', 'in', [...addresses])
    .execute();
  return new Map(rows.map((r) => [r.address, r.server_uuid]));
}

/** Each of `addresses` in use: its server and whether it is a lease (1) or static (0). */
export async function usesOfIps(db: Db | Tx, addresses: readonly string[]): Promise<{ address: string; server_uuid: string; dynamic: number }[]> {
  if (!addresses.length) return [];
  return db
    .selectFrom('ip_servers')
    .select(['address', 'server_uuid', 'dynamic'])
    .where('address', 'in', [...addresses])
    .execute();
}

/** The server using `address`, if any. */
export async function serverOfIp(tx: Tx, address: string): Promise<string | undefined> {
  return (await tx.selectFrom('ip_servers').select('server_uuid').where('address', '=', address).executeTakeFirst())?.server_uuid;
}

/**
 * The IPs a caller sees beyond their own (reference §13.1): those shared with them by an ACL with LIST,
 * and the DHCP leases of their servers (`ownedServers`: a subquery of the caller's server uuids).
 */
export function ipsSharedOrLeasedTo(db: Db | Tx, caller: string, ownedServers: AnyQuery): AnyQuery {
  return db
    .selectFrom('acl_grantees as g')
    .innerJoin('acl_rules as r', (j) => j.onRef('r.acl_uuid', '=', 'g.acl_uuid').on('r.permission', '=', 'LIST'))
    .innerJoin('acl_tags as t', 't.acl_uuid', 'g.acl_uuid')
    .innerJoin('tag_members as tm', (j) => j.onRef('tm.tag_uuid', '=', 't.tag_uuid').on('tm.res_type', '=', 'ips'))
    .select('tm.res_uuid as uuid')
    .where('g.grantee_uuid', '=', caller)
    .union(db.selectFrom('ip_servers as l').select('l.address as uuid').where('l.dynamic', '=', 1).where('l.server_uuid', 'in', ownedServers));
}

/** Replace the statically configured IPs of a server; an address another server had configured moves here. */
export async function setStaticIps(tx: Tx, server: string, addresses: readonly string[], opts: { created?: boolean } = {}): Promise<void> {
  // A server created in this transaction has no rows yet.
  if (!opts.created) await tx.deleteFrom('ip_servers').where('server_uuid', '=', server).where('dynamic', '=', 0).execute();
  const unique = [...new Set(addresses)];
  if (unique.length) {
    await tx.deleteFrom('ip_servers').where('address', 'in', unique).where('dynamic', '=', 0).execute();
    await tx
      .insertInto('ip_servers')
      .values(unique.map((address) => ({ address, server_uuid: server, dynamic: 0 })))
      .execute();
  }
}

/** A DHCP lease of a running server. */
export async function insertLease(tx: Tx, server: string, address: string): Promise<void> {
  await tx.insertInto('ip_servers').values({ address, server_uuid: server, dynamic: 1 }).execute();
}

/** Remove a server's DHCP leases; returns their addresses. */
export async function deleteLeases(tx: Tx, server: string): Promise<string[]> {
  const rows = await tx.selectFrom('ip_servers').select('address').where('server_uuid', '=', server).where('dynamic', '=', 1).execute();
  if (rows.length) await tx.deleteFrom('ip_servers').where('server_uuid', '=', server).where('dynamic', '=', 1).execute();
  return rows.map((r) => r.address);
}

// ---------------------------------------------------------------------------------------------------------
// VLANs

/** The servers in each of `vlans` (uuid order), one query; a VLAN without servers is absent. */
export async function serversOfVlans(db: Db | Tx, vlans: readonly string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (!vlans.length) return out;
  const rows = await db
    .selectFrom('vlan_servers')
    .select(['vlan_uuid', 'server_uuid'])
    .where('vlan_uuid', 'in', [...vlans])
    .orderBy('server_uuid')
    .execute();
  for (const r of rows) out.set(r.vlan_uuid, [...(out.get(r.vlan_uuid) ?? []), r.server_uuid]);
  return out;
}

/** A server in `vlan`, if any. */
export async function aServerInVlan(tx: Tx, vlan: string): Promise<string | undefined> {
  return (await tx.selectFrom('vlan_servers').select('server_uuid').where('vlan_uuid', '=', vlan).executeTakeFirst())?.server_uuid;
}

/** Replace the VLANs a server has NICs in. */
export async function setVlansOf(tx: Tx, server: string, vlans: readonly string[], opts: { created?: boolean } = {}): Promise<void> {
  // A server created in this transaction has no rows yet.
  if (!opts.created) await tx.deleteFrom('vlan_servers').where('server_uuid', '=', server).execute();
  const unique = [...new Set(vlans)];
  if (unique.length)
    await tx
      .insertInto('vlan_servers')
      .values(unique.map((vlan_uuid) => ({ vlan_uuid, server_uuid: server })))
      .execute();
}

// ---------------------------------------------------------------------------------------------------------
// Firewall policies

/** Replace the firewall policies a server's NICs use. */
export async function setPoliciesOf(tx: Tx, server: string, policies: readonly string[], opts: { created?: boolean } = {}): Promise<void> {
  // A server created in this transaction has no rows yet.
  if (!opts.created) await tx.deleteFrom('fwpolicy_servers').where('server_uuid', '=', server).execute();
  if (policies.length)
    await tx
      .insertInto('fwpolicy_servers')
      .values(policies.map((policy_uuid) => ({ policy_uuid, server_uuid: server })))
      .execute();
}

/** (policy, server) pairs of `policies`, ordered by server when `ordered`. */
export async function usersOfPolicies(
  db: Db | Tx,
  policies: readonly string[],
  opts: { ordered?: boolean } = {},
): Promise<{ policy_uuid: string; server_uuid: string }[]> {
  if (!policies.length) return [];
  let q = db
    .selectFrom('fwpolicy_servers')
    .select(['policy_uuid', 'server_uuid'])
    .where('policy_uuid', 'in', [...policies]);
  if (opts.ordered) q = q.orderBy('server_uuid');
  return q.execute();
}
