import type { Ctx } from './context.js';
import { ApiError, notFound, validation } from './errors.js';
import type { CollectionDecl, CollectionService, ListQuery, ListResult } from './resource.js';
import type { Criterion, PagedTable, Span, TablePage } from '../store/table-pages.js';

/**
 * A kind over its own table (the ledger, the audit log, usage records, subscriptions, the notification
 * feed): read-only rows a user owns, listed, filtered, ordered and paged in the database. Declared as data
 * — the table, its filters, its orders, how a row is shown — like a stored kind's fields, and served by
 * the same generic routes (list, detail, `schema/`, XML, OpenAPI). The SQL is the store's (store/table-pages.ts).
 */
export type Order = readonly (readonly [column: string, dir: 'asc' | 'desc'])[];

/** How a filter compares: a column with an operator, its raw values parsed (and refused with a 400) first. */
export type TableFilter =
  | { column: string; op: '=' | '<' | '<=' | '>' | '>='; parse?: (raw: string, point: string) => unknown }
  | { column: string; op: 'contains' }
  /** The row's resource (uuid in `column`) carries one of the caller's own tags. */
  | { column: string; op: 'ownTag' }
  /**
   * Whether the column holds a value (a time something happened): `true`/`1` the rows where it does,
   * `false`/`0` the rows where it is null; a group asking for both, or for neither, sets no condition.
   */
  | { column: string; op: 'set' }
  /** A value names a moment or a span of time (a day: its 00:00 to the next), as `parse` reads it. */
  | { column: string; op: 'span'; parse: (raw: string, point: string) => Span }
  /**
   * Each value names a condition computed per request (a status read from several columns and the time);
   * a name mapped to null sets none (`all`); any other value is a 400 listing the names, in their order.
   * Columns in the conditions are the table's, unqualified.
   */
  | { op: 'named'; conditions(ctx: Ctx): Promise<Record<string, Criterion | null>> };

/** A condition on one column that a list holds to unless a filter says otherwise (the last 30 days). */
export interface DefaultCondition {
  column: string;
  op: '=' | '<' | '<=' | '>' | '>=';
  value: (ctx: Ctx) => unknown;
}

export interface TableKindDecl<Row, Aux = undefined> extends Omit<CollectionDecl, 'shape' | 'service' | 'unlistedFilters' | 'ordering' | 'filtering'> {
  table: PagedTable;
  /** Conditions every list holds to (columns unqualified): the rows of the table this kind shows. */
  scope?: readonly Criterion[];
  /** The column holding the owner's uuid (default `owner_uuid`). */
  ownerColumn?: string;
  /** Every filter the list accepts; `filtering` says which of them `schema/` prints (the rest are accepted unlisted). */
  filters: Record<string, TableFilter>;
  filtering: Record<string, string | number>;
  /** The list's order, or a choice of orders by a query parameter (the last value given wins). */
  order: Order | { param: string; byDefault: string; choices: Record<string, Order> };
  /** `ordering` as `schema/` prints it. */
  ordering?: string[];
  /** The detail view: the row whose `column` is the id (`parse` answers undefined for an id that cannot be one: 404). */
  detail?: { column: string; parse(id: string): unknown };
  /** Columns to read (default all). */
  columns?: readonly string[];
  /** Conditions of a list given none of the kind's filters (a default window of time). */
  unfiltered?: readonly DefaultCondition[];
  /**
   * Rows that each hold several items (`count` of them; `items` unpacks a row read whole): the list pages
   * items, not rows, reading only the rows its page needs (store/table-pages.ts `packedPage`); `key` is the
   * rows' unique column.
   */
  packed?: { key: string; count: string; items(stored: Record<string, unknown>): Row[] };
  /** A stored row as the kind works with it (numbers for bigint columns PostgreSQL hands back as strings). */
  row?: (stored: Record<string, unknown>) => Row;
  /** What showing these rows needs beyond each row, read once per page or detail (their extensions, the time). */
  context?: (ctx: Ctx, rows: readonly Row[]) => Promise<Aux>;
  present(row: Row, aux: Aux): Record<string, unknown>;
  /** Keys the list answer carries beside its objects (their schema in `wire.listBeside`). */
  beside?: (rows: readonly Row[], aux: Aux) => Record<string, unknown>;
  /** Writes the kind serves besides the list and detail (buying: `create`; actions: `authorize`). */
  service?: Omit<CollectionService, 'list' | 'get'>;
}

/** A condition with the table's columns qualified by its name. */
function qualified(c: Criterion, column: (c: string) => string): Criterion {
  switch (c.op) {
    case 'and':
    case 'or':
      return { op: c.op, of: c.of.map((x) => qualified(x, column)) };
    case 'not':
      return { op: 'not', of: qualified(c.of, column) };
    case 'columns':
      return { ...c, left: column(c.left), right: column(c.right) };
    default:
      return { ...c, column: column(c.column) };
  }
}

const sameOp = { '=': '=', '<': '<', '<=': '<=', '>': '>', '>=': '>=' } as const;

