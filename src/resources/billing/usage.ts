import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import { isoTimestamp } from '../../core/clock.js';
import type { Ctx } from '../../core/context.js';
import { notFound, validation } from '../../core/errors.js';
import { f } from '../../core/fields.js';
import type { CollectionDecl, ListQuery, ListResult } from '../../core/resource.js';
import { dayOf, usagePruneTimer } from '../../billing/usage-records.js';
import type { Database } from '../../store/schema.js';

/**
 * `GET /burstusage/`, `/dailyburstusage/` and `/usage/` (reference §16.7, Appendix A `burst_usage`): the
 * caller's usage records as the billing poll wrote them (billing/usage-records.ts says what a record is and
 * why). Each list reads one table on its (owner, time) index, filters and pages in the database, newest
 * first; nothing on a request is proportional to the account's history beyond the page it asks for.
 *
 * Filter values are a date (`2014-11-17`, that day 00:00 UTC) or a date and time (with or without a zone,
 * UTC when none); anything else is a 400 naming the filter. `/burstusage/` without a `date` filter shows
 * the last 30 days (the documented default); `date=<day>` is that whole day, `date=<date and time>` that
 * poll. `/usage/` takes the reference's `poll_time_gt`/`poll_time_lt` and the usual `poll_time__gt`, ...
 */
const DAY_MS = 86_400_000;
const DEFAULT_WINDOW_MS = 30 * DAY_MS;

/** A filter value as ms since the epoch: a day means its 00:00 UTC. */
function moment(raw: string, point: string): number {
  const trimmed = raw.trim();
  const ms = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?([zZ]|[+-]\d{2}:?\d{2})?)?$/.test(trimmed)
    ? Date.parse(/[zZ]|[+-]\d{2}:?\d{2}$/.test(trimmed) || trimmed.length === 10 ? trimmed.replace(' ', 'T') : `${trimmed.replace(' ', 'T')}Z`)
    : NaN;
  if (Number.isNaN(ms)) throw validation(point, `${raw} is not a date or date and time`);
  return ms;
}
const isDay = (raw: string) => /^\d{4}-\d{2}-\d{2}$/.test(raw.trim());

type Op = '<' | '<=' | '>' | '>=';
const COMPARE: Record<string, Op> = { __lt: '<', __lte: '<=', __gt: '>', __gte: '>=' };

/** Read the declared filters into (filter name, values) pairs, refusing unknown ones (none reach here). */
function filterGroups(q: ListQuery, known: readonly string[]): [string, string[]][] {
  const out: [string, string[]][] = [];
  for (const [name, groups] of q.filters) if (known.includes(name)) for (const values of groups) out.push([name, values]);
  return out;
}

/** Page a query in the database; count (`count`) only when the page does not tell the total. */
async function paged<Q extends { limit(n: number): Q; offset(n: number): Q; execute(): Promise<unknown[]> }>(
  ctx: Ctx,
  ordered: Q,
  count: () => Promise<number | string | bigint>,
  q: ListQuery,
): Promise<{ total: number; rows: Awaited<ReturnType<Q['execute']>> }> {
  const rows = (await ctx.store.resources.page(ordered, q.limit, q.offset).execute()) as Awaited<ReturnType<Q['execute']>>;
  const short = (q.offset === 0 || rows.length > 0) && (q.limit === 0 || rows.length < q.limit);
  return { total: short ? q.offset + rows.length : Number(await count()), rows };
}

// ---------------------------------------------------------------------------------------------- /burstusage/

type BurstEb = ExpressionBuilder<Database, 'burst_usage'>;
const BURST_FILTERS = ['date', ...Object.keys(COMPARE).map((s) => `date${s}`)];

function burstCondition(eb: BurstEb, name: string, values: string[]): Expression<SqlBool> {
  const op = COMPARE[name.slice('date'.length)];
  return eb.or(
    values.map((raw) => {
      const ms = moment(raw, name);
      if (op) return eb('burst_usage.date_ms', op, ms);
      return isDay(raw) ? eb.and([eb('burst_usage.date_ms', '>=', ms), eb('burst_usage.date_ms', '<', ms + DAY_MS)]) : eb('burst_usage.date_ms', '=', ms);
    }),
  );
}

const presentBurst = (r: { uuid: string; amount: string; resource_type: string; usage: number | string; date_ms: number | string }) => ({
  amount: r.amount,
  date: isoTimestamp(new Date(Number(r.date_ms))),
  resource_type: r.resource_type,
  usage: Number(r.usage),
  uuid: r.uuid,
});

