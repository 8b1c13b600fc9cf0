/**
 * How long each simulated operation takes, in ms of the injected clock. `0` makes an operation finish
 * at the scheduler's next pass. Operators set them with `--delays drive.create=0,drive.clone=30000`.
 */
export const DEFAULT_DELAYS = {
  'drive.create': 2_000,
  /** Per started GiB of the source on top of `drive.clone`. */
  'drive.clone': 5_000,
  'drive.clone.per_gib': 200,
  'drive.resize': 3_000,
  /** A snapshot is `creating` (its size unknown) this long. */
  'snapshot.create': 2_000,
  'server.boot': 3_000,
  /** A hard stop (power cord). */
  'server.stop': 2_000,
  /** An obedient guest powers off this long after an ACPI shutdown request. */
  'server.shutdown': 5_000,
  /** A guest that ignores ACPI is back to `running` after this long (the real service retries for a minute). */
  'server.acpi_timeout': 60_000,
  /** Not a duration: bytes a running server writes to each attached disk per second (grows its data). */
  'drive.write_rate': 65_536,
  /** Not a duration: bytes each public NIC of a running server sends per second (its tx, billed by volume). */
  'nic.tx_rate': 4_096,
  /** A host failure keeps a server `unavailable` this long. */
  'server.host_recovery': 30_000,
  'vrouter.firewall': 5_000,
} as const;

export type DelayName = keyof typeof DEFAULT_DELAYS;
export type Delays = Record<DelayName, number>;

export class DelaysError extends Error {}

/** `name=ms,…` over `base` (the defaults, or the `--ci` preset's zeros). */
export function parseDelays(raw: string, base: Delays = DEFAULT_DELAYS): Delays {
  const out: Delays = { ...base };
  for (const part of raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([a-z_.]+)=(\d{1,9})$/.exec(part);
    if (!m) throw new DelaysError(`delays: "${part}" is not name=milliseconds`);
    if (!(m[1] in DEFAULT_DELAYS)) throw new DelaysError(`delays: unknown operation "${m[1]}"; known: ${Object.keys(DEFAULT_DELAYS).join(', ')}`);
    out[m[1] as DelayName] = Number(m[2]);
  }
  return out;
}
