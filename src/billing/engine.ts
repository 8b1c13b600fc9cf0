import type { Services } from '../core/context.js';
import type { Meter, Usage } from '../core/metering.js';
import { nextDueExcept, type TimerHandler } from '../core/timers.js';
import type { Db, Tx } from '../store/db.js';
import { lockAccounts, postMany, type Charge } from './accounts.js';
import { burstReason, CYCLE_MS, cycleOf, humanInterval, nextBoundary } from './cycle.js';
import { levelOf, readLevels, shiftLevels } from './levels.js';
import { Money } from './money.js';
import { consumeVolume, subscribedAt } from './subscription-cover.js';
import { checkFunds, type ServerStopper } from './out-of-money.js';
import { recordUsage } from './usage-records.js';

/**
 * The metering engine (reference §16.4, §16.9). At every 5-minute poll of the injected clock it measures
 * every account's usage at once (the kinds' meters, set-wise), charges what is in use beyond what the
 * account subscribed at the burst price in force during the cycle, one ledger entry per (resource,
 * interval), and then moves the burst levels on (levels.ts). The poll is a recurring durable timer with
 * catch-up: cycles missed while the service was down are billed, each once, when it is back; the ledger's
 * unique (account, cycle, resource, interval) index makes a second billing of a cycle impossible. The same
 * transaction records what each object used and each account's burst (usage-records.ts, reference §16.7).
 */
type S = Pick<Services, 'store' | 'clock' | 'config' | 'sim'>;

/** Usage of every account (or one) at `at`, from every kind's meter; volumes are those of `from`..`at`. */
export async function measure(s: S, db: Db | Tx, meters: readonly Meter[], at: Date, owner?: string, from?: Date): Promise<Usage[]> {
  const out: Usage[] = [];
  for (const meter of meters) out.push(...(await meter(s, db, at, owner, from)));
  return out;
}

/** What an account's subscriptions cover, per usage key. */
export type Subscribed = ReadonlyMap<string, number>;

/** The seconds of a cycle (or span) ending at `poll` that a use begun at `since` covered (0..length). */
export function coveredSeconds(poll: Date, since: number | undefined, cycle = CYCLE_MS / 1000): number {
  if (since === undefined) return cycle;
  return Math.max(0, Math.min(cycle, Math.round((poll.getTime() - since) / 1000)));
}

/**
 * One account's burst charges for the cycle ending at `poll`: usage beyond the subscriptions (the most
 * specific key's subscription first), grouped per (charged resource, seconds), priced at `levels`. Use in
 * time (cpu, storage, licences) is charged per unit per second; volumes (traffic sent in the cycle) per
 * unit, in one entry for the cycle. What subscriptions covered of a volume is added to `consumed` (per
 * key): traffic subscriptions are used up by volume.
 */
export function chargesOf(
  s: S,
  usage: readonly Usage[],
  subscribed: Subscribed,
  levels: Record<string, number>,
  currency: string,
  poll: Date,
  spanSeconds = CYCLE_MS / 1000,
  consumed?: Map<string, number>,
): Charge[] {
  const left = new Map(subscribed);
  const groups = new Map<string, { resource: string; seconds: number; amount: number; volume: boolean }>();
  // Long uses are covered first: a subscription covers what ran the whole cycle before a newcomer.
  const items = usage.map((u) => ({ u, seconds: u.volume ? spanSeconds : coveredSeconds(poll, u.since, spanSeconds) })).sort((a, b) => b.seconds - a.seconds);
  for (const { u, seconds } of items) {
    if (seconds <= 0 || u.amount <= 0) continue;
    let amount = u.amount;
    for (const key of u.keys) {
      const pool = left.get(key) ?? 0;
      const take = Math.min(pool, amount);
      if (take > 0) {
        left.set(key, pool - take);
        if (u.volume && consumed) consumed.set(key, (consumed.get(key) ?? 0) + take);
      }
      amount -= take;
    }
    if (amount <= 0) continue;
    const resource = u.keys.find((k) => s.config.pricing.rowAt(k, 0, currency));
    if (!resource) continue; // nothing prices it (sms; a key without a generic fallback): free
    const id = `${resource}/${seconds}/${u.volume ? 'volume' : 'time'}`;
    const g = groups.get(id);
    if (g) g.amount += amount;
    else groups.set(id, { resource, seconds, amount, volume: u.volume === true });
  }
  const cycle = cycleOf(new Date(poll.getTime() - 1));
  const charges: Charge[] = [];
  for (const g of [...groups.values()].sort((a, b) => a.resource.localeCompare(b.resource) || b.seconds - a.seconds)) {
    const perSecond = s.config.pricing.perUnitSecond(g.resource, levelOf(levels, g.resource), currency)!;
    const amount = perSecond.times(g.amount).times(g.volume ? 1 : g.seconds);
    if (amount.isZero()) continue;
    charges.push({
      amount,
      reason: burstReason(g.resource, s.config.pricing.unitOf(g.resource), new Money(g.amount), g.seconds, poll),
      poll_time: poll,
      billing_cycle: cycle,
      interval: g.seconds,
      human_interval: humanInterval(g.seconds),
      resource: g.resource,
      resource_amount: String(g.amount),
      ...(g.volume ? { volume: true } : {}),
    });
  }
  return charges;
}

