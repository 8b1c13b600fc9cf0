import { isoTimestamp } from '../../core/clock.js';
import { validation } from '../../core/errors.js';
import { f } from '../../core/fields.js';
import { tableKind, type TableFilter } from '../../core/table-kind.js';
import { dayOf, usagePruneTimer } from '../../billing/usage-records.js';
import type { BurstUsageDailyTable, BurstUsageTable, RowOf } from '../../store/schema.js';

/**
 * `GET /burstusage/`, `/dailyburstusage/` and `/usage/` (reference §16.7, Appendix A `burst_usage`): the
 * caller's usage records as the billing poll wrote them (billing/usage-records.ts says what a record is and
 * why). Each is a kind over its own table (core/table-kind.ts): it reads one table on its (owner, time)
 * index, filters and pages in the database, newest first; nothing on a request is proportional to the
 * account's history beyond the page it asks for.
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

/** `<name>__lt`, `__lte`, `__gt`, `__gte`: one filter per comparison. */
function ranges(name: string, filter: (op: '<' | '<=' | '>' | '>=') => TableFilter): Record<string, TableFilter> {
  const out: Record<string, TableFilter> = {};
  for (const [suffix, op] of [
    ['__lt', '<'],
    ['__lte', '<='],
    ['__gt', '>'],
    ['__gte', '>='],
  ] as const)
    out[`${name}${suffix}`] = filter(op);
  return out;
}

// ---------------------------------------------------------------------------------------------- /burstusage/

export const burstUsage = tableKind<RowOf<BurstUsageTable>>({
  kind: 'burstusage',
  table: 'burst_usage',
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
  filters: {
    // A day is that whole day; a date and time, that poll.
    date: {
      column: 'date_ms',
      op: 'span',
      parse: (raw, point) => {
        const ms = moment(raw, point);
        return isDay(raw) ? { from: ms, to: ms + DAY_MS } : { at: ms };
      },
    },
    ...ranges('date', (op) => ({ column: 'date_ms', op, parse: moment })),
  },
  filtering: { date: 1 },
  // Without a date filter: the last 30 days (the documented default).
  unfiltered: [{ column: 'date_ms', op: '>=', value: (ctx) => ctx.clock.now().getTime() - DEFAULT_WINDOW_MS }],
  order: [
    ['date_ms', 'desc'],
    ['id', 'desc'],
  ],
  columns: ['uuid', 'amount', 'resource_type', 'usage', 'date_ms'],
  detail: { column: 'uuid', parse: (id) => id },
  // The records' retention prune (billing/usage-records.ts) runs with the kind that serves them.
  timers: { 'usage.prune': usagePruneTimer },
  present: (r) => ({
    amount: r.amount,
    date: isoTimestamp(new Date(Number(r.date_ms))),
    resource_type: r.resource_type,
    usage: Number(r.usage),
    uuid: r.uuid,
  }),
});

// ----------------------------------------------------------------------------------------- /dailyburstusage/

/**
 * A day row (its 00:00) compared with a moment t, as a comparison of `YYYY-MM-DD` strings:
 * day 00:00 > t ⇔ day after t's day; ≥ t ⇔ after the day of the instant before t; < t ⇔ before the day of
 * (the instant before t) + 1 day; ≤ t ⇔ before the day of t + 1 day.
 */
const DAY_COMPARED: Record<'<' | '<=' | '>' | '>=', { op: '<' | '>'; day: (ms: number) => string }> = {
  '>': { op: '>', day: (ms) => dayOf(ms) },
  '>=': { op: '>', day: (ms) => dayOf(ms - 1) },
  '<': { op: '<', day: (ms) => dayOf(ms - 1 + DAY_MS) },
  '<=': { op: '<', day: (ms) => dayOf(ms + DAY_MS) },
};

export const dailyBurstUsage = tableKind<RowOf<BurstUsageDailyTable>>({
  kind: 'dailyburstusage',
  table: 'burst_usage_daily',
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
  filters: (({ date__gt, date__gte, date__lt, date__lte }) => ({ date__gt, date__gte, date__lt, date__lte }))(
    ranges('date', (op) => {
      const { op: dayOp, day } = DAY_COMPARED[op];
      return { column: 'day', op: dayOp, parse: (raw, point) => day(moment(raw, point)) };
    }),
  ),
  filtering: { date__gt: 1, date__lt: 1 },
  order: [
    ['day', 'desc'],
    ['resource_type', 'asc'],
  ],
  columns: ['day', 'amount', 'resource_type', 'unit_seconds'],
  present: (r) => ({
    amount: r.amount,
    date: r.day,
    resource_type: r.resource_type,
    // The day's burst in unit-days (billing/usage-records.ts).
    usage: Number(BigInt(r.unit_seconds) / 86_400n),
  }),
});

// ---------------------------------------------------------------------------------------------------- /usage/

/** One record: what an object used at a poll. */
interface UsageItem {
  poll_ms: number;
  record: [resource: string, uuid: string, amount: string];
}

const atPoll = (op: '<' | '<=' | '>' | '>='): TableFilter => ({ column: 'poll_ms', op, parse: moment });

/**
 * A page of records from the rows of one account's polls (one row per poll, `n` records each, as JSON):
 * the rows' counts, newest first, say which rows hold the page (core/table-kind.ts `packed`).
 */
export const usage = tableKind<UsageItem>({
  kind: 'usage',
  table: 'usage_records',
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
  filters: {
    poll_time_gt: atPoll('>'),
    poll_time_lt: atPoll('<'),
    poll_time__gt: atPoll('>'),
    poll_time__gte: atPoll('>='),
    poll_time__lt: atPoll('<'),
    poll_time__lte: atPoll('<='),
  },
  filtering: { poll_time_gt: 1, poll_time_lt: 1 },
  order: [
    ['poll_ms', 'desc'],
    ['id', 'desc'],
  ],
  columns: ['id', 'poll_ms', 'records'],
  packed: {
    key: 'id',
    count: 'n',
    items: (row) => (JSON.parse(row.records as string) as UsageItem['record'][]).map((record) => ({ poll_ms: Number(row.poll_ms), record })),
  },
  present: ({ poll_ms, record: [resource, uuid, amount] }) => ({ amount, poll_time: isoTimestamp(new Date(poll_ms)), resource, uuid }),
});
