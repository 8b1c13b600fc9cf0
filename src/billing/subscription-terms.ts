import { isoTimestamp, LATEST_TIME_MS, representable } from '../core/clock.js';
import type { Services } from '../core/context.js';
import { ApiError, validation } from '../core/errors.js';
import type { SubscriptionRow } from '../store/billing/index.js';
import type { Account, Charge } from './accounts.js';
import { displayAmount } from './cycle.js';
import { Money } from './money.js';
import { addPeriod, parsePeriod, windowOf, type Period } from './periods.js';

/**
 * The terms of a subscription (reference §16.8, §16.9), pure: which resources and amounts may be bought, a
 * quote (what a window of a resource costs at the subscription price, level 0, less the period discount of
 * `/discount/`), the window an extension or a renewal buys, a subscription's status at a moment, and the
 * ledger entry of a purchase. What subscriptions cover is subscription-cover.ts; the API kinds and their
 * lifecycle (purchase, notices, renewal) are resources/billing/subscription-*.ts.
 */
type S = Pick<Services, 'config'>;

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

/** 402 when the account cannot pay `total` (spec "Errors": buying without funds). */
export function requirePayable(account: Account, total: Money): void {
  if (account.balance.lt(total))
    throw new ApiError(
      'billing',
      `Insufficient funds: this costs ${total.toFixed(2)} ${account.currency}, the balance is ${account.balance.toFixed(2)} ${account.currency}`,
    );
}
