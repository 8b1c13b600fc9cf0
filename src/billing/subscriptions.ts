import type { Selectable } from 'kysely';
import { isoTimestamp, LATEST_TIME_MS, representable } from '../core/clock.js';
import type { Services } from '../core/context.js';
import { ApiError, validation } from '../core/errors.js';
import type { Db, Tx } from '../store/db.js';
import type { SubscriptionsTable } from '../store/schema.js';
import type { Account, Charge } from './accounts.js';
import { displayAmount } from './cycle.js';
import { ledgerAmount, Money } from './money.js';
import { addPeriod, parsePeriod, timedeltaText, windowOf, type Period } from './periods.js';

/**
 * Subscriptions as billing sees them (reference §16.8, §16.9): a quote (what a window of a resource costs
 * at the subscription price, level 0, less the period discount of `/discount/`), the rows bought, what
 * they cover at a moment (read by every billing poll and by `/currentusage/`), and their API form. The
 * API kind (resources/billing/subscriptions.ts) validates requests, creates the IPs and VLANs bought, and
 * runs renewals.
 */
type S = Pick<Services, 'store' | 'clock' | 'config'>;
export type SubscriptionRow = Selectable<SubscriptionsTable>;

/** Traffic is bought and used by volume, not by time (reference §16.8: "for tx the time parameters are ignored"). */
export const isVolume = (resource: string): boolean => resource === 'tx' || /^tx_/.test(resource);

/** `hdd` is the deprecated name of `dssd`. */
export const resourceKey = (name: string): string => (name === 'hdd' ? 'dssd' : name);

export interface Quote {
  resource: string;
  amount: number;
  start: Date;
  end: Date;
  /** The period asked, as text, when the window came from one (an extension re-applies it). */
  period: string | null;
  gross: Money;
  discountPercent: Money;
  price: Money;
}

/** A resource the account may subscribe to: anything priced at level 0 in its currency (licences included). */
export function checkResource(s: S, raw: unknown, currency: string): string {
  if (typeof raw !== 'string' || !raw) throw validation('resource', 'This field is required');
  const key = resourceKey(raw);
  if (!s.config.pricing.rowAt(key, 0, currency)) throw validation('resource', `Cannot subscribe to ${raw}; resources: ${s.config.pricing.priced.join(', ')}`);
  return key;
}

/** A positive whole amount in the resource's base unit (bytes, MHz, objects); numeric strings accepted. */
export function checkAmount(raw: unknown): number {
  const n = typeof raw === 'string' && /^\d{1,18}$/.test(raw.trim()) ? Number(raw) : raw;
  if (raw === undefined || raw === null) return 1;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n <= 0)
    throw validation('amount', 'The amount is a positive whole number in the unit of the resource');
  return n;
}

/** The biggest discount whose minimum period the window reaches (`/discount/`). */
function discountFor(s: S, start: Date, end: Date): Money {
  let best = new Money(0);
  for (const d of s.config.pricing.discounts) {
    // A day's grace: windows are rounded to noon, and "1 year" from a noon start ends a noon later.
    if (addPeriod(start, parsePeriod(d.period)).getTime() <= end.getTime() + 86_400_000 && new Money(d.value).gt(best)) best = new Money(d.value);
  }
  return best;
}

/** What `amount` of `resource` over `start..end` costs at the subscription price, discount applied. */
export function priceWindow(
  s: S,
  currency: string,
  resource: string,
  amount: number,
  start: Date,
  end: Date,
): Omit<Quote, 'resource' | 'amount' | 'start' | 'end' | 'period'> {
  const row = s.config.pricing.rowAt(resource, 0, currency)!;
  const units = isVolume(resource) ? new Money(amount) : new Money(amount).times((end.getTime() - start.getTime()) / 1000);
  const gross = new Money(row.price).div(row.multiplier).times(units);
  const discountPercent = isVolume(resource) ? new Money(0) : discountFor(s, start, end);
  return { gross, discountPercent, price: gross.minus(gross.times(discountPercent)) };
}

