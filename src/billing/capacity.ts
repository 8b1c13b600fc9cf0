import { ConfigError } from '../core/errors.js';

/**
 * The simulated cloud's capacity per burstable resource. Burst levels follow how much of it all accounts
 * use together (levels.ts): cpu in MHz, mem in bytes, tx in bytes per 5-minute cycle.
 */
export type CloudCapacity = Record<'cpu' | 'mem' | 'tx', number>;

export const DEFAULT_CAPACITY: CloudCapacity = { cpu: 2_000_000, mem: 8 * 2 ** 40, tx: 10 * 2 ** 40 };

/** `cpu=2000000,mem=8796093022208,tx=...`: keys given replace the defaults. */
export function parseCapacity(raw: string): CloudCapacity {
  const out = { ...DEFAULT_CAPACITY };
  for (const part of raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [key, value] = part.split('=');
    if (key !== 'cpu' && key !== 'mem' && key !== 'tx') throw new ConfigError(`cloud-capacity: unknown resource "${key}" (cpu, mem, tx)`);
    const n = Number(value);
    if (!Number.isSafeInteger(n) || n <= 0) throw new ConfigError(`cloud-capacity: ${key} must be a positive integer`);
    out[key] = n;
  }
  return out;
}
