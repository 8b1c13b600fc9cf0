import type { Services } from '../core/context.js';
import type { RandomSource } from '../core/sim.js';
import type { Tx } from '../store/db.js';
import { defaultRandom } from './random.js';
import { deleteLeases, insertLease } from '../store/network.js';
import type { Obj } from '../store/repository.js';
import { blockOf, poolAddresses, type IpPoolBlock } from '../core/ip-pool.js';

/**
 * The simulated network: MAC addresses, the location's public address pool and DHCP. An address is a
 * row of `resources` (kind `ips`) only while someone has it — an account (assigned by the operator, by
 * subscriptions later) or a running server's DHCP lease (no owner) — free addresses are the pool minus
 * those rows, never stored. Two processes claiming one address are kept apart by the unique (uuid, kind)
 * index: the loser's insert does nothing and it takes the next address. Leases are also recorded in
 * `ip_servers` (dynamic = 1) so the server's owner sees them and the stop gives them back.
 */
type NetServices = Pick<Services, 'clock' | 'config' | 'store'>;

/** Locally administered MACs starting 22: as the real service's do. */
export const newMac = (random: RandomSource = defaultRandom): string => ['22', ...[...random.bytes(5)].map((b) => b.toString(16).padStart(2, '0'))].join(':');

/** The API body of a pool address (gateway, netmask, nameservers of its block). */
function ipBody(s: NetServices, block: IpPoolBlock, extra: Obj = {}): Obj {
  return { gateway: block.gateway, meta: {}, name: null, nameservers: [...s.config.nameservers], netmask: block.prefix, subscription: null, ...extra };
}

/** Claim up to `count` free pool addresses for `owner` (null: a lease), in pool order; fewer when the pool runs out. */
export async function claimAddresses(tx: Tx, s: NetServices, count: number, owner: string | null, extra: Obj = {}): Promise<string[]> {
  const out: string[] = [];
  if (count <= 0) return out;
  const taken = await s.store.resources.allUuids(tx, 'ips');
  for (const address of poolAddresses(s.config.ipPool)) {
    if (taken.has(address)) continue;
    const body = ipBody(s, blockOf(s.config.ipPool, address)!, extra);
    if (await s.store.resources.insertIfAbsent(tx, s.clock.now(), { kind: 'ips', uuid: address, owner, body })) out.push(address);
    if (out.length >= count) break;
  }
  return out;
}

/**
 * Lease a free pool address to a booting server's DHCP NIC. An exhausted pool leaves the NIC without an
 * address, as a real DHCP server would: null, and the boot goes on.
 */
export async function leaseAddress(tx: Tx, s: NetServices, server: string): Promise<string | null> {
  const [address] = await claimAddresses(tx, s, 1, null);
  if (!address) return null;
  await insertLease(tx, server, address);
  return address;
}

/** Give a server's DHCP leases back to the pool; returns the addresses released. */
export async function releaseLeases(tx: Tx, s: Pick<Services, 'store'>, server: string): Promise<string[]> {
  const addresses = await deleteLeases(tx, server);
  if (!addresses.length) return addresses;
  await s.store.resources.remove(tx, 'ips', addresses, { ownerless: true });
  return addresses;
}