/** Quote one requested subscription (the calculator's answer, and what a purchase charges). */
export function quote(s: S, currency: string, input: Record<string, unknown>, now: Date): Quote {
  const resource = checkResource(s, input.resource, currency);
  const amount = checkAmount(input.amount);
  const isTx = isVolume(resource);
  const window = isTx
    ? { start: now, end: addPeriod(now, { years: 1, months: 0, weeks: 0, days: 0, hours: 0, minutes: 0 }), period: null }
    : windowOf(input, now);
  const period = !isTx && window.period && typeof input.period === 'string' ? input.period.trim() : null;
  return { resource, amount, start: window.start, end: window.end, period, ...priceWindow(s, currency, resource, amount, window.start, window.end) };
}

/**
 * The window of an extension of `last` (reference §16.8): its asked period again from where it ends, or the
 * same length when it was bought with an end_time. A renewal (`renewingAt`) that falls due after the window it
 * would buy is already over starts then instead: one charge, not one per window missed while the service
 * was down. Either way the new window ends after the one it extends, so its own end never falls due in the
 * past of this one's. A window past the last representable time is a 400 (the renewal expires instead).
 */
export function extensionOf(s: S, currency: string, last: SubscriptionRow, input: Record<string, unknown>, renewingAt?: Date): Quote {
  const asked = typeof input.period === 'string' && input.period.trim() ? input.period.trim() : null;
  const periodText = asked ?? last.period;
  const period: Period | null = periodText ? parsePeriod(periodText) : null;
  const lastStart = Number(last.start_ms);
  const lastEnd = Number(last.end_ms);
  const endFrom = (start: Date) => (period ? addPeriod(start, period) : new Date(start.getTime() + (lastEnd - lastStart)));
  let start = new Date(lastEnd);
  let end = endFrom(start);
  if (renewingAt && end.getTime() <= renewingAt.getTime()) {
    start = renewingAt;
    end = endFrom(start);
  }
  if (!(end.getTime() > lastEnd) || !representable(end.getTime()))
    throw validation('period', `The extension would end after ${isoTimestamp(new Date(LATEST_TIME_MS)).slice(0, 10)}, the last day this service represents`);
  return {
    resource: last.resource,
    amount: Number(last.amount),
    start,
    end,
    period: periodText,
    ...priceWindow(s, currency, last.resource, Number(last.amount), start, end),
  };
}

/**
 * A subscription's status (reference §16.8): `inactive` before its window, `expired` after it — or, for
 * traffic, once used up; a traffic subscription in its window is `active` while it is the one being
 * consumed (`consuming`: the oldest of the account's traffic subscriptions not used up), else `inactive`.
 */
export function statusOf(
  row: Pick<SubscriptionRow, 'start_ms' | 'end_ms' | 'resource' | 'amount' | 'consumed'>,
  now: Date,
  consuming?: ReadonlySet<number | string>,
  id?: number,
): 'active' | 'inactive' | 'expired' {
  const t = now.getTime();
  if (t < Number(row.start_ms)) return 'inactive';
  if (t >= Number(row.end_ms)) return 'expired';
  if (isVolume(row.resource)) {
    if (Number(row.consumed ?? 0) >= Number(row.amount)) return 'expired';
    if (consuming && id !== undefined && !consuming.has(id)) return 'inactive';
  }
  return 'active';
}

/**
 * The traffic subscriptions being consumed now, one per (account, resource): the oldest in its window and
 * not used up. `owner` limits it to one account.
 */
export async function consumingNow(db: Db | Tx, at: Date, owner?: string): Promise<Set<number>> {
  const t = at.getTime();
  let q = db
    .selectFrom('subscriptions')
    .select((eb) => ['owner_uuid', 'resource', eb.fn.min<number>('id').as('id')])
    .where((eb) => eb.or([eb('resource', '=', 'tx'), eb('resource', 'like', 'tx_%')]))
    .where('start_ms', '<=', t)
    .where('end_ms', '>', t)
    .whereRef('consumed', '<', 'amount');
  if (owner !== undefined) q = q.where('owner_uuid', '=', owner);
  return new Set((await q.groupBy(['owner_uuid', 'resource']).execute()).map((r) => Number(r.id)));
}

