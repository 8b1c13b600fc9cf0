import type { Expression, ExpressionBuilder, SqlBool, Selectable } from 'kysely';
import { validation, notFound } from '../../core/errors.js';
import { f } from '../../core/fields.js';
import type { CollectionDecl, ListQuery } from '../../core/resource.js';
import type { Ctx } from '../../core/context.js';
import type { Database, LedgerTable } from '../../store/schema.js';

/**
 * `GET /ledger/` (reference §16.4): the caller's debits and credits, newest first (`order_by=time` for
 * oldest first), filtered by `billing_cycle` and `time` (`__gt`, `__gte`, `__lt`, `__lte`), paged in the
 * database on the (owner, time) index.
 */
type Eb = ExpressionBuilder<Database, 'ledger'>;
type Entry = Selectable<LedgerTable>;

const COMPARE = { '': '=', __gt: '>', __gte: '>=', __lt: '<', __lte: '<=' } as const;

/** A time filter value as the stored ISO form compares: `2014-06-05`, `2014-06-05T09:06:06`, with or without zone. */
function timeValue(raw: string, point: string): string {
  const ms = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(raw) || raw.length <= 10 ? raw : `${raw}Z`);
  if (Number.isNaN(ms)) throw validation(point, `${raw} is not a date or date and time`);
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000+00:00');
}

function cycleValue(raw: string, point: string): number {
  if (!/^\d{1,15}$/.test(raw)) throw validation(point, `${raw} is not a billing cycle number`);
  return Number(raw);
}

const FILTERS: Record<string, (eb: Eb, values: string[]) => Expression<SqlBool>> = {};
for (const [suffix, op] of Object.entries(COMPARE)) {
  FILTERS[`time${suffix}`] = (eb, v) => eb.or(v.map((x) => eb('ledger.time', op, timeValue(x, `time${suffix}`))));
  FILTERS[`billing_cycle${suffix}`] = (eb, v) => eb.or(v.map((x) => eb('ledger.billing_cycle', op, cycleValue(x, `billing_cycle${suffix}`))));
}

const present = (e: Entry) => ({
  amount: e.amount,
  billing_cycle: e.billing_cycle === null ? null : Number(e.billing_cycle),
  end: e.end_balance,
  human_interval: e.human_interval,
  id: String(e.id),
  initial: e.initial,
  interval: e.interval === null ? null : Number(e.interval),
  poll_time: e.poll_time,
  reason: e.reason,
  resource_amount: e.resource_amount,
  time: e.time,
});

function ordering(q: ListQuery): 'asc' | 'desc' {
  const order = q.filters.get('order_by')?.flat() ?? [];
  for (const o of order) if (o !== 'time' && o !== '-time') throw validation('order_by', `Cannot order by ${o}; ledger entries order by time or -time`);
  return order[order.length - 1] === 'time' ? 'asc' : 'desc';
}

async function list(ctx: Ctx, q: ListQuery) {
  let base = ctx.store.db.selectFrom('ledger').where('ledger.owner_uuid', '=', ctx.caller.uuid);
  for (const [name, groups] of q.filters) {
    const apply = FILTERS[name];
    if (apply) for (const values of groups) base = base.where((eb) => apply(eb, values));
  }
  const dir = ordering(q);
  const rows = await ctx.store.resources.page(base.selectAll().orderBy('ledger.time', dir).orderBy('ledger.id', dir), q.limit, q.offset).execute();
  const short = (q.offset === 0 || rows.length > 0) && (q.limit === 0 || rows.length < q.limit);
  const total = short ? q.offset + rows.length : Number((await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
  return { total, objects: (rows as Entry[]).map(present) };
}

export const ledger: CollectionDecl = {
  shape: 'collection',
  kind: 'ledger',
  flavour: 'model',
  fields: {
    amount: f.decimal({ default: 0, help: 'Amount of the operation, positive for debits, negative for credits' }),
    billing_cycle: f.integer({ nullable: true, help: 'Billing cycle that generated this charge' }),
    end: f.decimal({ default: 0, help: 'Amount of money after the operation' }),
    human_interval: f.string({ nullable: true, help: 'Human readable interval of bill entry' }),
    id: f.string({ unique: true, default: '', help: 'Unicode string data. Ex: "Hello World"' }),
    initial: f.decimal({ default: 0, help: 'Amount of money before the operation' }),
    interval: f.integer({ nullable: true, help: 'Interval of bill entry' }),
    poll_time: f.datetime({ help: 'A date & time as a string. Ex: "2010-11-10T03:07:43"' }),
    reason: f.string({ help: 'Description of the operation' }),
    resource_amount: f.string({ nullable: true, default: 1, help: 'Resource amount' }),
    time: f.datetime({ help: 'A date & time as a string. Ex: "2010-11-10T03:07:43"' }),
  },
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: ['get'],
  filtering: { billing_cycle: 1, time: 1 },
  unlistedFilters: [...Object.keys(FILTERS).filter((k) => k !== 'time' && k !== 'billing_cycle'), 'order_by'],
  ordering: ['time'],
  service: {
    list,
    async get(ctx, id) {
      const row = /^\d{1,15}$/.test(id)
        ? await ctx.store.db.selectFrom('ledger').selectAll().where('owner_uuid', '=', ctx.caller.uuid).where('id', '=', Number(id)).executeTakeFirst()
        : undefined;
      if (!row) throw notFound(id);
      return present(row);
    },
  },
};
