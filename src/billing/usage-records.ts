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
 * - `/usage/`: one row per object per usage key per poll: what a server, drive, snapshot, IP or VLAN used
 *   at the poll, in base units (MHz, bytes, objects), under its most specific key (`intel_cpu`, `dssd`), as
 *   the recorded `{"amount": "6000", "resource": "intel_cpu", "uuid": <server>}`. Whether it was covered
 *   by a subscription does not matter here: it is use, not money.
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
 *   would be 288 times that and in no unit). Kept as running sums updated by each poll (one read and one
 *   upsert per 500 accounts), so a request never sums an account's history.
 *
 * Every write is set-wise: bounded multi-row inserts (a poll of 10,000 servers is a few dozen statements).
 * The tables grow every 5 minutes per object, so they are kept for `--usage-retention` (config.ts) and
 * pruned by a durable hourly timer (`usage.prune`); a one-account reset empties them (admin/reset.ts).
 */
type S = Pick<Services, 'store' | 'clock' | 'config' | 'ids'>;

/** Rows per INSERT: 1,000 rows of ≤7 values stay far below both engines' bound-parameter limits. */
const CHUNK = 1000;

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
    g.unitSeconds += BigInt(Math.round(units)) * BigInt(Math.round(seconds));
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
  const objects = [];
  for (const u of usage)
    if (u.uuid !== undefined && u.amount > 0 && (u.since === undefined || u.since < pollMs))
      objects.push({ owner_uuid: u.owner, poll_ms: pollMs, resource: u.keys[0]!, uuid: u.uuid, amount: String(u.amount) });
  for (let i = 0; i < objects.length; i += CHUNK)
    await tx
      .insertInto('usage_records')
      .values(objects.slice(i, i + CHUNK))
      .execute();

  const day = dayOf(pollMs);
  const bursts = batch.flatMap(({ account, charges }) => burstOf(charges).map((b) => ({ owner: account.owner, ...b })));
  if (!bursts.length) return;
  const rows = bursts.map((b) => ({
    uuid: s.ids.uuid(),
    owner_uuid: b.owner,
    date_ms: pollMs,
    resource_type: b.resource,
    amount: ledgerAmount(b.amount),
    usage: b.usage,
  }));
  for (let i = 0; i < rows.length; i += CHUNK)
    await tx
      .insertInto('burst_usage')
      .values(rows.slice(i, i + CHUNK))
      .execute();

  // The day's running sums: read what earlier polls of the day left, add, write back (upsert).
  const owners = [...new Set(bursts.map((b) => b.owner))];
  const before = new Map<string, { amount: string; unit_seconds: string }>();
  for (let i = 0; i < owners.length; i += 500) {
    const found = await tx
      .selectFrom('burst_usage_daily')
      .select(['owner_uuid', 'resource_type', 'amount', 'unit_seconds'])
      .where('day', '=', day)
      .where('owner_uuid', 'in', owners.slice(i, i + 500))
      .execute();
    for (const r of found) before.set(`${r.owner_uuid} ${r.resource_type}`, r);
  }
  const daily = bursts.map((b) => {
    const had = before.get(`${b.owner} ${b.resource}`);
    return {
      owner_uuid: b.owner,
      day,
      resource_type: b.resource,
      amount: ledgerAmount(b.amount.plus(had?.amount ?? 0)),
      unit_seconds: String(b.unitSeconds + BigInt(had?.unit_seconds ?? 0)),
    };
  });
  for (let i = 0; i < daily.length; i += CHUNK)
    await tx
      .insertInto('burst_usage_daily')
      .values(daily.slice(i, i + CHUNK))
      .onConflict((oc) =>
        oc.columns(['owner_uuid', 'day', 'resource_type']).doUpdateSet((eb) => ({ amount: eb.ref('excluded.amount'), unit_seconds: eb.ref('excluded.unit_seconds') })),
      )
      .execute();
}

/** Delete the usage records older than the retention: one indexed range delete per table. */
export async function pruneUsage(tx: Tx, s: Pick<Services, 'clock' | 'config'>): Promise<Record<string, number>> {
  const cutoff = s.clock.now().getTime() - s.config.usageRetentionMs;
  const usage = await tx.deleteFrom('usage_records').where('poll_ms', '<', cutoff).executeTakeFirst();
  const burst = await tx.deleteFrom('burst_usage').where('date_ms', '<', cutoff).executeTakeFirst();
  // A day is kept while any of it is within the retention.
  const daily = await tx.deleteFrom('burst_usage_daily').where('day', '<', dayOf(cutoff)).executeTakeFirst();
  return {
    usage_records: Number(usage.numDeletedRows),
    burst_usage: Number(burst.numDeletedRows),
    burst_usage_daily: Number(daily.numDeletedRows),
  };
}

/** The hourly prune as a durable recurring timer of the injected clock (once after downtime, then hourly). */
export const PRUNE_EVERY_MS = 3_600_000;
export const usagePruneTimer: TimerHandler = {
  everyMs: () => PRUNE_EVERY_MS,
  async run(s, tx) {
    await pruneUsage(tx, s);
  },
};
