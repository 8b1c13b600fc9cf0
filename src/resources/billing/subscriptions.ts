import Type from 'typebox';
import { lockAccounts, post } from '../../billing/accounts.js';
import { ledgerAmount, Money } from '../../billing/money.js';
import {
  chainOf,
  consumingNow,
  extensionOf,
  insertSubscription,
  ownSubscription,
  presentQuote,
  presentSubscription,
  purchaseCharge,
  quote,
  requirePayable,
  subscriptionRow,
  type Quote,
  type SubscriptionRow,
} from '../../billing/subscriptions.js';
import type { Ctx, Services } from '../../core/context.js';
import { ApiError, notFound, validation } from '../../core/errors.js';
import { record } from '../../core/events.js';
import { f } from '../../core/fields.js';
import type { Obj } from '../../core/input.js';
import { Outcome, type ActionDecl, type CollectionDecl, type ListQuery } from '../../core/resource.js';
import { schedule, type TimerHandler } from '../../core/timers.js';
import type { Tx } from '../../store/db.js';
import { assignIps } from '../ips/ips.js';
import { assignVlans } from '../vlans/vlans.js';

/**
 * `/subscriptions/`, `/subscriptioncalculator/` and `/groupedsubscriptions/` (reference §16.8). Buying
 * charges the balance at once (402 without funds; up to 500 per request, all or nothing); an `ip` or
 * `vlan` subscription of amount N is N subscriptions, each with a new IP or VLAN (`subscribed_object`).
 * Only `auto_renew` changes after purchase (its action); `extend` buys the next window of a chain. On the
 * clock: notices 7 days and 1 day before the end (`*_soon`, `*_very_soon` events), and at the end a renewal
 * (when `auto_renew` and not extended already; `renewal_success` / `renewal_failure`) or `expire`.
 */
const MAX_PER_REQUEST = 500;
const DAY_MS = 86_400_000;
const NOTICES = [
  { before: 7 * DAY_MS, kind: 'soon' },
  { before: DAY_MS, kind: 'very_soon' },
] as const;

const fields = {
  amount: f.string({ default: 1, help: 'Subscription amount' }),
  auto_renew: f.boolean({ default: true, help: 'States if the subscription will auto renew on expire' }),
  descendants: f.related({
    readonly: true,
    nullable: true,
    help: 'Subscriptions that have been extended from the current one',
    output: Type.Array(Type.String()),
  }),
  discount_amount: f.decimal({ nullable: true, blank: true, help: 'Amount of discount' }),
  discount_percent: f.decimal({ nullable: true, blank: true, help: 'Percent of discount' }),
  discounts: f.dict({ readonly: true, nullable: true, blank: true, help: 'All discounts for this subscription' }),
  end_time: f.datetime({ nullable: true, help: 'End time of subscription' }),
  free_tier: f.boolean({ default: false }),
  id: f.string({ unique: true, default: '' }),
  period: f.string({ help: 'Duration of the subscription' }),
  price: f.decimal({ default: 0, help: 'Subscription price' }),
  remaining: f.string({ nullable: true, help: 'Amount remaining' }),
  resource: f.string({ help: 'Name of resource associated with the subscription' }),
  resource_uri: f.string({ readonly: true }),
  start_time: f.datetime({ help: 'Start time of subscription' }),
  status: f.string({ readonly: true, help: 'Status of the subscription' }),
  subscribed_object: f.string({ nullable: true, help: 'Subscribed object - the target of this subscription, if applicable' }),
  uuid: f.string({ nullable: true, unique: true }),
  was_billed: f.boolean({ default: false }),
};

const STATUSES = ['active', 'inactive', 'expired', 'all', 'notexpired'];

/** The renewal and notice timers of a subscription, in the transaction that bought it. */
async function scheduleLifecycle(tx: Tx, s: Pick<Services, 'clock'>, row: SubscriptionRow): Promise<void> {
  const now = s.clock.now().getTime();
  const end = Number(row.end_ms);
  for (const n of NOTICES)
    if (end - n.before > now)
      await schedule(tx, s, { kind: 'subscription.notice', subject: String(row.id), inMs: end - n.before - now, payload: { kind: n.kind } });
  await schedule(tx, s, { kind: 'subscription.end', subject: String(row.id), inMs: end - now });
}

