/**
 * The console's charts, as data: API answers (the ledger, usage records, burst usage, the price list) turned
 * into the column arrays uPlot draws (`[x, y1, y2, …]`, x in seconds since the epoch). Pure functions, no
 * DOM, so they are tested in Node (test/unit/ui-series.test.ts) and the chart components stay thin.
 *
 * Money arrives as decimal strings; a chart only needs a picture of it, so it becomes a float here (the
 * tables beside the charts show the API's own strings).
 */

/** A ledger entry as `GET /ledger/` answers it (the fields a chart reads). */
export interface LedgerEntry {
  time: string;
  amount: string;
  initial: string;
  end: string;
  reason?: string;
}

/** A record of `GET /usage/`: what one object used at a poll, in base units. */
export interface UsageRecord {
  poll_time: string;
  resource: string;
  amount: string;
  uuid?: string;
}

/** A record of `GET /burstusage/`: an account's burst of one charged resource at a poll. */
export interface BurstRecord {
  date: string;
  resource_type: string;
  usage: number;
  amount: string;
}

/** A price of `GET /pricing/`. */
export interface Price {
  resource: string;
  level: number;
  price: string;
  unit?: string;
  currency?: string;
}

/** `GET /pricing/`: the prices and the burst level in force (`current`) and the one that follows (`next`). */
export interface Pricing {
  current: Record<string, number>;
  next: Record<string, number>;
  objects: Price[];
}

/** uPlot's data: x values, then one array per series (null where a series has no value at that x). */
export type Columns = [number[], ...(number | null)[][]];

const seconds = (iso: string): number => Math.floor(Date.parse(iso) / 1000);
const DAY_S = 86_400;

/**
 * The balance after each ledger entry, oldest first: the entry's `end`. Entries of the same second (a poll
 * writes one per resource) become one point: the balance after the last of them, found as the chain's end
 * (the entry whose `end` no other entry of that second starts from), whatever order the page listed them in.
 */
export function balanceOverTime(entries: readonly LedgerEntry[]): Columns {
  const bySecond = new Map<number, LedgerEntry[]>();
  for (const e of entries) {
    const t = seconds(e.time);
    if (Number.isNaN(t)) continue;
    const group = bySecond.get(t) ?? [];
    group.push(e);
    bySecond.set(t, group);
  }
  const x = [...bySecond.keys()].sort((a, b) => a - b);
  const y = x.map((t) => {
    const group = bySecond.get(t)!;
    const starts = new Set(group.map((e) => Number(e.initial)));
    const last = group.find((e) => !starts.has(Number(e.end))) ?? group[group.length - 1];
    return Number(last.end);
  });
  return [x, y];
}

/** Money spent per UTC day (the debits: positive amounts) and money paid in (credits), oldest day first. */
export function spendingPerDay(entries: readonly LedgerEntry[]): Columns {
  const days = new Map<number, { spent: number; paid: number }>();
  for (const e of entries) {
    const t = seconds(e.time);
    if (Number.isNaN(t)) continue;
    const day = t - (t % DAY_S);
    const d = days.get(day) ?? { spent: 0, paid: 0 };
    const amount = Number(e.amount);
    if (amount > 0) d.spent += amount;
    else d.paid -= amount;
    days.set(day, d);
  }
  const x = [...days.keys()].sort((a, b) => a - b);
  return [x, x.map((d) => round(days.get(d)!.spent)), x.map((d) => round(days.get(d)!.paid))];
}

const round = (n: number): number => Math.round(n * 1e6) / 1e6;

/** The four things a person looks at, and which usage keys count under each. */
export const USAGE_GROUPS = [
  { id: 'cpu', label: 'CPU', unit: 'MHz', keys: /(^|_)cpu$/ },
  { id: 'mem', label: 'RAM', unit: 'bytes', keys: /(^|_)mem$/ },
  { id: 'storage', label: 'Storage', unit: 'bytes', keys: /^(dssd|ssd|hdd|magnetic|zadara)$/ },
  { id: 'traffic', label: 'Traffic', unit: 'bytes', keys: /^tx$/ },
] as const;
export type UsageGroup = (typeof USAGE_GROUPS)[number]['id'];

