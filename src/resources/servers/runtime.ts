import type { Obj } from '../../core/input.js';
import { appliedOf, type GuestState, type SimHypervisor } from '../../core/sim.js';
import { ref } from '../../store/repository.js';
import type { Attachment } from './attachments.js';
import type { Nic } from './nics.js';

const noMicros = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, '+00:00');

/**
 * The `runtime` of a running server (reference §5.6) and the per-NIC / per-drive runtime objects, from
 * what the simulated hypervisor holds for it (power-on time, leases) and its traffic counters. A public
 * NIC with a firewall policy also shows the policy's rules version and the one the NIC has applied
 * (`pending` until the next propagation tick): beyond the recorded API, so a client can wait for it.
 */
export function presentRuntime(
  hypervisor: Pick<SimHypervisor, 'nicCounters' | 'driveCounters'>,
  server: Obj,
  guest: Partial<GuestState>,
  now: Date,
  policyVersions: ReadonlyMap<string, number> = new Map(),
) {
  const applied = appliedOf(guest);
  const firewall = (n: Nic) => {
    if (n.vlan || !n.firewall_policy) return {};
    const version = policyVersions.get(n.firewall_policy) ?? 1;
    const done = applied[n.firewall_policy] ?? null;
    return { firewall: { applied_version: done, pending: done !== version, policy: ref('fwpolicies', n.firewall_policy), version } };
  };
  const since = guest.active_since ?? now.getTime();
  const leases = guest.leases ?? {};
  const nicRuntime = (n: Nic) => {
    const ip = n.vlan ? null : n.ip_v4_conf?.conf === 'static' ? n.ip_v4_conf.ip : n.ip_v4_conf?.conf === 'dhcp' ? (leases[n.mac] ?? null) : null;
    return {
      interface_type: n.vlan ? 'private' : 'public',
      io: hypervisor.nicCounters(since, now),
      ip_v4: ip ? ref('ips', ip) : null,
      ip_v6: null,
      ...firewall(n),
    };
  };
  const nics = (server.nics as Nic[] | undefined) ?? [];
  const drives = (server.drives as Attachment[] | undefined) ?? [];
  return {
    server: { active_since: noMicros(since), nics: nics.map((n) => ({ ...nicRuntime(n), mac: n.mac })) },
    nic: (mac: string) => {
      const n = nics.find((x) => x.mac === mac);
      return n ? nicRuntime(n) : null;
    },
    drive: (uuid: string) => (drives.some((d) => d.drive === uuid) ? { io: hypervisor.driveCounters(since, now) } : null),
  };
}
