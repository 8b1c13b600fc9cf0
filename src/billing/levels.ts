import { isoTimestamp } from '../core/clock.js';
import type { Services } from '../core/context.js';
import type { Db, Tx } from '../store/db.js';
import { maxLevelOf } from './catalogue.js';

/**
 * Burst levels (reference §16.2, §16.9): recalculated every 5 minutes from how much of the cloud's
 * capacity all accounts use, and applied 5 minutes later. At each cycle's poll the level computed at the
 * previous poll (`next`) comes into force (`current`) and the one computed now becomes `next` — so
 * `next` shows a change at once and `current` takes it exactly one cycle later. Level 1 is the cheapest
 * burst price; resources priced only at levels 0..1 (storage, ip, vlan) and licences stay at 1.
 */
type S = Pick<Services, 'config' | 'clock' | 'store'>;

export interface Levels {
  current: Record<string, number>;
  next: Record<string, number>;
}

/** The level `utilisation` (0..1 of capacity) leads to on a resource with levels 1..max. */
export function levelFor(utilisation: number, max: number): number {
  if (max <= 1) return 1;
  return Math.min(max, Math.max(1, Math.ceil(utilisation * max)));
}

/** Every resource the catalogue prices, at level 1 unless a recalculation has set it. */
export async function readLevels(db: Db | Tx, s: Pick<Services, 'config' | 'store'>): Promise<Levels> {
  const rows = await s.store.billing.levels.read(db);
  const stored = new Map(rows.map((r) => [r.resource, r]));
  const current: Record<string, number> = {};
  const next: Record<string, number> = {};
  for (const resource of s.config.pricing.resources) {
    const r = stored.get(resource);
    current[resource] = Number(r?.current ?? 1);
    next[resource] = Number(r?.next ?? 1);
  }
  return { current, next };
}

/** The level in force for a usage key: its own, else its family's (`intel_cpu` follows `cpu`), else 1. */
export function levelOf(levels: Record<string, number>, key: string): number {
  return levels[key] ?? levels[key.replace(/^[a-z0-9]+_(cpu|mem)$/, '$1')] ?? 1;
}

/**
 * Shift the levels at a poll: `current` := `next`; `next` := what this poll's utilisation leads to.
 * `used` is the cloud-wide usage now per usage key (cpu MHz, mem bytes, tx bytes this cycle).
 */
export async function shiftLevels(tx: Tx, s: S, used: ReadonlyMap<string, number>, read?: Levels): Promise<Levels> {
  const before = read ?? (await readLevels(tx, s));
  const capacity = s.config.cloudCapacity;
  const family = (resource: string): 'cpu' | 'mem' | 'tx' | undefined => {
    const m = /(^|_)(cpu|mem)$/.exec(resource)?.[2] ?? (/^tx($|_)/.test(resource) ? 'tx' : undefined);
    return m as 'cpu' | 'mem' | 'tx' | undefined;
  };
  const now = isoTimestamp(s.clock.now());
  const after: Levels = { current: {}, next: {} };
  const rows = [];
  for (const resource of s.config.pricing.resources) {
    const fam = family(resource);
    const utilisation = fam ? (used.get(fam) ?? 0) / capacity[fam] : 0;
    const next = levelFor(utilisation, maxLevelOf(resource));
    const current = before.next[resource] ?? 1;
    after.current[resource] = current;
    after.next[resource] = next;
    rows.push({ resource, current, next, updated_at: now });
  }
  await s.store.billing.levels.write(tx, rows);
  return after;
}