/** Usage per account, and per usage key across the cloud (what burst levels follow). */
function byAccount(usage: readonly Usage[]): { accounts: Map<string, Usage[]>; cloud: Map<string, number> } {
  const accounts = new Map<string, Usage[]>();
  const cloud = new Map<string, number>();
  for (const u of usage) {
    const list = accounts.get(u.owner);
    if (list) list.push(u);
    else accounts.set(u.owner, [u]);
    const generic = u.keys[u.keys.length - 1]!;
    cloud.set(generic, (cloud.get(generic) ?? 0) + u.amount);
  }
  return { accounts, cloud };
}

/**
 * Bill the cycle that ends at `poll` for every account, then move the burst levels on. Accounts running
 * out of money are warned, and stopped at zero (out-of-money.ts).
 */
export async function billCycle(
  s: Services,
  tx: Tx,
  meters: readonly Meter[],
  poll: Date,
  stoppers: readonly ServerStopper[] = [],
  spanSeconds = CYCLE_MS / 1000,
): Promise<{ accounts: number; entries: number }> {
  const usage = await measure(s, tx, meters, poll, undefined, new Date(poll.getTime() - spanSeconds * 1000));
  const { accounts, cloud } = byAccount(usage);
  const read = await readLevels(tx, s);
  const levels = read.current;
  const locked = await lockAccounts(tx, s, [...accounts.keys()]);
  // Subscriptions in force during the cycle (one ending at the poll still covered it).
  const inForce = new Date(poll.getTime() - 1);
  const subscribed = await subscribedAt(tx, s, inForce);
  let entries = 0;
  const volumes: { owner: string; consumed: Map<string, number> }[] = [];
  const batch = [...accounts].map(([owner, used]) => {
    const account = locked.get(owner)!;
    const consumed = new Map<string, number>();
    const charges = chargesOf(s, used, subscribed.get(owner) ?? new Map(), levels, account.currency, poll, spanSeconds, consumed);
    if (consumed.size) volumes.push({ owner, consumed });
    entries += charges.length;
    return { account, charges };
  });
  await postMany(tx, s, batch);
  // Only accounts whose traffic a traffic subscription covered this cycle (few): their subscriptions used up.
  for (const { owner, consumed } of volumes) for (const [key, amount] of consumed) await consumeVolume(tx, s, owner, key, amount, inForce);
  await recordUsage(tx, s, poll, usage, batch);
  for (const { account, charges } of batch)
    await checkFunds(
      tx,
      s,
      account,
      charges.reduce((sum, c) => sum.plus(c.amount), new Money(0)),
      stoppers,
    );
  await shiftLevels(tx, s, cloud, read);
  return { accounts: accounts.size, entries };
}

/**
 * Polls further behind than this are billed as one span (a service down for days, a clock set years
 * ahead): one entry per resource for the whole span, measured as things stood when it ended, then the
 * last day cycle by cycle. Every second is billed exactly once either way; the ledger stays bounded.
 */
export const CATCH_UP_CYCLES = 288;

/**
 * Cycles billed in one transaction when several are due (catching up, or a clock moved ahead): each is
 * measured and billed on its own, as if its poll had run on time, but they share one timer claim and one
 * commit. A batch stops before any other timer falls due (a subscription ending, a server stopping), so
 * the polls and the rest of the simulated world keep their order.
 */
export const CYCLES_PER_RUN = 24;

/** The poll as a durable recurring timer, on the cycle boundaries of the injected clock. */
export function billingTimer(meters: readonly Meter[], stoppers: readonly ServerStopper[] = []): TimerHandler {
  return {
    everyMs: () => CYCLE_MS,
    catchUp: true,
    firstAt: (now) => nextBoundary(now),
    async run(s, tx, timer) {
      const due = new Date(timer.due_ms);
      const behind = Math.floor((s.clock.now().getTime() - due.getTime()) / CYCLE_MS);
      if (behind <= CATCH_UP_CYCLES) {
        await billCycle(s, tx, meters, due, stoppers);
        if (behind < 1) return;
        const other = await nextDueExcept(tx, timer.kind);
        const stopAt = other ?? Infinity;
        let poll = due;
        for (let n = 1; n < Math.min(CYCLES_PER_RUN, behind + 1); n++) {
          const next = new Date(poll.getTime() + CYCLE_MS);
          if (next.getTime() >= stopAt) break;
          await billCycle(s, tx, meters, next, stoppers);
          poll = next;
        }
        return { nextAt: new Date(poll.getTime() + CYCLE_MS) };
      }
      // Bill from the cycle this poll closes to where the last day of cycles begins, in one span.
      const spanEnd = new Date(due.getTime() + (behind - CATCH_UP_CYCLES) * CYCLE_MS);
      await billCycle(s, tx, meters, spanEnd, stoppers, (spanEnd.getTime() - due.getTime()) / 1000 + CYCLE_MS / 1000);
      return { nextAt: new Date(spanEnd.getTime() + CYCLE_MS) };
    },
  };
}
