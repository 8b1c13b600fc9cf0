import type { Obj } from '../../core/input.js';
import type { Attachment, Nic } from './attachments.js';

/** Simulated traffic: counters grow with time since boot, so reads are deterministic and need no ticks. */
const NIC_RATE = { recv: 2_048, sent: 1_024 }; // bytes per second
const DRIVE_RATE = { read: 65_536, written: 16_384 };
const PACKET = 512;

const noMicros = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, '+00:00');

/**
 * The `runtime` of a running server (reference §5.6) and the per-NIC / per-drive runtime objects, from
 * the simulator state kept in the server body (`_active_since`, `_leases`).
 */
export function presentRuntime(server: Obj, now: Date) {
  const since = Number(server._active_since ?? now.getTime());
  const secs = Math.max(0, Math.floor((now.getTime() - since) / 1000));
  const leases = (server._leases as Record<string, string> | undefined) ?? {};
  const nicRuntime = (n: Nic) => {
    const ip = n.vlan ? null : n.ip_v4_conf?.conf === 'static' ? n.ip_v4_conf.ip : n.ip_v4_conf?.conf === 'dhcp' ? (leases[n.mac] ?? null) : null;
    const recv = secs * NIC_RATE.recv;
    const sent = secs * NIC_RATE.sent;
    return {
      interface_type: n.vlan ? 'private' : 'public',
      io: { bytes_recv: recv, bytes_sent: sent, packets_recv: Math.floor(recv / PACKET), packets_sent: Math.floor(sent / PACKET) },
      ip_v4: ip ? { resource_uri: `/api/2.0/ips/${ip}/`, uuid: ip } : null,
      ip_v6: null,
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
    drive: (uuid: string) =>
      drives.some((d) => d.drive === uuid)
        ? {
            io: {
              bytes_read: secs * DRIVE_RATE.read,
              bytes_written: secs * DRIVE_RATE.written,
              count_flush: secs,
              count_read: secs * 16,
              count_written: secs * 4,
              total_time_ns_flush: secs * 1_000_000,
              total_time_ns_read: secs * 20_000_000,
              total_time_ns_write: secs * 8_000_000,
            },
          }
        : null,
  };
}
