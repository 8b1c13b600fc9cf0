import { lockAccounts, post } from '../../billing/accounts.js';
import { ledgerAmount, Money } from '../../billing/money.js';
import { extensionOf, purchaseCharge, requirePayable, type Quote } from '../../billing/subscription-terms.js';
import { isoTimestamp } from '../../core/clock.js';
import type { Ctx, Services } from '../../core/context.js';
import { ApiError, validation } from '../../core/errors.js';
import { record } from '../../core/events.js';
import { schedule, type TimerHandler } from '../../core/timers.js';
import type { SubscriptionRow } from '../../store/billing/index.js';
import type { Tx } from '../../store/db.js';
import { assignIps } from '../ips/ips.js';
import { assignVlans } from '../vlans/vlans.js';

/**
 * A subscription's life (reference §16.8): bought (charged at once, 402 without funds; up to 500 per
 * request, all or nothing; an `ip` or `vlan` subscription of amount N is N subscriptions, each with a new
 * IP or VLAN), then on the clock: notices 7 days and 1 day before the end (`*_soon`, `*_very_soon`
 * events), and at the end a renewal (when `auto_renew` and not extended already; `renewal_success` /
 * `renewal_failure`) or `expire`. A renewal that falls due late buys one window from when it runs
 * (subscription-terms.ts `extensionOf`), so a clock that jumps renews once, not once per window missed.
 */
export const MAX_PER_REQUEST = 500;
const DAY_MS = 86_400_000;
const NOTICES = [
  { before: 7 * DAY_MS, kind: 'soon' },
  { before: DAY_MS, kind: 'very_soon' },
] as const;

/** The renewal and notice timers of a subscription, in the transaction that bought it. */
export async function scheduleLifecycle(tx: Tx, s: Pick<Services, 'clock'>, row: SubscriptionRow): Promise<void> {
  const now = s.clock.now().getTime();
  const end = Number(row.end_ms);
  for (const n of NOTICES)
    if (end - n.before > now)
      await schedule(tx, s, { kind: 'subscription.notice', subject: String(row.id), inMs: end - n.before - now, payload: { kind: n.kind } });
  await schedule(tx, s, { kind: 'subscription.end', subject: String(row.id), inMs: end - now });
}

/** Write a bought subscription; returns its row. */
export async function insertSubscription(
  tx: Tx,
  s: Pick<Services, 'ids' | 'clock' | 'store'>,
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
  return s.store.billing.subscriptions.insert(tx, row);
}

/** Buy quoted subscriptions for an account: one charge each, the IPs and VLANs they bring, their timers. */
export async function buy(
  tx: Tx,
  ctx: Ctx,
  owner: string,
  wanted: { q: Quote; autoRenew: boolean; parent?: SubscriptionRow }[],
): Promise<{ rows: SubscriptionRow[]; total: Money }> {
  // An ip or vlan subscription of amount N is N subscriptions of one object each: counted before any is made.
  const perObject = (w: (typeof wanted)[number]) => (w.q.resource === 'ip' || w.q.resource === 'vlan') && !w.parent && w.q.amount > 1;
  if (wanted.reduce((n, w) => n + (perObject(w) ? w.q.amount : 1), 0) > MAX_PER_REQUEST)
    throw validation('objects', `At most ${MAX_PER_REQUEST} subscriptions per request (an ip or vlan subscription of amount N counts N)`);
  const units = wanted.flatMap((w) =>
    perObject(w)
      ? Array.from({ length: w.q.amount }, () => ({ ...w, q: { ...w.q, amount: 1, gross: w.q.gross.div(w.q.amount), price: w.q.price.div(w.q.amount) } }))
      : [w],
  );
  const account = (await lockAccounts(tx, ctx, [owner])).get(owner)!;
  const total = units.reduce((sum, w) => sum.plus(ledgerAmount(w.q.price)), new Money(0));
  requirePayable(account, total);
  const rows: SubscriptionRow[] = [];
  const now = ctx.clock.now();
  for (const w of units) {
    let object: string | null = w.parent?.subscribed_object ?? null;
    const row = await insertSubscription(tx, ctx, owner, w.q, { autoRenew: w.autoRenew, parent: w.parent });
    if (!w.parent && w.q.resource === 'ip') object = (await assignIps(tx, ctx, owner, 1, { subscription: row.id }))[0]!;
    if (!w.parent && w.q.resource === 'vlan') object = (await assignVlans(tx, ctx, owner, 1, { subscription: row.id }))[0]!;
    if (object) {
      await ctx.store.billing.subscriptions.setObject(tx, row.id, object);
      row.subscribed_object = object;
    }
    await post(tx, ctx, account, [purchaseCharge(ctx, w.q, row.id, now)]);
    await scheduleLifecycle(tx, ctx, row);
    await record(tx, ctx, {
      action: w.parent ? 'extend' : 'create',
      category: 'Subscriptions',
      uuid: row.uuid,
      owner,
      actor: ctx.caller.uuid,
      details: `${row.resource} ${row.amount} until ${row.end_time}`,
    });
    rows.push(row);
  }
  return { rows, total };
}

