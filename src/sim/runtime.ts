/**
 * Simulated traffic and disk I/O of a running server (reference §5.6): counters grow with the time since
 * power-on, so reads are deterministic and need no ticks. The API side shapes them into `runtime`.
 */
const NIC_RATE = { recv: 2_048, sent: 1_024 }; // bytes per second
const DRIVE_RATE = { read: 65_536, written: 16_384 };
const PACKET = 512;

const seconds = (since: number, now: Date) => Math.max(0, Math.floor((now.getTime() - since) / 1000));

export function nicCounters(since: number, now: Date) {
  const secs = seconds(since, now);
  const recv = secs * NIC_RATE.recv;
  const sent = secs * NIC_RATE.sent;
  return { bytes_recv: recv, bytes_sent: sent, packets_recv: Math.floor(recv / PACKET), packets_sent: Math.floor(sent / PACKET) };
}

export function driveCounters(since: number, now: Date) {
  const secs = seconds(since, now);
  return {
    bytes_read: secs * DRIVE_RATE.read,
    bytes_written: secs * DRIVE_RATE.written,
    count_flush: secs,
    count_read: secs * 16,
    count_written: secs * 4,
    total_time_ns_flush: secs * 1_000_000,
    total_time_ns_read: secs * 20_000_000,
    total_time_ns_write: secs * 8_000_000,
  };
}