function autoRenewOf(raw: unknown): boolean {
  if (raw === undefined || raw === null) return true;
  if (typeof raw !== 'boolean') throw validation('auto_renew', 'auto_renew is true or false');
  return raw;
}

/** Buy quoted subscriptions for an account: one charge each, the IPs and VLANs they bring, their timers. */
async function buy(
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
      await tx.updateTable('subscriptions').set({ subscribed_object: object }).where('id', '=', row.id).execute();
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

async function currencyOf(ctx: Ctx): Promise<string> {
  const row = await ctx.store.db.selectFrom('billing_accounts').select('currency').where('owner_uuid', '=', ctx.caller.uuid).executeTakeFirst();
  return row?.currency ?? ctx.config.currency;
}

/** The last subscription of the chain `row` belongs to (what an extension extends). */
async function lastOfChain(db: Parameters<typeof chainOf>[0], row: SubscriptionRow): Promise<SubscriptionRow> {
  const chain = await chainOf(db, row);
  return chain[chain.length - 1]!;
}

async function mine(ctx: Ctx, id: string): Promise<SubscriptionRow> {
  const row = await ownSubscription(ctx.store.db, ctx.caller.uuid, id);
  if (!row) throw notFound(id);
  return row;
}

async function listFilters(ctx: Ctx, q: ListQuery) {
  const now = ctx.clock.now().getTime();
  const consuming = [...(await consumingNow(ctx.store.db, ctx.clock.now(), ctx.caller.uuid))];
  let base = ctx.store.db.selectFrom('subscriptions').where('owner_uuid', '=', ctx.caller.uuid);
  for (const values of q.filters.get('status') ?? []) {
    for (const v of values) if (!STATUSES.includes(v)) throw validation('status', `status is one of ${STATUSES.join(', ')}`);
    if (values.includes('all')) continue;
    base = base.where((eb) => {
      // Traffic subscriptions: used up = expired; in their window, active only while being consumed.
      const volume = eb.or([eb('resource', '=', 'tx'), eb('resource', 'like', 'tx_%')]);
      const usedUp = eb.and([volume, eb('consumed', '>=', eb.ref('amount'))]);
      const consumed = consuming.length ? eb('id', 'in', consuming) : eb.lit(false);
      const inWindow = eb.and([eb('start_ms', '<=', now), eb('end_ms', '>', now)]);
      return eb.or(
        values.map((v) =>
          v === 'active'
            ? eb.and([inWindow, eb.or([eb.not(volume), consumed])])
            : v === 'inactive'
              ? eb.or([eb('start_ms', '>', now), eb.and([inWindow, volume, eb('consumed', '<', eb.ref('amount')), eb.not(consumed)])])
              : v === 'expired'
                ? eb.or([eb('end_ms', '<=', now), usedUp])
                : eb.and([eb('end_ms', '>', now), eb.not(usedUp)]),
        ),
      );
    });
  }
  for (const values of q.filters.get('resource') ?? [])
    base = base.where(
      'resource',
      'in',
      values.map((v) => (v === 'hdd' ? 'dssd' : v)),
    );
  for (const values of q.filters.get('subscribed_object') ?? []) base = base.where('subscribed_object', 'in', values);
  return base;
}

async function descendantsOf(ctx: Ctx, rows: SubscriptionRow[]): Promise<Map<number, SubscriptionRow[]>> {
  const out = new Map<number, SubscriptionRow[]>();
  const ids = rows.map((r) => r.id);
  if (!ids.length) return out;
  const kids = await ctx.store.db.selectFrom('subscriptions').selectAll().where('parent_id', 'in', ids).orderBy('id').execute();
  for (const k of kids) {
    const parent = Number(k.parent_id);
    out.set(parent, [...(out.get(parent) ?? []), subscriptionRow(k)]);
  }
  return out;
}

async function listSubscriptions(ctx: Ctx, q: ListQuery) {
  const base = await listFilters(ctx, q);
  const rows = ((await ctx.store.resources.page(base.selectAll().orderBy('id', 'desc'), q.limit, q.offset).execute()) as SubscriptionRow[]).map(
    subscriptionRow,
  );
  const short = (q.offset === 0 || rows.length > 0) && (q.limit === 0 || rows.length < q.limit);
  const total = short ? q.offset + rows.length : Number((await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
  const kids = await descendantsOf(ctx, rows);
  const now = ctx.clock.now();
  const consuming = await consumingNow(ctx.store.db, now, ctx.caller.uuid);
  // The recorded list carries the listed subscriptions' total price beside them.
  const price = rows.reduce((sum, r) => sum.plus(r.price), new Money(0));
  return { total, objects: rows.map((r) => presentSubscription(r, now, kids.get(r.id), consuming)), extra: { price: ledgerAmount(price) } };
}

const extendAction: ActionDecl = {
  permission: 'EDIT',
  async: false,
  answer: { schema: { type: 'object', properties: { objects: { type: 'array' }, price: { type: 'string' } }, required: ['objects', 'price'] } },
  async run(ctx, id, body) {
    const currency = await currencyOf(ctx);
    const made = await ctx.store.transaction(async (tx) => {
      // The chain's end is read under the account's lock that the charge is written under: concurrent
      // extends queue there and each extends the window the one before it bought.
      await lockAccounts(tx, ctx, [ctx.caller.uuid]);
      const row = await ownSubscription(tx, ctx.caller.uuid, id);
      if (!row) throw notFound(id);
      const last = await lastOfChain(tx, row);
      return buy(tx, ctx, ctx.caller.uuid, [{ q: extensionOf(ctx, currency, last, body), autoRenew: Number(last.auto_renew) === 1, parent: last }]);
    });
    const now = ctx.clock.now();
    return { objects: made.rows.map((r) => presentSubscription(r, now)), price: ledgerAmount(made.total) };
  },
};

const autoRenewAction: ActionDecl = {
  permission: 'EDIT',
  async: false,
  answer: { object: 'subscriptions' },
  async run(ctx, id, body) {
    const row = await mine(ctx, id);
    const next = body.auto_renew === undefined || body.auto_renew === null ? Number(row.auto_renew) !== 1 : autoRenewOf(body.auto_renew);
    await ctx.store.transaction(async (tx) => {
      await tx
        .updateTable('subscriptions')
        .set({ auto_renew: next ? 1 : 0 })
        .where('id', '=', row.id)
        .execute();
      await record(tx, ctx, {
        action: 'auto_renew',
        category: 'Subscriptions',
        uuid: row.uuid,
        owner: row.owner_uuid,
        actor: ctx.caller.uuid,
        details: String(next),
      });
    });
    return presentSubscription({ ...row, auto_renew: next ? 1 : 0 }, ctx.clock.now());
  },
};

/** Only the owner sees a subscription: no ACLs apply. */
async function authorize(ctx: Ctx, id: string) {
  const row = await mine(ctx, id);
  return { uuid: String(row.id), owner_uuid: row.owner_uuid };
}

/** A notice before the end: `renewal_soon` when it will renew, `expire_soon` when it will not (nothing when extended). */
const noticeTimer: TimerHandler = {
  async run(s, tx, timer, payload) {
    const row = await tx.selectFrom('subscriptions').selectAll().where('id', '=', Number(timer.subject)).executeTakeFirst();
    if (!row) return;
    const extended = await tx.selectFrom('subscriptions').select('id').where('parent_id', '=', row.id).executeTakeFirst();
    if (extended) return;
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
const endTimer: TimerHandler = {
  async run(s, tx, timer) {
    const owner = await tx.selectFrom('subscriptions').select('owner_uuid').where('id', '=', Number(timer.subject)).executeTakeFirst();
    if (!owner) return;
    // The account's lock first, then what it guards (as `extend` does): read under it, no extension slips in.
    const account = (await lockAccounts(tx, s, [owner.owner_uuid])).get(owner.owner_uuid)!;
    const found = await tx.selectFrom('subscriptions').selectAll().where('id', '=', Number(timer.subject)).executeTakeFirst();
    if (!found) return;
    const row = subscriptionRow(found);
    const extended = await tx.selectFrom('subscriptions').select('id').where('parent_id', '=', row.id).executeTakeFirst();
    if (extended) return;
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

export const subscriptions: CollectionDecl = {
  shape: 'collection',
  kind: 'subscriptions',
  flavour: 'model',
  fields,
  defaultLimit: 20,
  listMethods: ['get', 'post'],
  detailMethods: ['get', 'post'],
  filtering: { subscribed_object: ['exact'] } as unknown as Record<string, string>,
  unlistedFilters: ['status', 'resource'],
  wire: { listBeside: { price: Type.String() }, create: { beside: { price: Type.String() } } },
  actions: { extend: extendAction, auto_renew: autoRenewAction },
  timers: { 'subscription.notice': noticeTimer, 'subscription.end': endTimer },
  service: {
    list: listSubscriptions,
    async get(ctx, id) {
      const row = await mine(ctx, id);
      const kids = await descendantsOf(ctx, [row]);
      const now = ctx.clock.now();
      return presentSubscription(row, now, kids.get(row.id), await consumingNow(ctx.store.db, now, ctx.caller.uuid));
    },
    async create(ctx, inputs) {
      if (inputs.length > MAX_PER_REQUEST) throw validation('objects', `At most ${MAX_PER_REQUEST} subscriptions per request`);
      const currency = await currencyOf(ctx);
      const now = ctx.clock.now();
      const wanted = inputs.map((input) => ({ q: quote(ctx, currency, input, now), autoRenew: autoRenewOf(input.auto_renew) }));
      const made = await ctx.store.transaction((tx) => buy(tx, ctx, ctx.caller.uuid, wanted));
      return new Outcome(
        made.rows.map((r) => presentSubscription(r, now)),
        { beside: { price: ledgerAmount(made.total) } },
      );
    },
    authorize,
  },
};

/** `POST /subscriptioncalculator/`: what buying would cost, nothing bought (200). Its `extend` prices an extension. */
export const subscriptionCalculator: CollectionDecl = {
  shape: 'collection',
  kind: 'subscriptioncalculator',
  flavour: 'model',
  fields: Object.fromEntries(
    Object.entries(fields).filter(
      ([k]) => !['descendants', 'id', 'remaining', 'resource_uri', 'status', 'subscribed_object', 'uuid', 'auto_renew'].includes(k),
    ),
  ),
  defaultLimit: 20,
  listMethods: ['post'],
  detailMethods: [],
  filtering: {},
  // Nothing is made: the quotes answer 200.
  wire: { create: { status: 200, beside: { price: Type.String() } } },
  actions: {
    extend: {
      permission: 'EDIT',
      async: false,
      answer: { object: 'subscriptioncalculator' },
      async run(ctx, id, body) {
        const row = await mine(ctx, id);
        return presentQuote(extensionOf(ctx, await currencyOf(ctx), await lastOfChain(ctx.store.db, row), body));
      },
    },
  },
  service: {
    async list() {
      return { total: 0, objects: [] };
    },
    async get(_ctx, id) {
      throw notFound(id);
    },
    async create(ctx, inputs) {
      if (inputs.length > MAX_PER_REQUEST) throw validation('objects', `At most ${MAX_PER_REQUEST} subscriptions per request`);
      const currency = await currencyOf(ctx);
      const now = ctx.clock.now();
      const quotes = inputs.map((input) => quote(ctx, currency, input, now));
      const total = quotes.reduce((sum, q) => sum.plus(ledgerAmount(q.price)), new Money(0));
      return new Outcome(quotes.map(presentQuote), { beside: { price: ledgerAmount(total) } });
    },
    authorize,
  },
};

/** `GET /groupedsubscriptions/`: the first subscription of each chain, its extensions as `descendants`, the chain's end. */
export const groupedSubscriptions: CollectionDecl = {
  shape: 'collection',
  kind: 'groupedsubscriptions',
  flavour: 'model',
  fields,
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: [],
  filtering: {},
  unlistedFilters: ['status', 'resource', 'subscribed_object'],
  service: {
    async list(ctx, q) {
      const base = (await listFilters(ctx, q)).where('root_id', 'is', null);
      const roots = ((await ctx.store.resources.page(base.selectAll().orderBy('id', 'desc'), q.limit, q.offset).execute()) as SubscriptionRow[]).map(
        subscriptionRow,
      );
      const total = Number((await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
      const now = ctx.clock.now();
      const objects: Obj[] = [];
      const consuming = await consumingNow(ctx.store.db, now, ctx.caller.uuid);
      for (const root of roots) {
        const chain = await chainOf(ctx.store.db, root);
        const last = chain[chain.length - 1]!;
        objects.push({ ...presentSubscription(root, now, chain.slice(1), consuming), end_time: last.end_time });
      }
      return { total, objects };
    },
    async get(_ctx, id) {
      throw notFound(id);
    },
  },
};