/** Filters with `__gt`, `__gte`, `__lt`, `__lte` and the plain name, on one column (time and number ranges). */
export function comparisons(name: string, column: string, parse: (raw: string, point: string) => unknown): Record<string, TableFilter> {
  const out: Record<string, TableFilter> = {};
  for (const [suffix, op] of [
    ['', '='],
    ['__gt', '>'],
    ['__gte', '>='],
    ['__lt', '<'],
    ['__lte', '<='],
  ] as const)
    out[`${name}${suffix}`] = { column, op, parse };
  return out;
}

export function tableKind<Row, Aux = undefined>(d: TableKindDecl<Row, Aux>): CollectionDecl {
  const {
    table,
    ownerColumn = 'owner_uuid',
    scope = [],
    filters,
    order,
    detail,
    columns,
    unfiltered,
    packed,
    row: rowOf = (stored) => stored as Row,
    context = async () => undefined as Aux,
    present,
    beside,
    service,
    ...rest
  } = d;
  const column = (c: string) => `${table}.${c}`;
  const orderParam = Array.isArray(order) ? undefined : (order as Exclude<TableKindDecl<Row, Aux>['order'], Order>);
  const shown = async (ctx: Ctx, rows: readonly Row[]) => {
    const aux = await context(ctx, rows);
    return { objects: rows.map((r) => present(r, aux)), ...(beside ? { extra: beside(rows, aux) } : {}) };
  };

  const orderOf = (q: ListQuery): Order => {
    if (!orderParam) return order as Order;
    const asked = q.filters.get(orderParam.param)?.flat() ?? [];
    const names = Object.keys(orderParam.choices);
    for (const o of asked) if (!names.includes(o)) throw validation(orderParam.param, `Cannot order by ${o}; ${d.kind} orders by ${names.join(' or ')}`);
    return orderParam.choices[asked.at(-1) ?? orderParam.byDefault];
  };

  const criteria = async (ctx: Ctx, q: ListQuery): Promise<Criterion[]> => {
    const out: Criterion[] = scope.map((c) => qualified(c, column));
    for (const [name, groups] of q.filters) {
      const f = filters[name];
      if (!f) continue;
      const named = f.op === 'named' ? await f.conditions(ctx) : {};
      for (const values of groups) {
        if (f.op === 'named') {
          const names = Object.keys(named);
          for (const v of values) if (!names.includes(v)) throw validation(name, `${name} is one of ${names.join(', ')}`);
          if (values.some((v) => named[v] === null)) continue;
          out.push({ op: 'or', of: values.map((v) => qualified(named[v]!, column)) });
        } else if (f.op === 'ownTag') out.push({ column: column(f.column), op: 'ownTag', owner: ctx.caller.uuid, values });
        else if (f.op === 'set') {
          const wanted = new Set(values.map((v) => v.toLowerCase()));
          const set = wanted.has('true') || wanted.has('1');
          if (set !== (wanted.has('false') || wanted.has('0'))) out.push({ column: column(f.column), op: 'set', values: [set] });
        } else if (f.op === 'contains') out.push({ column: column(f.column), op: 'contains', values });
        else if (f.op === 'span') out.push({ column: column(f.column), op: 'span', values: values.map((v) => f.parse(v, name)) });
        else out.push({ column: column(f.column), op: sameOp[f.op], values: f.parse ? values.map((v) => f.parse!(v, name)) : values });
      }
    }
    if (unfiltered && ![...q.filters.keys()].some((name) => name in filters))
      for (const c of unfiltered) out.push({ column: column(c.column), op: c.op, values: [c.value(ctx)] });
    return out;
  };

  const pageOf = (ctx: Ctx): Pick<TablePage, 'table' | 'owner' | 'columns'> => ({
    table,
    owner: { column: column(ownerColumn), value: ctx.caller.uuid },
    columns: columns?.map(column),
  });

  return {
    ...rest,
    shape: 'collection',
    filtering: d.filtering,
    ordering: d.ordering,
    unlistedFilters: [...Object.keys(filters).filter((k) => !(k in d.filtering)), ...(orderParam ? [orderParam.param] : [])],
    service: {
      ...service,
      async list(ctx: Ctx, q: ListQuery): Promise<ListResult> {
        const where = await criteria(ctx, q);
        const by = orderOf(q).map(([c, dir]) => [column(c), dir] as const);
        if (packed) {
          const store = ctx.store;
          const { rows, total } = await store.tablePages.packedPage(
            (fn) => store.snapshot(fn),
            { ...pageOf(ctx), where, order: by },
            { key: column(packed.key), count: column(packed.count) },
            q.limit,
            q.offset,
          );
          return {
            total,
            ...(await shown(
              ctx,
              rows.flatMap(({ row, skip, take }) => packed.items(row).slice(skip, skip + take)),
            )),
          };
        }
        const { rows, total } = await ctx.store.tablePages.page(ctx.store.db, { ...pageOf(ctx), where, order: by }, q.limit, q.offset);
        return { total, ...(await shown(ctx, rows.map(rowOf))) };
      },
      async get(ctx: Ctx, id: string): Promise<Record<string, unknown>> {
        if (!detail) throw new ApiError('method', `${d.kind} entries have no detail view; list them with GET /${d.kind}/`);
        const key = detail.parse(id);
        const row = key === undefined ? undefined : await ctx.store.tablePages.one(ctx.store.db, pageOf(ctx), column(detail.column), key);
        if (!row) throw notFound(id);
        return (await shown(ctx, [rowOf(row)])).objects[0]!;
      },
    },
  };
}