async function listBurst(ctx: Ctx, q: ListQuery): Promise<ListResult> {
  let base = ctx.store.db.selectFrom('burst_usage').where('burst_usage.owner_uuid', '=', ctx.caller.uuid);
  const groups = filterGroups(q, BURST_FILTERS);
  for (const [name, values] of groups) base = base.where((eb) => burstCondition(eb, name, values));
  if (!groups.length) base = base.where('burst_usage.date_ms', '>=', ctx.clock.now().getTime() - DEFAULT_WINDOW_MS);
  const ordered = base.select(['uuid', 'amount', 'resource_type', 'usage', 'date_ms']).orderBy('burst_usage.date_ms', 'desc').orderBy('burst_usage.id', 'desc');
  const { total, rows } = await paged(ctx, ordered, async () => (await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n, q);
  return { total, objects: rows.map(presentBurst) };
}

export const burstUsage: CollectionDecl = {
  shape: 'collection',
  kind: 'burstusage',
  flavour: 'model',
  fields: {
    amount: f.decimal({ default: 0, help: 'Amount of money billed' }),
    date: f.datetime({ readonly: true, nullable: true, help: 'A date & time as a string. Ex: "2010-11-10T03:07:43"' }),
    resource_type: f.string({ help: 'Type of the used resource (e.g cpu, dssd, mem, ip, vlan)' }),
    usage: f.integer({ default: 0, help: 'Usage recorded for the day' }),
    uuid: f.string({ help: 'Unicode string data. Ex: "Hello World"' }),
  },
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: ['get'],
  filtering: { date: 1 },
  unlistedFilters: BURST_FILTERS.filter((k) => k !== 'date'),
  // The records' retention prune (billing/usage-records.ts) runs with the kind that serves them.
  timers: { 'usage.prune': usagePruneTimer },
  service: {
    list: listBurst,
    async get(ctx, id) {
      const row = await ctx.store.db
        .selectFrom('burst_usage')
        .select(['uuid', 'amount', 'resource_type', 'usage', 'date_ms'])
        .where('uuid', '=', id)
        .where('owner_uuid', '=', ctx.caller.uuid)
        .executeTakeFirst();
      if (!row) throw notFound(id);
      return presentBurst(row);
    },
  },
};

// ----------------------------------------------------------------------------------------- /dailyburstusage/

type DailyEb = ExpressionBuilder<Database, 'burst_usage_daily'>;
const DAILY_FILTERS = Object.keys(COMPARE).map((s) => `date${s}`);

/** A day row (its 00:00) compared with a moment, as a comparison of `YYYY-MM-DD` strings. */
function dailyCondition(eb: DailyEb, name: string, values: string[]): Expression<SqlBool> {
  const op = COMPARE[name.slice('date'.length)]!;
  return eb.or(
    values.map((raw) => {
      const ms = moment(raw, name);
      switch (op) {
        case '>': // day 00:00 > t  ⇔  day after t's day
          return eb('burst_usage_daily.day', '>', dayOf(ms));
        case '>=': // day 00:00 ≥ t  ⇔  day after the day of the instant before t
          return eb('burst_usage_daily.day', '>', dayOf(ms - 1));
        case '<': // day 00:00 < t  ⇔  day before the day of (the instant before t) + 1 day
          return eb('burst_usage_daily.day', '<', dayOf(ms - 1 + DAY_MS));
        case '<=':
          return eb('burst_usage_daily.day', '<', dayOf(ms + DAY_MS));
      }
    }),
  );
}

async function listDaily(ctx: Ctx, q: ListQuery): Promise<ListResult> {
  let base = ctx.store.db.selectFrom('burst_usage_daily').where('burst_usage_daily.owner_uuid', '=', ctx.caller.uuid);
  for (const [name, values] of filterGroups(q, DAILY_FILTERS)) base = base.where((eb) => dailyCondition(eb, name, values));
  const ordered = base
    .select(['day', 'amount', 'resource_type', 'unit_seconds'])
    .orderBy('burst_usage_daily.day', 'desc')
    .orderBy('burst_usage_daily.resource_type', 'asc');
  const { total, rows } = await paged(ctx, ordered, async () => (await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n, q);
  return {
    total,
    objects: rows.map((r) => ({
      amount: r.amount,
      date: r.day,
      resource_type: r.resource_type,
      // The day's burst in unit-days (billing/usage-records.ts).
      usage: Number(BigInt(r.unit_seconds) / 86_400n),
    })),
  };
}

export const dailyBurstUsage: CollectionDecl = {
  shape: 'collection',
  kind: 'dailyburstusage',
  flavour: 'model',
  fields: {
    amount: f.decimal({ default: 0, help: 'Amount of money billed for the day' }),
    date: f.string({ readonly: true, help: 'The day (UTC) as a string. Ex: "2014-11-17"' }),
    resource_type: f.string({ help: 'Type of the used resource (e.g cpu, dssd, mem, ip, vlan)' }),
    usage: f.integer({ default: 0, help: 'Usage recorded for the day' }),
  },
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: [],
  filtering: { date__gt: 1, date__lt: 1 },
  unlistedFilters: ['date__gte', 'date__lte'],
  service: {
    list: listDaily,
    get: (_ctx, id) => Promise.reject(notFound(id)),
  },
};

// ---------------------------------------------------------------------------------------------------- /usage/

type UsageEb = ExpressionBuilder<Database, 'usage_records'>;
const USAGE_FILTERS: Record<string, Op> = {
  poll_time_gt: '>',
  poll_time_lt: '<',
  poll_time__gt: '>',
  poll_time__gte: '>=',
  poll_time__lt: '<',
  poll_time__lte: '<=',
};

const usageCondition = (eb: UsageEb, name: string, values: string[]): Expression<SqlBool> =>
  eb.or(values.map((raw) => eb('usage_records.poll_ms', USAGE_FILTERS[name]!, moment(raw, name))));

/**
 * A page of records from the rows of one account's polls (one row per poll, `n` records each): the rows'
 * counts, newest first, say which rows hold records [offset, offset + limit) and the total; only those rows'
 * records are read. The work is a count per poll in the filtered range, not per record.
 */
async function listUsage(ctx: Ctx, q: ListQuery): Promise<ListResult> {
  // One snapshot: the counts and the rows they point at agree even while the prune runs.
  return ctx.store.snapshot(async (db) => {
    let base = db.selectFrom('usage_records').where('usage_records.owner_uuid', '=', ctx.caller.uuid);
    for (const [name, values] of filterGroups(q, Object.keys(USAGE_FILTERS))) base = base.where((eb) => usageCondition(eb, name, values));
    const counts = await base.select(['id', 'n']).orderBy('usage_records.poll_ms', 'desc').orderBy('usage_records.id', 'desc').execute();
    let total = 0;
    const wanted: { id: number; skip: number; take: number }[] = [];
    const end = q.limit === 0 ? Infinity : q.offset + q.limit;
    for (const c of counts) {
      const n = Number(c.n);
      const from = Math.max(q.offset, total);
      const to = Math.min(end, total + n);
      if (to > from) wanted.push({ id: Number(c.id), skip: from - total, take: to - from });
      total += n;
    }
    const rows = new Map<number, { poll_ms: number | string; records: string }>();
    for (let i = 0; i < wanted.length; i += 500) {
      const ids = wanted.slice(i, i + 500).map((w) => w.id);
      for (const r of await db.selectFrom('usage_records').select(['id', 'poll_ms', 'records']).where('id', 'in', ids).execute()) rows.set(Number(r.id), r);
    }
    const objects: Record<string, unknown>[] = [];
    for (const w of wanted) {
      const row = rows.get(w.id)!;
      const poll_time = isoTimestamp(new Date(Number(row.poll_ms)));
      for (const [resource, uuid, amount] of (JSON.parse(row.records) as [string, string, string][]).slice(w.skip, w.skip + w.take))
        objects.push({ amount, poll_time, resource, uuid });
    }
    return { total, objects };
  });
}

export const usage: CollectionDecl = {
  shape: 'collection',
  kind: 'usage',
  flavour: 'model',
  fields: {
    amount: f.string({ help: 'What the object used at the poll, in base units (MHz, bytes, objects)' }),
    poll_time: f.datetime({ help: 'A date & time as a string. Ex: "2010-11-10T03:07:43"' }),
    resource: f.string({ help: 'The usage key, most specific first (e.g intel_cpu, amd_mem, dssd, ip, vlan)' }),
    uuid: f.string({ help: 'The server, drive, snapshot, IP or VLAN that used it' }),
  },
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: [],
  filtering: { poll_time_gt: 1, poll_time_lt: 1 },
  unlistedFilters: Object.keys(USAGE_FILTERS).filter((k) => k.startsWith('poll_time__')),
  service: {
    list: listUsage,
    get: (_ctx, id) => Promise.reject(notFound(id)),
  },
};