/** A notice before the end: `renewal_soon` when it will renew, `expire_soon` when it will not (nothing when extended). */
export const noticeTimer: TimerHandler = {
  async run(s, tx, timer, payload) {
    const row = await s.store.billing.subscriptions.byId(tx, Number(timer.subject));
    if (!row || (await s.store.billing.subscriptions.extended(tx, row.id))) return;
    const kind = (payload as { kind: string }).kind;
    const action = Number(row.auto_renew) === 1 ? `renewal_${kind}` : `expire_${kind}`;
    await record(tx, s, {
      action,
      category: 'Subscriptions',
      uuid: row.uuid,
      owner: row.owner_uuid,
      actor: null,
      details: `${row.resource} ${row.amount} ends ${row.end_time}`,
    });
  },
};

/** The end of a window: renew (auto_renew, not extended yet) or expire. A renewal without funds fails and expires. */
export const endTimer: TimerHandler = {
  async run(s, tx, timer) {
    const subs = s.store.billing.subscriptions;
    const owner = await subs.ownerOf(tx, Number(timer.subject));
    if (!owner) return;
    // The account's lock first, then what it guards (as `extend` does): read under it, no extension slips in.
    const account = (await lockAccounts(tx, s, [owner])).get(owner)!;
    const row = await subs.byId(tx, Number(timer.subject));
    if (!row || (await subs.extended(tx, row.id))) return;
    const event = (action: string, details: string) =>
      record(tx, s, { action, category: 'Subscriptions', uuid: row.uuid, owner: row.owner_uuid, actor: null, details });
    if (Number(row.auto_renew) !== 1) return event('expire', `${row.resource} ${row.amount} expired ${row.end_time}`);
    let q: Quote;
    try {
      q = extensionOf(s, account.currency, row, {}, s.clock.now());
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      await event('renewal_failure', `${row.resource} ${row.amount}: ${err.message}`);
      return event('expire', `${row.resource} ${row.amount} expired ${row.end_time}`);
    }
    if (account.balance.lt(ledgerAmount(q.price))) {
      await event('renewal_failure', `${row.resource} ${row.amount}: ${ledgerAmount(q.price)} ${account.currency} needed`);
      return event('expire', `${row.resource} ${row.amount} expired ${row.end_time}`);
    }
    const renewed = await insertSubscription(tx, s, row.owner_uuid, q, { autoRenew: true, parent: row, subscribedObject: row.subscribed_object });
    await post(tx, s, account, [purchaseCharge(s, q, renewed.id, s.clock.now())]);
    await scheduleLifecycle(tx, s, renewed);
    await event('renewal_success', `${row.resource} ${row.amount} renewed until ${renewed.end_time}`);
  },
};
