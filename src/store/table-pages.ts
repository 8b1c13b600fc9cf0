import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import type { Db, Tx } from './db.js';
import type { ResourceRepository } from './repository.js';
import type { Database } from './schema.js';
import { page, totalOfPage } from './paging.js';

/**
 * Lists of kinds over their own tables (the ledger, the audit log, usage, subscriptions, the notification
 * feed): a page described as data — the table, the caller's rows, conditions, order — turned into SQL here,
 * once for all such kinds (core/table-kind.ts declares them). Pages and counts run on the owner's
 * indexes; a page that shows its own total is not counted (paging.ts).
 */
export type PagedTable = keyof Database;

/**
 * One condition: the column compared with any of `values` (OR; none: false); the conditions of a page all
 * hold (AND). Conditions nest (`and`, `or`, `not`) and compare two columns of the row (`columns`).
 */
export type Criterion =
  | { column: string; op: '=' | '<>' | '<' | '<=' | '>' | '>='; values: readonly unknown[] }
  /** The column matches one of the SQL LIKE patterns as written (`tx_%`). */
  | { column: string; op: 'like'; values: readonly string[] }
  /** Two columns of the row compared (`consumed >= amount`). */
  | { op: 'columns'; left: string; cmp: '=' | '<>' | '<' | '<=' | '>' | '>='; right: string }
  | { op: 'and' | 'or'; of: readonly Criterion[] }
  | { op: 'not'; of: Criterion }
  /** The column contains one of the strings, case-insensitively, `%` and `_` matching themselves. */
  | { column: string; op: 'contains'; values: readonly string[] }
  /** The resource whose uuid is in the column carries one of `owner`'s tags (by tag uuid). */
  | { column: string; op: 'ownTag'; owner: string; values: readonly string[] }
  /** The column is set (true: not null) or not (false: null). */
  | { column: string; op: 'set'; values: readonly boolean[] }
  /** The column is a moment (`at`) or within a span (`from` ≤ column < `to`): a filter value naming a time or a day. */
  | { column: string; op: 'span'; values: readonly Span[] };

export type Span = { at: unknown } | { from: unknown; to: unknown };

export interface TablePage {
  table: PagedTable;
  /** The owner's rows: `column = value` (the index every such table leads with). */
  owner: { column: string; value: string };
  where: readonly Criterion[];
  /** Columns and directions, the last one unique (a stable order for paging). */
  order: readonly (readonly [column: string, dir: 'asc' | 'desc'])[];
  /** Columns to read; absent: all. */
  columns?: readonly string[];
}

type AnyEb = ExpressionBuilder<any, any>; // eslint-disable-line @typescript-eslint/no-explicit-any -- the table is data, not a type parameter
type Row = Record<string, unknown>;

export class TablePages {
  constructor(private readonly resources: ResourceRepository) {}

  private condition(eb: AnyEb, c: Criterion): Expression<SqlBool> {
    switch (c.op) {
      case 'and':
        return eb.and(c.of.map((x) => this.condition(eb, x)));
      case 'or':
        return eb.or(c.of.map((x) => this.condition(eb, x)));
      case 'not':
        return eb.not(this.condition(eb, c.of));
      case 'columns':
        return eb(c.left, c.cmp, eb.ref(c.right));
      case 'like':
        return eb.or(c.values.map((v) => eb(c.column, 'like', v)));
      case 'contains':
        return eb.or(c.values.map((v) => this.resources.like(c.column, v, { contains: true, caseInsensitive: true })));
      case 'ownTag':
        return this.resources.carriesOwnTag(eb, { kind: null, owner: c.owner, by: 'uuid', values: [...c.values], uuidColumn: c.column });
      case 'set':
        return eb.or(c.values.map((set) => eb(c.column, set ? 'is not' : 'is', null)));
      case 'span':
        return eb.or(c.values.map((v) => ('at' in v ? eb(c.column, '=', v.at) : eb.and([eb(c.column, '>=', v.from), eb(c.column, '<', v.to)]))));
      case '=':
        if (!c.values.length) return eb.lit(false);
        return c.values.length === 1 ? eb(c.column, '=', c.values[0]) : eb(c.column, 'in', c.values);
      default:
        return eb.or(c.values.map((v) => eb(c.column, c.op, v)));
    }
  }

