import { validation } from '../../core/errors.js';
import { f } from '../../core/fields.js';
import { comparisons, tableKind } from '../../core/table-kind.js';
import type { LedgerTable, RowOf } from '../../store/schema.js';

/**
 * `GET /ledger/` (reference §16.4): the caller's debits and credits, newest first (`order_by=time` for
 * oldest first), filtered by `billing_cycle` and `time` (`__gt`, `__gte`, `__lt`, `__lte`), paged in the
 * database on the (owner, time) index.
 */
type Entry = RowOf<LedgerTable>;

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

export const ledger = tableKind<Entry>({
  kind: 'ledger',
  table: 'ledger',
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
  filters: { ...comparisons('time', 'time', timeValue), ...comparisons('billing_cycle', 'billing_cycle', cycleValue) },
  filtering: { billing_cycle: 1, time: 1 },
  ordering: ['time'],
  order: {
    param: 'order_by',
    byDefault: '-time',
    choices: {
      time: [
        ['time', 'asc'],
        ['id', 'asc'],
      ],
      '-time': [
        ['time', 'desc'],
        ['id', 'desc'],
      ],
    },
  },
  detail: { column: 'id', parse: (id) => (/^\d{1,15}$/.test(id) ? Number(id) : undefined) },
  present: (e) => ({
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
  }),
});
