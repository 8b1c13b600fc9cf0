import type { Services } from '../../core/context.js';
import { ApiError } from '../../core/errors.js';
import type { Tx } from '../../store/db.js';
import { assertUsableStaticIp, detachServerIps, leaseDhcpIp, releaseDhcp, setServerStaticIps } from '../ips/ips.js';
import { assertUsableVlan, setServerVlans } from '../vlans/vlans.js';
import type { Nic, NicChecks } from './attachments.js';

/** What NIC validation asks of the network: a static IP the owner may use here, a VLAN it may attach. */
export const nicChecks: NicChecks = {
  staticIp: (tx, owner, address, server) => assertUsableStaticIp(tx, owner, address, { point: 'nics', server }),
  vlan: (tx, owner, vlan) => assertUsableVlan(tx, owner, vlan, { point: 'nics' }),
};

/** Record which static IPs and VLANs a server's NICs use (so no other server can take the IP). */
export async function recordNics(tx: Tx, server: string, nics: Nic[]): Promise<void> {
  const statics = nics.filter((n) => n.ip_v4_conf?.conf === 'static' && n.ip_v4_conf.ip).map((n) => n.ip_v4_conf!.ip!);
  await setServerStaticIps(tx, server, statics);
  await setServerVlans(tx, server, [...new Set(nics.map((n) => n.vlan).filter((v): v is string => !!v))]);
}

/** A deleted server gives back its leases, static IPs and VLAN memberships. */
export async function forgetNics(tx: Tx, server: string): Promise<void> {
  await detachServerIps(tx, server);
  await setServerVlans(tx, server, []);
}

/** The simulated network's side of the lifecycle: DHCP leases at boot, released at stop. */
export const network = {
  async lease(tx: Tx, s: Services, server: string): Promise<string | null> {
    try {
      return await leaseDhcpIp(tx, s, server);
    } catch (e) {
      // An exhausted pool leaves the NIC without an address, as a real DHCP server would; the boot goes on.
      if (e instanceof ApiError && e.status === 503) return null;
      throw e;
    }
  },
  release: (tx: Tx, server: string) => releaseDhcp(tx, server).then(() => undefined),
};
