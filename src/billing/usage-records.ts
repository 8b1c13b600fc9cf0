import type { Services } from '../core/context.js';
import type { Usage } from '../core/metering.js';
import type { TimerHandler } from '../core/timers.js';
import type { Tx } from '../store/db.js';
import type { Account, Charge } from './accounts.js';
import { ledgerAmount, Money } from './money.js';

/**
 * The usage records of reference §16.7, written by the billing poll (engine.ts) in its own transaction, so
 * a record exists iff the poll that measured it committed, and a poll run twice (it cannot be: the ledger's
 * unique index) would not write them twice.
 *
 * - `/usage/`: a record per object per usage key per poll: what a server, drive, snapshot, IP or VLAN used
 *   at the poll, in base units (MHz, bytes, objects), under its most specific key (`intel_cpu`, `dssd`), as
 *   the recorded `{"amount": "6000", "resource": "intel_cpu", "uuid": <server>}`. Whether it was covered
 *   by a subscription does not matter here: it is use, not money. They are stored one row per account per
 *   poll (its records as a JSON list, and their number): the poll writes a row per account instead of two
 *   per server (a tenth of the index entries of the 10,000-server poll), and a page of records reads the
 *   few rows that hold it, found from the rows' counts (resources/billing/usage.ts).
 * - `/burstusage/`: one row per account per charged resource per poll, i.e. the poll's ledger entries of
 *   that resource taken together (a resource used the whole cycle and another of its kind started
 *   mid-cycle are two entries, different intervals, but one burst of that resource): `amount` is the sum of
 *   those entries' amounts, exactly what the ledger charged; `usage` the units billed beyond the
 *   subscriptions (the entries' `resource_amount`s), in base units. So the records of a period add up to
 *   the ledger's burst charges of that period, which is what a customer reconciles them against; a record
 *   per object would have no amount (burst is charged per account, beyond its subscriptions, not per object).
 * - `/dailyburstusage/`: per account, UTC day (of the poll) and resource: `amount` the sum of that day's
 *   burst records; `usage` the day's burst in unit-days, Σ units × seconds / 86400, exactly (a 300 GiB drive
 *   bursting all day shows 322122547200, as the documented example does; a plain sum of the 288 polls
 *   would be 288 times that and in no unit); a volume (traffic) adds up as it is, the bytes sent that day. Kept as running sums updated by each poll (one read per 1,000 accounts and
 *   one upsert), so a request never sums an account's history.
 *
 * Every write is set-wise (store/bulk.ts): a poll of 10,000 servers is a handful of statements.
 * The tables grow every 5 minutes per object, so they are kept for `--usage-retention` (config.ts) and
 * pruned by a durable hourly timer (`usage.prune`); a one-account reset empties them (admin/reset.ts).
 */
type S = Pick<Services, 'store' | 'clock' | 'config' | 'ids'>;

/** The UTC day of a moment, `YYYY-MM-DD`. */
export const dayOf = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

/** One account's burst at a poll, per charged resource: the sum of that resource's ledger entries. */
export function burstOf(charges: readonly Charge[]): { resource: string; amount: Money; usage: number; unitSeconds: bigint }[] {
  const out = new Map<string, { resource: string; amount: Money; usage: number; unitSeconds: bigint }>();
  for (const c of charges) {
    if (!c.resource) continue;
    const units = Number(c.resource_amount ?? 0);
    const seconds = c.interval ?? 0;
    const g = out.get(c.resource) ?? { resource: c.resource, amount: new Money(0), usage: 0, unitSeconds: 0n };
    // The amount as the ledger entry holds it (rounded to its places), so the sums agree to the digit.
    g.amount = g.amount.plus(ledgerAmount(c.amount));
    g.usage += units;
    // A volume (traffic) is not held through the interval: it counts whole, a day's worth of it.
    g.unitSeconds += BigInt(Math.round(units)) * BigInt(c.volume ? 86_400 : Math.round(seconds));
    out.set(c.resource, g);
  }
  return [...out.values()].sort((a, b) => a.resource.localeCompare(b.resource));
}

/** Write a poll's usage records: per object (`usage`), and per account and charged resource (`charges`). */
export async function recordUsage(
  tx: Tx,
  s: S,
  poll: Date,
  usage: readonly Usage[],
  batch: readonly { account: Account; charges: readonly Charge[] }[],
): Promise<void> {
  const pollMs = poll.getTime();
  const perAccount = new Map<string, [string, string, string][]>();
  for (const u of usage)
    if (u.uuid !== undefined && u.amount > 0 && (u.since === undefined || u.since < pollMs)) {
      const record: [string, string, string] = [u.keys[0]!, u.uuid, String(u.amount)];
      const list = perAccount.get(u.owner);
      if (list) list.push(record);
      else perAccount.set(u.owner, [record]);
    }
  await s.store.billing.usage.insertPolls(
    tx,
    [...perAccount].map(([owner, records]) => [owner, pollMs, records.length, JSON.stringify(records)] as const),
  );

  const day = dayOf(pollMs);
  const bursts = batch.flatMap(({ account, charges }) => burstOf(charges).map((b) => ({ owner: account.owner, ...b })));
  if (!bursts.length) return;
  await s.store.billing.usage.insertBursts(
    tx,
    bursts.map((b) => [s.ids.uuid(), b.owner, pollMs, b.resource, ledgerAmount(b.amount), b.usage] as const),
  );

  // The day's running sums: read what earlier polls of the day left, add, write back (upsert).
  const owners = [...new Set(bursts.map((b) => b.owner))];
  const before = new Map<string, { amount: string; unit_seconds: string }>();
  for (const r of await s.store.billing.usage.dailySums(tx, day, owners)) before.set(`${r.owner_uuid} ${r.resource_type}`, r);
  const daily = bursts.map((b) => {
    const had = before.get(`${b.owner} ${b.resource}`);
    return [b.owner, day, b.resource, ledgerAmount(b.amount.plus(had?.amount ?? 0)), String(b.unitSeconds + BigInt(had?.unit_seconds ?? 0))] as const;
  });
  await s.store.billing.usage.writeDailySums(tx, daily);
}

/** Delete the usage records older than the retention (a day is kept while any of it is within it). */
export async function pruneUsage(tx: Tx, s: Pick<Services, 'clock' | 'config' | 'store'>): Promise<Record<string, number>> {
  const cutoff = s.clock.now().getTime() - s.config.usageRetentionMs;
  return s.store.billing.usage.prune(tx, cutoff, dayOf(cutoff));
}

/** The hourly prune as a durable recurring timer of the injected clock (once after downtime, then hourly). */
export const PRUNE_EVERY_MS = 3_600_000;
export const usagePruneTimer: TimerHandler = {
  everyMs: () => PRUNE_EVERY_MS,
  async run(s, tx) {
    await pruneUsage(tx, s);
  },
};