/** Traffic covered by an account's traffic subscriptions: used up in order, the oldest first. */
export async function consumeVolume(tx: Tx, owner: string, resource: string, amount: number, at: Date): Promise<void> {
  const t = at.getTime();
  const rows = await tx
    .selectFrom('subscriptions')
    .select(['id', 'amount', 'consumed'])
    .where('owner_uuid', '=', owner)
    .where('resource', '=', resource)
    .where('start_ms', '<=', t)
    .where('end_ms', '>', t)
    .whereRef('consumed', '<', 'amount')
    .orderBy('id')
    .execute();
  let left = amount;
  for (const r of rows) {
    if (left <= 0) break;
    const take = Math.min(Number(r.amount) - Number(r.consumed), left);
    await tx
      .updateTable('subscriptions')
      .set({ consumed: Number(r.consumed) + take })
      .where('id', '=', Number(r.id))
      .execute();
    left -= take;
  }
}

const decimalText = (d: Money) => (d.isZero() ? '0' : d.toFixed(10));

/** A quote as the calculator prints it (recorded `subscriptioncalculator`). */
export function presentQuote(q: Quote): Record<string, unknown> {
  const discount = q.gross.times(q.discountPercent);
  return {
    amount: String(q.amount),
    discount_amount: ledgerAmount(discount),
    discount_percent: decimalText(q.discountPercent),
    discounts: q.discountPercent.isZero() ? {} : { period: q.discountPercent.toFixed(10) },
    end_time: isoTimestamp(q.end),
    free_tier: false,
    period: timedeltaText(q.end.getTime() - q.start.getTime()),
    price: ledgerAmount(q.price),
    resource: q.resource,
    start_time: isoTimestamp(q.start),
    was_billed: true,
  };
}

export const subscriptionUri = (id: number | string) => `/api/2.0/subscriptions/${id}/`;

/** A stored subscription as the API shows it (recorded `subscription_list`). */
export function presentSubscription(
  row: SubscriptionRow,
  now: Date,
  descendants: readonly SubscriptionRow[] = [],
  consuming?: ReadonlySet<number>,
): Record<string, unknown> {
  const percent = new Money(row.discount_percent);
  return {
    amount: String(row.amount),
    auto_renew: Number(row.auto_renew) === 1,
    descendants: descendants.map((d) => subscriptionUri(d.id)),
    discount_amount: row.discount_amount,
    discount_percent: decimalText(percent),
    discounts: percent.isZero() ? {} : { period: percent.toFixed(10) },
    end_time: row.end_time,
    free_tier: false,
    id: String(row.id),
    period: timedeltaText(Number(row.end_ms) - Number(row.start_ms)),
    price: row.price,
    remaining: String(Math.max(0, Number(row.amount) - Number(row.consumed ?? 0))),
    resource: row.resource,
    resource_uri: subscriptionUri(row.id),
    start_time: row.start_time,
    status: statusOf(row, now, consuming, row.id),
    subscribed_object: row.subscribed_object,
    uuid: row.uuid,
    was_billed: true,
  };
}

/** The ledger entry of a purchase. */
export function purchaseCharge(s: S, q: Quote, id: number, now: Date): Charge {
  const unit = s.config.pricing.unitOf(q.resource);
  const shown = displayAmount(unit, new Money(q.amount));
  return {
    amount: q.price,
    reason: `Subscription ${id}: ${shown}${unit ? ` ${unit}` : ''} of ${q.resource} from ${isoTimestamp(q.start).slice(0, 16).replace('T', ' ')} to ${isoTimestamp(q.end).slice(0, 16).replace('T', ' ')}`,
    poll_time: now,
    resource: `subscription:${id}`,
    resource_amount: String(q.amount),
  };
}