  private filtered(db: Db | Tx, p: Pick<TablePage, 'table' | 'owner' | 'where'>) {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- see AnyEb
    let q = (db as Db).selectFrom(p.table as any).where(p.owner.column, '=', p.owner.value);
    for (const c of p.where) q = q.where((eb) => this.condition(eb, c));
    return q;
  }

  /** One page of the rows and their total (counted only when the page does not show it). */
  async page(db: Db | Tx, p: TablePage, limit: number, offset: number): Promise<{ rows: Row[]; total: number }> {
    const base = this.filtered(db, p);
    let q = p.columns ? base.select(p.columns as string[]) : base.selectAll();
    for (const [column, dir] of p.order) q = q.orderBy(column, dir);
    const rows = (await page(q, limit, offset, this.resources.dialect).execute()) as Row[];
    const total = totalOfPage(rows.length, limit, offset) ?? Number((await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    return { rows, total };
  }

  /**
   * One page of items packed several to a row (`count` of them in each: an account's usage records of one
   * poll): the rows' counts, in order, say which rows hold items [offset, offset + limit) and the total;
   * only those rows are read, with the part of each the page takes. The work is a count per row, not per
   * item. One snapshot: the counts and the rows they point at agree while writers (a prune) run.
   */
  async packedPage(
    snapshot: <T>(fn: (db: Tx) => Promise<T>) => Promise<T>,
    p: TablePage,
    packed: { key: string; count: string },
    limit: number,
    offset: number,
  ): Promise<{ rows: { row: Row; skip: number; take: number }[]; total: number }> {
    return snapshot(async (db) => {
      let q = this.filtered(db, p).select([packed.key, packed.count]);
      for (const [column, dir] of p.order) q = q.orderBy(column, dir);
      const counts = (await q.execute()) as Row[];
      let total = 0;
      const wanted: { key: unknown; skip: number; take: number }[] = [];
      const end = limit === 0 ? Infinity : offset + limit;
      for (const c of counts) {
        const n = Number(c[packed.count.slice(packed.count.lastIndexOf('.') + 1)]);
        const from = Math.max(offset, total);
        const to = Math.min(end, total + n);
        if (to > from) wanted.push({ key: c[packed.key.slice(packed.key.lastIndexOf('.') + 1)], skip: from - total, take: to - from });
        total += n;
      }
      const byKey = new Map<string, Row>();
      for (let i = 0; i < wanted.length; i += 500) {
        const keys = wanted.slice(i, i + 500).map((w) => w.key);
        // eslint-disable-next-line @typescript-eslint/no-explicit-any -- see AnyEb
        const base = (db as Db).selectFrom(p.table as any).where(packed.key, 'in', keys);
        for (const r of (await (p.columns ? base.select(p.columns as string[]) : base.selectAll()).execute()) as Row[])
          byKey.set(String(r[packed.key.slice(packed.key.lastIndexOf('.') + 1)]), r);
      }
      return { rows: wanted.map((w) => ({ row: byKey.get(String(w.key))!, skip: w.skip, take: w.take })), total };
    });
  }

  /** The owner's row whose `column` is `value`, or undefined. */
  async one(db: Db | Tx, p: Pick<TablePage, 'table' | 'owner' | 'columns'>, column: string, value: unknown): Promise<Row | undefined> {
    const base = this.filtered(db, { ...p, where: [] }).where(column, '=', value);
    return (await (p.columns ? base.select(p.columns as string[]) : base.selectAll()).executeTakeFirst()) as Row | undefined;
  }
}
