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
import { listKind } from '../../core/list-kind.js';
import { Outcome, type ActionDecl } from '../../core/resource.js';
import { tableKind, type TableFilter } from '../../core/table-kind.js';
import { subscriptionRow, type SubscriptionRow } from '../../store/billing/index.js';
import type { Db, Tx } from '../../store/db.js';
import type { Criterion } from '../../store/table-pages.js';
import { buy, endTimer, MAX_PER_REQUEST, noticeTimer } from './subscription-lifecycle.js';

/**
 * `/subscriptions/`, `/subscriptioncalculator/` and `/groupedsubscriptions/` (reference §16.8): the kinds
 * and their wire form, declared over the `subscriptions` table (core/table-kind.ts; the calculator is a
 * list kind with nothing listed). Only `auto_renew` changes after purchase (its action); `extend` buys the next window
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

/** Traffic subscriptions (`tx`, `tx_…`): used up, not only ended, and only the oldest in force is consumed. */
const volume: Criterion = {
  op: 'or',
  of: [
    { column: 'resource', op: '=', values: ['tx'] },
    { column: 'resource', op: 'like', values: ['tx_%'] },
  ],
};

/** `status=`: what statusOf (billing/subscription-terms.ts) says of a row, as conditions on the table at this moment. */
async function statusConditions(ctx: Ctx): Promise<Record<string, Criterion | null>> {
  const now = ctx.clock.now().getTime();
  const consuming = [...(await consumingNow(ctx.store.db, ctx, ctx.clock.now(), ctx.caller.uuid))];
  const usedUp: Criterion = { op: 'and', of: [volume, { op: 'columns', left: 'consumed', cmp: '>=', right: 'amount' }] };
  const consumed: Criterion = { column: 'id', op: '=', values: consuming };
  const inWindow: Criterion = {
    op: 'and',
    of: [
      { column: 'start_ms', op: '<=', values: [now] },
      { column: 'end_ms', op: '>', values: [now] },
    ],
  };
  // Keys in the order the 400 lists them.
  return {
    active: { op: 'and', of: [inWindow, { op: 'or', of: [{ op: 'not', of: volume }, consumed] }] },
    inactive: {
      op: 'or',
      of: [
        { column: 'start_ms', op: '>', values: [now] },
        { op: 'and', of: [inWindow, volume, { op: 'columns', left: 'consumed', cmp: '<', right: 'amount' }, { op: 'not', of: consumed }] },
      ],
    },
    expired: { op: 'or', of: [{ column: 'end_ms', op: '<=', values: [now] }, usedUp] },
    all: null,
    notexpired: {
      op: 'and',
      of: [
        { column: 'end_ms', op: '>', values: [now] },
        { op: 'not', of: usedUp },
      ],
    },
  };
}

const listFilters: Record<string, TableFilter> = {
  status: { op: 'named', conditions: statusConditions },
  resource: { column: 'resource', op: '=', parse: (v) => (v === 'hdd' ? 'dssd' : v) },
  subscribed_object: { column: 'subscribed_object', op: '=' },
};

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

/** The last subscription of the chain `row` belongs to (what an extension extends). */
async function lastOfChain(ctx: Ctx, db: Db | Tx, row: SubscriptionRow): Promise<SubscriptionRow> {
  const chain = await ctx.store.billing.subscriptions.chain(db, row.root_id ?? row.id);
  return chain[chain.length - 1]!;
}

async function mine(ctx: Ctx, id: string): Promise<SubscriptionRow> {
  const row = await ownSubscription(ctx, ctx.store.db, id);
  if (!row) throw notFound(id);
  return row;
}

async function descendantsOf(ctx: Ctx, rows: readonly SubscriptionRow[]): Promise<Map<number, SubscriptionRow[]>> {
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

/** What showing subscriptions needs beyond each row: the moment, and the traffic subscriptions being consumed. */
async function statusContext(ctx: Ctx) {
  const now = ctx.clock.now();
  return { now, consuming: await consumingNow(ctx.store.db, ctx, now, ctx.caller.uuid) };
}

const stored = (r: Record<string, unknown>) => subscriptionRow(r as SubscriptionRow);

export const subscriptions = tableKind({
  kind: 'subscriptions',
  table: 'subscriptions',
  flavour: 'model',
  fields,
  defaultLimit: 20,
  listMethods: ['get', 'post'],
  detailMethods: ['get', 'post'],
  filters: listFilters,
  filtering: { subscribed_object: ['exact'] } as unknown as Record<string, string>,
  order: [['id', 'desc']],
  detail: { column: 'id', parse: (id) => (/^\d{1,15}$/.test(id) ? Number(id) : undefined) },
  row: stored,
  context: async (ctx, rows) => ({ kids: await descendantsOf(ctx, rows), ...(await statusContext(ctx)) }),
  present: (r, { now, kids, consuming }) => presentSubscription(r, now, kids.get(r.id), consuming),
  // The recorded list carries the listed subscriptions' total price beside them.
  beside: (rows) => ({ price: ledgerAmount(rows.reduce((sum, r) => sum.plus(r.price), new Money(0))) }),
  wire: { listBeside: { price: Type.String() }, create: { beside: { price: Type.String() } } },
  actions: { extend: extendAction, auto_renew: autoRenewAction },
  timers: { 'subscription.notice': noticeTimer, 'subscription.end': endTimer },
  service: {
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
});

/** `POST /subscriptioncalculator/`: what buying would cost, nothing bought (200). Its `extend` prices an extension. */
export const subscriptionCalculator = listKind<never>({
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
  // Nothing is listed and nothing found by id (404).
  items: () => ({ items: [] }),
  present: () => ({}),
  service: {
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
});

/** `GET /groupedsubscriptions/`: the first subscription of each chain, its extensions as `descendants`, the chain's end. */
export const groupedSubscriptions = tableKind({
  kind: 'groupedsubscriptions',
  table: 'subscriptions',
  flavour: 'model',
  fields,
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: [],
  scope: [{ column: 'root_id', op: 'set', values: [false] }],
  filters: listFilters,
  filtering: {},
  order: [['id', 'desc']],
  row: stored,
  context: async (ctx, roots) => ({
    chains: await ctx.store.billing.subscriptions.chains(
      ctx.store.db,
      roots.map((r) => r.id),
    ),
    ...(await statusContext(ctx)),
  }),
  present: (root, { now, chains, consuming }) => {
    const chain = chains.get(root.id) ?? [root];
    return { ...presentSubscription(root, now, chain.slice(1), consuming), end_time: chain[chain.length - 1]!.end_time };
  },
});

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
