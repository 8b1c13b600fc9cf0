import type { Ctx } from '../../core/context.js';
import { validation } from '../../core/errors.js';
import { isPlainObject, relatedId } from '../../core/input.js';
import { lockAttachable } from '../../core/permissions.js';
import type { Tx } from '../../store/db.js';
import { assertUsableStaticIp, setServerStaticIps } from '../ips/ips.js';
import { setServerVlans } from '../vlans/vlans.js';
import { setServerPolicies } from '../fwpolicies/servers.js';

/** A NIC as stored. */
export interface Nic {
  boot_order: number | null;
  firewall_policy: string | null;
  ip_v4_conf: { conf: string; ip: string | null } | null;
  ip_v6_conf: { conf: string; ip: string | null } | null;
  mac: string;
  model: string;
  vlan: string | null;
}

const NIC_MODELS = ['virtio', 'e1000', 'rtl8139', 'i82551', 'i82557b', 'i82559er', 'ne2k_pci', 'pcnet'];
const CONFS = ['dhcp', 'static', 'manual'];

/**
 * Validate a `nics` list against the current NICs (reference §5.7): entries are matched by MAC; a MAC
 * the server does not have is an error; an entry without MAC is a new NIC; vlan and IP configs exclude
 * each other; dhcp takes no ip; static needs an IP the owner holds.
 */
export async function normaliseNics(tx: Tx, ctx: Ctx, current: Nic[], items: unknown[], owner: string, server: string | null): Promise<Nic[]> {
  const known = new Map(current.map((n) => [n.mac.toLowerCase(), n]));
  const seen = new Set<string>();
  const out: Nic[] = [];
  for (const item of items) {
    if (!isPlainObject(item)) throw validation('nics', 'Each NIC must be an object');
    let mac = typeof item.mac === 'string' && item.mac ? item.mac.toLowerCase() : undefined;
    if (mac && !known.has(mac)) throw validation('nics', `The server has no NIC with MAC ${mac}`);
    if (mac && seen.has(mac)) throw validation('nics', `MAC ${mac} is listed twice`);
    mac ??= ctx.sim.network.newMac();
    seen.add(mac);
    const vlan = item.vlan === undefined || item.vlan === null ? null : relatedId(item.vlan, 'nics');
    const v4 = conf(item.ip_v4_conf);
    const v6 = conf(item.ip_v6_conf);
    if (vlan && v4 && v6) throw validation('nics', 'A NIC cannot have a VLAN and both IP configurations');
    if (vlan && (v4 || v6)) throw validation('nics', 'A NIC is either private (vlan) or public (ip_v4_conf/ip_v6_conf), not both');
    const model = (item.model as string | null | undefined) ?? 'virtio';
    if (!NIC_MODELS.includes(model)) throw validation('nics', `model must be one of ${NIC_MODELS.join(', ')}`);
    const caller = ctx.caller.uuid;
    if (v4?.conf === 'static' && v4.ip) await assertUsableStaticIp(tx, ctx, owner, v4.ip, { point: 'nics', server, caller });
    if (vlan) await lockAttachable(tx, ctx, { caller, serverOwner: owner, kind: 'vlans', uuid: vlan, point: 'nics', label: 'VLAN' });
    const policy = item.firewall_policy === undefined || item.firewall_policy === null ? null : relatedId(item.firewall_policy, 'nics');
    // Rule 8: the server's owner owns the policy or holds ATTACH on it; locked until the change commits.
    if (policy) await lockAttachable(tx, ctx, { caller, serverOwner: owner, kind: 'fwpolicies', uuid: policy, point: 'nics', label: 'Firewall policy' });
    out.push({ boot_order: (item.boot_order as number | null | undefined) ?? null, firewall_policy: policy, ip_v4_conf: v4, ip_v6_conf: v6, mac, model, vlan });
  }
  return out;
}

function conf(raw: unknown): { conf: string; ip: string | null } | null {
  if (raw === undefined || raw === null) return null;
  if (!isPlainObject(raw)) throw validation('nics', 'ip_v4_conf/ip_v6_conf must be an object');
  const c = (raw.conf as string | undefined) ?? 'dhcp';
  if (!CONFS.includes(c)) throw validation('nics', `conf must be one of ${CONFS.join(', ')}`);
  const ip = raw.ip === undefined || raw.ip === null ? null : relatedId(raw.ip, 'nics');
  if (c === 'dhcp' && ip) throw validation('nics', 'An IP cannot be given with dhcp configuration');
  if (c === 'static' && !ip) throw validation('nics', 'A static configuration needs an ip');
  if (ip && !/^[0-9a-fA-F:.]{2,45}$/.test(ip)) throw validation('nics', `${ip} is not an IP address`);
  return { conf: c, ip };
}

/**
 * Record which static IPs, VLANs and firewall policies a server's NICs use (so no other server can take
 * the IP; a policy lists its servers and reaches them when it changes).
 */
export async function recordNics(tx: Tx, server: string, nics: Nic[], opts: { created?: boolean } = {}): Promise<void> {
  const statics = nics.filter((n) => n.ip_v4_conf?.conf === 'static' && n.ip_v4_conf.ip).map((n) => n.ip_v4_conf!.ip!);
  await setServerStaticIps(tx, server, statics, opts);
  await setServerVlans(tx, server, [...new Set(nics.map((n) => n.vlan).filter((v): v is string => !!v))], opts);
  await setServerPolicies(tx, server, [...new Set(nics.map((n) => n.firewall_policy).filter((p): p is string => !!p))], opts);
}

/** A deleted server gives back its static IPs, VLAN memberships and policy uses (its leases go with the hypervisor). */
export async function forgetNics(tx: Tx, server: string): Promise<void> {
  await setServerStaticIps(tx, server, []);
  await setServerVlans(tx, server, []);
  await setServerPolicies(tx, server, []);
}

/** MACs of the public NICs that ask DHCP for an address at boot. */
export const dhcpMacs = (nics: Nic[]) => nics.filter((n) => !n.vlan && n.ip_v4_conf?.conf === 'dhcp').map((n) => n.mac);

/** Public NICs (not on a VLAN, with an IP configuration): what sends billed traffic while the guest runs. */
export const publicNicCount = (nics: Nic[]) => nics.filter((n) => !n.vlan && (n.ip_v4_conf || n.ip_v6_conf)).length;

/** Firewall policies of the public NICs (policies apply to public interfaces only). */
export const publicPolicies = (nics: Nic[]) => [...new Set(nics.filter((n) => !n.vlan && n.firewall_policy).map((n) => n.firewall_policy!))];