/** Write a bought subscription; returns its row. */
export async function insertSubscription(
  tx: Tx,
  s: Pick<Services, 'ids' | 'clock'>,
  owner: string,
  q: Quote,
  opts: { autoRenew: boolean; subscribedObject?: string | null; parent?: SubscriptionRow },
): Promise<SubscriptionRow> {
  const row = {
    uuid: s.ids.uuid(),
    owner_uuid: owner,
    resource: q.resource,
    amount: q.amount,
    start_time: isoTimestamp(q.start),
    end_time: isoTimestamp(q.end),
    start_ms: q.start.getTime(),
    end_ms: q.end.getTime(),
    period: q.period,
    price: ledgerAmount(q.price),
    discount_amount: ledgerAmount(q.gross.times(q.discountPercent)),
    discount_percent: q.discountPercent.toFixed(10),
    auto_renew: opts.autoRenew ? 1 : 0,
    subscribed_object: opts.subscribedObject ?? null,
    parent_id: opts.parent?.id ?? null,
    root_id: opts.parent ? (opts.parent.root_id ?? opts.parent.id) : null,
    created_at: isoTimestamp(s.clock.now()),
  };
  const made = await tx.insertInto('subscriptions').values(row).returningAll().executeTakeFirstOrThrow();
  return subscriptionRow(made);
}

/** 402 when the account cannot pay `total` (spec "Errors": buying without funds). */
export function requirePayable(account: Account, total: Money): void {
  if (account.balance.lt(total))
    throw new ApiError(
      'billing',
      `Insufficient funds: this costs ${total.toFixed(2)} ${account.currency}, the balance is ${account.balance.toFixed(2)} ${account.currency}`,
    );
}

/** What active subscriptions cover at `at`, per account and usage key: one grouped read. */
export async function subscribedAt(db: Db | Tx, at: Date, owner?: string): Promise<Map<string, Map<string, number>>> {
  const t = at.getTime();
  let q = db
    .selectFrom('subscriptions')
    // What is left of them: a traffic subscription is used up by volume (`consumed`); others have 0.
    .select((eb) => ['owner_uuid', 'resource', eb.fn.sum<number>(eb('amount', '-', eb.ref('consumed'))).as('amount')])
    .where('start_ms', '<=', t)
    .where('end_ms', '>', t)
    .whereRef('consumed', '<', 'amount');
  if (owner !== undefined) q = q.where('owner_uuid', '=', owner);
  const rows = await q.groupBy(['owner_uuid', 'resource']).execute();
  const out = new Map<string, Map<string, number>>();
  for (const r of rows) {
    let mine = out.get(r.owner_uuid);
    if (!mine) out.set(r.owner_uuid, (mine = new Map()));
    mine.set(r.resource, Number(r.amount));
  }
  return out;
}

/** A row as read: PostgreSQL hands bigint columns back as strings; the code works with numbers. */
export const subscriptionRow = (r: SubscriptionRow): SubscriptionRow => ({
  ...r,
  id: Number(r.id),
  amount: Number(r.amount),
  parent_id: r.parent_id === null ? null : Number(r.parent_id),
  root_id: r.root_id === null ? null : Number(r.root_id),
  consumed: Number(r.consumed ?? 0),
  start_ms: Number(r.start_ms),
  end_ms: Number(r.end_ms),
});

/** A subscription of the caller, or undefined. */
export async function ownSubscription(db: Db | Tx, owner: string, id: string): Promise<SubscriptionRow | undefined> {
  if (!/^\d{1,15}$/.test(id)) return undefined;
  const row = await db.selectFrom('subscriptions').selectAll().where('owner_uuid', '=', owner).where('id', '=', Number(id)).executeTakeFirst();
  return row && subscriptionRow(row);
}

/** The chain a subscription belongs to, first to last (the first and its extensions). */
export async function chainOf(db: Db | Tx, row: SubscriptionRow): Promise<SubscriptionRow[]> {
  const root = row.root_id ?? row.id;
  const rows = await db
    .selectFrom('subscriptions')
    .selectAll()
    .where((eb) => eb.or([eb('id', '=', root), eb('root_id', '=', root)]))
    .orderBy('id')
    .execute();
  return rows.map(subscriptionRow);
}