export const groupOf = (key: string): UsageGroup | null => USAGE_GROUPS.find((g) => g.keys.test(key))?.id ?? null;

/**
 * Per group, the usage at each poll (the sum over the group's keys and objects) and the burst billed at it
 * (the units beyond the subscriptions, `/burstusage/`'s `usage`), on one time axis: `[x, used, burst]`.
 * A poll with usage but no burst record has burst 0; a burst record without usage records (pruned, or a
 * page boundary) keeps its point, with usage unknown (null).
 */
export function usageByGroup(records: readonly UsageRecord[], bursts: readonly BurstRecord[]): Record<UsageGroup, Columns> {
  const used = new Map<UsageGroup, Map<number, number>>();
  const burst = new Map<UsageGroup, Map<number, number>>();
  const add = (into: Map<UsageGroup, Map<number, number>>, group: UsageGroup | null, t: number, n: number) => {
    if (!group || Number.isNaN(t) || !Number.isFinite(n)) return;
    const m = into.get(group) ?? new Map<number, number>();
    m.set(t, (m.get(t) ?? 0) + n);
    into.set(group, m);
  };
  for (const r of records) add(used, groupOf(r.resource), seconds(r.poll_time), Number(r.amount));
  for (const b of bursts) add(burst, groupOf(b.resource_type), seconds(b.date), Number(b.usage));
  const out = {} as Record<UsageGroup, Columns>;
  for (const { id } of USAGE_GROUPS) {
    const u = used.get(id) ?? new Map<number, number>();
    const b = burst.get(id) ?? new Map<number, number>();
    const x = [...new Set([...u.keys(), ...b.keys()])].sort((p, q) => p - q);
    out[id] = [x, x.map((t) => u.get(t) ?? null), x.map((t) => b.get(t) ?? (u.has(t) ? 0 : null))];
  }
  return out;
}

/**
 * One resource's price at each burst level (`[levels, prices]`) with the level in force and the next one:
 * what the burst of that resource costs now against what it would cost at the other levels. Level 0 is the
 * subscription price, not a burst level, and is left out; with `currency`, only that currency's prices.
 */
export function levelsOf(
  pricing: Pricing,
  resource: string,
  currency?: string,
): { columns: Columns; current: number | null; next: number | null; unit: string; currency: string } {
  // The catalogue prices each level in every currency: the account's only (when given).
  const rows = pricing.objects
    .filter((p) => p.resource === resource && p.level > 0 && (!currency || !p.currency || p.currency === currency))
    .sort((a, b) => a.level - b.level);
  return {
    columns: [rows.map((r) => r.level), rows.map((r) => Number(r.price))],
    current: pricing.current[resource] ?? null,
    next: pricing.next[resource] ?? null,
    unit: rows[0]?.unit ?? '',
    currency: rows[0]?.currency ?? '',
  };
}

/** The resources that burst (priced at more than one level), the four a person cares about first. */
export function burstResources(pricing: Pricing): string[] {
  const levels = new Map<string, number>();
  for (const p of pricing.objects) if (p.level > 0) levels.set(p.resource, (levels.get(p.resource) ?? 0) + 1);
  const first = ['cpu', 'mem', 'dssd', 'ssd', 'tx'];
  return [...levels.entries()]
    .filter(([, n]) => n > 1)
    .map(([r]) => r)
    .sort((a, b) => (first.indexOf(a) + 1 || 99) - (first.indexOf(b) + 1 || 99) || a.localeCompare(b));
}

/** A base-unit amount for an axis: bytes as KiB…TiB, MHz as MHz/GHz. */
export function formatAmount(n: number, unit: string): string {
  if (unit === 'bytes') {
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    let i = 0;
    let v = n;
    while (Math.abs(v) >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return `${+v.toFixed(v >= 100 || i === 0 ? 0 : 1)} ${units[i]}`;
  }
  if (unit === 'MHz' && Math.abs(n) >= 1000) return `${+(n / 1000).toFixed(1)} GHz`;
  return `${+n.toFixed(2)} ${unit}`.trim();
}
