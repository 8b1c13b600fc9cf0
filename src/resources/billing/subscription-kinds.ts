import Type from 'typebox';
import { lockAccounts } from '../../billing/accounts.js';
import { ledgerAmount, Money } from '../../billing/money.js';
import { timedeltaText } from '../../billing/periods.js';
import { consumingNow } from '../../billing/subscription-cover.js';
import { extensionOf, quote, statusOf, type Quote } from '../../billing/subscription-terms.js';
import { isoTimestamp } from '../../core/clock.js';
import type { Ctx } from '../../core/context.js';
import { notFound, validation } from '../../core/errors.js';
import { record } from '../../core/events.js';
import { f } from '../../core/fields.js';
import type { Obj } from '../../core/input.js';
import { Outcome, type ActionDecl, type CollectionDecl, type ListQuery } from '../../core/resource.js';
import { subscriptionRow, type SubscriptionRow } from '../../store/billing/index.js';
import type { Db, Tx } from '../../store/db.js';
import { buy, endTimer, MAX_PER_REQUEST, noticeTimer } from './subscription-lifecycle.js';

/**
 * `/subscriptions/`, `/subscriptioncalculator/` and `/groupedsubscriptions/` (reference §16.8): the kinds
 * and their wire form. Only `auto_renew` changes after purchase (its action); `extend` buys the next window
 * of a chain. Buying, notices and renewal are subscription-lifecycle.ts; prices and windows
 * billing/subscription-terms.ts.
 */
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

function autoRenewOf(raw: unknown): boolean {
  if (raw === undefined || raw === null) return true;
  if (typeof raw !== 'boolean') throw validation('auto_renew', 'auto_renew is true or false');
  return raw;
}

async function currencyOf(ctx: Ctx): Promise<string> {
  return (await ctx.store.billing.accounts.currency(ctx.store.db, ctx.caller.uuid)) ?? ctx.config.currency;
}

/** A subscription of the caller, or undefined (an id that cannot be one included). */
async function ownSubscription(ctx: Ctx, db: Db | Tx, id: string): Promise<SubscriptionRow | undefined> {
  return /^\d{1,15}$/.test(id) ? ctx.store.billing.subscriptions.own(db, ctx.caller.uuid, Number(id)) : undefined;
}

/** The chain a subscription belongs to, first to last (the first and its extensions). */
const chainOf = (ctx: Ctx, db: Db | Tx, row: SubscriptionRow) => ctx.store.billing.subscriptions.chain(db, row.root_id ?? row.id);

/** The last subscription of the chain `row` belongs to (what an extension extends). */
async function lastOfChain(ctx: Ctx, db: Db | Tx, row: SubscriptionRow): Promise<SubscriptionRow> {
  const chain = await chainOf(ctx, db, row);
  return chain[chain.length - 1]!;
}

async function mine(ctx: Ctx, id: string): Promise<SubscriptionRow> {
  const row = await ownSubscription(ctx, ctx.store.db, id);
  if (!row) throw notFound(id);
  return row;
}

async function listFilters(ctx: Ctx, q: ListQuery) {
  const now = ctx.clock.now().getTime();
  const consuming = [...(await consumingNow(ctx.store.db, ctx, ctx.clock.now(), ctx.caller.uuid))];
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
  for (const k of await ctx.store.billing.subscriptions.children(
    ctx.store.db,
    rows.map((r) => r.id),
  )) {
    const parent = Number(k.parent_id);
    out.set(parent, [...(out.get(parent) ?? []), k]);
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
  const consuming = await consumingNow(ctx.store.db, ctx, now, ctx.caller.uuid);
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
      const row = await ownSubscription(ctx, tx, id);
      if (!row) throw notFound(id);
      const last = await lastOfChain(ctx, tx, row);
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
      await ctx.store.billing.subscriptions.setAutoRenew(tx, row.id, next);
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
      return presentSubscription(row, now, kids.get(row.id), await consumingNow(ctx.store.db, ctx, now, ctx.caller.uuid));
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
        return presentQuote(extensionOf(ctx, await currencyOf(ctx), await lastOfChain(ctx, ctx.store.db, row), body));
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
      const consuming = await consumingNow(ctx.store.db, ctx, now, ctx.caller.uuid);
      for (const root of roots) {
        const chain = await chainOf(ctx, ctx.store.db, root);
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
