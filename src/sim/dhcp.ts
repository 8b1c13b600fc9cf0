import type { Services } from '../core/context.js';
import { evaluate, restrictionLevelOf, type FwRule, type Packet } from '../core/firewall.js';
import type { DhcpNic } from '../core/sim.js';
import type { Tx } from '../store/db.js';

/** A guest's DHCP discover: what a public DHCP NIC sends at boot. */
const DHCP_DISCOVER: Packet = { direction: 'out', ip_proto: 'udp', src_ip: '0.0.0.0', src_port: 68, dst_ip: '255.255.255.255', dst_port: 67 };

/**
 * The public DHCP NICs whose address request gets through: the simulated network puts a booting guest's
 * DHCP discover through the NIC's firewall policy and the owner's restriction level, as it would any
 * packet (a policy that drops all outbound UDP leaves the NIC without an address, as a real one would).
 */
export async function dhcpGetsThrough(tx: Tx, s: Pick<Services, 'store'>, owner: string | null, nics: readonly DhcpNic[]): Promise<string[]> {
  const policies = [...new Set(nics.map((n) => n.firewall_policy).filter((p): p is string => !!p))];
  if (!policies.length) return nics.map((n) => n.mac);
  const rules = new Map((await s.store.resources.getMany(tx, 'fwpolicies', policies)).map((p) => [p.uuid, (p.body.rules as FwRule[] | undefined) ?? []]));
  const state = owner ? await s.store.accounts.users.stateOf(tx, owner) : undefined;
  const level = restrictionLevelOf(state ?? 'REGULAR');
  return nics.filter((n) => !n.firewall_policy || evaluate(rules.get(n.firewall_policy) ?? [], level, DHCP_DISCOVER).verdict === 'accept').map((n) => n.mac);
}
