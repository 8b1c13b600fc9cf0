import { sql, type AliasedRawBuilder, type RawBuilder, type SqlBool } from 'kysely';
import type { Db } from '../db.js';
import { totalOfPage } from '../paging.js';
import type { ArgOf } from '../shapes.js';
import { columnsOf, relKey, type AnyQuery, type Order, type Relations, type RelRow, type Resource, type VisibleSet, withRelated } from './model.js';
import type { OwnAnchors } from './anchors.js';
import type { ResourceRelations } from './relations.js';
import type { ResourceSql } from './sql.js';
import type { VisibleSets } from './visible.js';
import type { SharedSeqs } from './shared-seqs.js';

/**
 * A page of a visible set and its total (`total_count`), in the list's order, with the relations the
 * caller will see: usually one statement, bounded by the page's end and what is shared with the caller,
 * never by the size of the account. The API's paging rule is paging.ts's (`totalOfPage`, `pageShape`).
 */

type Page = { order: Order; limit: number; offset: number };

/** The columns of each list order, the last one unique (a stable order for paging). */
const ORDER_BY: Record<Order, readonly (readonly [string, 'asc' | 'desc'])[]> = {
  created: [['seq', 'asc']],
  recent: [
    ['updated_at', 'desc'],
    ['seq', 'desc'],
  ],
};

/** The list orders, for rows already in memory. */
const JS_ORDER: Record<Order, (a: { seq: number; updated_at: string }, b: { seq: number; updated_at: string }) => number> = {
  created: (a, b) => a.seq - b.seq,
  recent: (a, b) => (a.updated_at === b.updated_at ? b.seq - a.seq : a.updated_at < b.updated_at ? 1 : -1),
};

/** How a page's statement gets the rows shared with the caller (see `pageQuery`). */
type SharedIn = 'none' | 'list' | 'cte';

export class ResourcePages {
  constructor(
    private readonly sql: ResourceSql,
    private readonly sets: VisibleSets,
    private readonly relations: ResourceRelations,
    private readonly anchors: OwnAnchors,
    private readonly shared: SharedSeqs,
  ) {}

  /** Whether `listPage` reads this page in several statements (a deep page, from anchors): then it needs one snapshot. */
  pagesInSteps(set: VisibleSet, p: Page): boolean {
    return p.limit > 0 && p.order === 'created' && !set.where.length && p.offset >= this.anchors.step;
  }

  /**
   * PostgreSQL, outside a transaction: a deep page (`pagesInSteps`) in one statement, from the owner's kept
   * anchors and the kept shared rows, checked by the statement's own columns (the owner's count version, the
   * `sharing` counter) against what they were kept under. Undefined when that cannot be (SQLite, nothing kept,
   * something moved, past the end): the caller then reads the page in several statements in one snapshot.
   */
  async deepAtOnce(set: VisibleSet, p: Page, rel: Relations = {}): Promise<{ rows: Resource[]; total: number } | undefined> {
    if (this.sql.dialect !== 'postgres' || set.db.isTransaction || !this.pagesInSteps(set, p)) return undefined;
    const keptKey = set.shared ? this.keptKeyOf(set, p) : undefined;
    const hit = keptKey ? this.shared.peek(keptKey) : undefined;
    if (set.shared && !hit) return undefined;
    if (hit && this.shared.verifying) {
      const theirKey = this.sets.shapeKey('visible.theirs', set)!;
      const args = { kind: set.kind, me: set.owner };
      await this.shared.check(set.db as Db, keptKey!, hit, () =>
        this.sql.run<{ seq: number; updated_at: string }, 'kind' | 'me'>(theirKey, set.db, (arg) => this.sets.theirHalf(set, arg), args),
      );
    }
    const theirs = hit ? hit.rows.map((r) => r.seq) : [];
    const got = await this.anchors.atOnce(set, theirs, p.offset, p.limit, rel, hit ? this.shared.counterSql() : undefined);
    const first = got?.rows[0];
    if (!got || !first || Number(first.rel_version) !== got.version) return undefined;
    if (hit && !this.shared.confirm(keptKey!, hit.n, first.rel_sharing)) return undefined;
    return { rows: got.rows.map((r) => withRelated(r, rel)), total: got.total };
  }

  /** The key the ACL-shared rows of a list in creation order are kept under (shared-seqs.ts), if they may be. */
  private keptKeyOf(set: VisibleSet, p: Page): string | undefined {
    const theirKey = this.sets.shapeKey('visible.theirs', set);
    return theirKey && p.order === 'created' && set.shared?.key.startsWith('acl.') && this.shared.applies(set.db) ? `${theirKey}|${set.owner}` : undefined;
  }

  /**
   * A page of a visible set, in creation order (or most recently changed first), with the relations `rel`
   * asks for, and its total.
   *
   * On PostgreSQL one statement (see `pageQuery`): every statement is a round trip there. SQLite has none,
   * and there the shared rows (bounded by what others share with the caller, usually none) are read first
   * (or kept, and checked by the page's statement): the page is then one list of seqs, the caller's first
   * own ones and those shared rows, which SQLite runs several times faster than the merge of both halves in
   * order in one statement. A deep page (`pagesInSteps`) starts from anchors
   * (`deepPage`). Either way the work is bounded by the page's end and by what is shared, never by the size
   * of the account.
   */
  async listPage(set: VisibleSet, p: Page, rel: Relations = {}, keeps = true): Promise<{ rows: Resource[]; total: number }> {
    const db = set.db;
    const args = { kind: set.kind, me: set.owner, end: p.offset + p.limit, limit: p.limit, offset: p.offset };
    type A = keyof typeof args;
    const deep = this.pagesInSteps(set, p);
    // No ORDER BY/LIMIT here: SQLite sorts with a bound LIMIT at a fixed cost of tens of microseconds.
    const theirKey = this.sets.shapeKey('visible.theirs', set);
    const readTheirs = () => this.sql.run<{ seq: number; updated_at: string }, A>(theirKey, db, (arg) => this.sets.theirHalf(set, arg), args);
    // In creation order an ACL's shared rows are kept between requests (shared-seqs.ts); the other order
    // needs their `updated_at`, which changes with every write of them.
    // `keeps` false: the page's own statement reads the shared rows (one snapshot for the rows and their
    // sharing), after a kept set turned out stale under it.
    const keptKey = keeps ? this.keptKeyOf(set, p) : undefined;
    // A kept set is checked in the page's own statement (its `rel_sharing` column): `confirm` is the counter it
    // was kept under. A set not kept is read with the counter: on PostgreSQL in one statement; on SQLite the
    // counter first, then the rows (see shared-seqs.ts).
    let confirm: number | undefined;
    let first: readonly { seq: number; updated_at?: string }[] | undefined;
    if (keptKey && !deep) {
      const hit = this.shared.peek(keptKey);
      if (hit && this.shared.verifying) await this.shared.check(db as Db, keptKey, hit, readTheirs);
      if (hit) first = hit.rows;
      else
        first =
          this.sql.dialect === 'postgres'
            ? await this.shared.load(keptKey, () => this.readTheirsCounted(set, args, theirKey!))
            : await this.shared.get(db as Db, keptKey, readTheirs);
      // Read just now or kept, the set is checked by the page's statement all the same: a write between the
      // two would show a row the caller no longer sees, with the sharing it has now.
      confirm = hit?.n ?? this.shared.peek(keptKey)?.n;
    } else if (deep) {
      // The owner's count and the `sharing` counter in one statement (the snapshot's first), then the kept
      // shared rows: a page past the end is that one statement, as it is without shares.
      const head = (
        await this.sql.run<{ n: unknown; version: unknown; sharing: unknown }, A>(
          `deep.head:${keptKey ? 'kept' : 'own'}`,
          db,
          (arg) =>
            db.selectNoFrom([
              sql<number>`(select n from resource_counts where kind = ${arg('kind')} and owner_uuid = ${arg('me')})`.as('n'),
              sql<number>`(select version from resource_counts where kind = ${arg('kind')} and owner_uuid = ${arg('me')})`.as('version'),
              (keptKey ? this.shared.counterSql() : sql<number>`null`).as('sharing'),
            ]) as unknown as AnyQuery,
          args,
        )
      )[0];
      if (set.shared) first = await (keptKey ? this.shared.at(db as Db, head?.sharing, keptKey, readTheirs) : readTheirs());
      return this.anchors.deepPage(
        set,
        (first ?? []).map((r) => Number(r.seq)),
        p.offset,
        p.limit,
        rel,
        { n: Number(head?.n ?? 0), version: Number(head?.version ?? 0) },
      );
    } else if (set.shared && this.sql.dialect === 'sqlite' && keeps) first = await readTheirs();
    // Only the shared rows that can reach the page take part in the merge.
    const theirs =
      first && p.limit > 0 ? (keptKey ? first : [...(first as { seq: number; updated_at: string }[])].sort(JS_ORDER[p.order])).slice(0, args.end) : first;
    const mode: SharedIn = !set.shared ? 'none' : !theirs ? 'cte' : theirs.length ? 'list' : 'none';
    const checks = confirm !== undefined;
    const found = await this.sql.runRows<RelRow & { rel_own: number | null; rel_theirs?: number | null; rel_sharing?: unknown }, A | 'theirs'>(
      this.sets.shapeKey('visible.page-with', set, p.order, p.limit > 0, p.offset > 0, relKey(rel), mode, checks),
      db,
      (arg) => this.pageQuery(set, p, rel, arg, mode, checks),
      { ...args, theirs: this.sql.listArg((theirs ?? []).map((t) => t.seq)) },
    );
    // A kept set the counter no longer holds: read afresh, in one statement (nothing kept, so no loop).
    if (checks && found.length && !this.shared.confirm(keptKey!, confirm!, found.value(0, 'rel_sharing'))) return this.listPage(set, p, rel, false);
    const rows = found.resources(rel);
    // A page that is not full holds everything from the offset on (paging.ts).
    const shown = totalOfPage(rows.length, p.limit, p.offset);
    // An empty page confirmed nothing: the totals' statement does.
    if (shown !== undefined && !(checks && !found.length)) return { rows, total: shown };
    const shared = (theirs: number | null | undefined) => (first ? first.length : Number(theirs ?? 0));
    if (found.length) return { rows, total: Number(found.value(0, 'rel_own') ?? 0) + shared(found.value(0, 'rel_theirs')) };
    // Past the end: only the totals.
    const totals = await this.sql.run<{ rel_own: number | null; rel_theirs?: number | null; rel_sharing?: unknown }, A>(
      this.sets.shapeKey('visible.total', set, first !== undefined, checks),
      db,
      (arg) => db.selectNoFrom(this.totalColumns(set, arg, first ? undefined : 'half', checks)) as unknown as AnyQuery,
      args,
    );
    if (checks && !this.shared.confirm(keptKey!, confirm!, totals[0]?.rel_sharing)) return this.listPage(set, p, rel, false);
    return { rows, total: Number(totals[0]?.rel_own ?? 0) + shared(totals[0]?.rel_theirs) };
  }

  /** PostgreSQL: the seqs of the rows shared with the caller and the `sharing` counter, in one statement (one snapshot). */
  private async readTheirsCounted(set: VisibleSet, args: Record<'kind' | 'me', unknown>, theirKey: string) {
    const db = set.db;
    const rows = await this.sql.run<{ n: unknown; seqs: unknown[] }, 'kind' | 'me'>(
      `${theirKey}:counted`,
      db,
      (arg) =>
        db.selectNoFrom([
          this.shared.counterSql().as('n'),
          sql<unknown[]>`array(select h.seq from (${this.sets.theirHalf(set, arg)}) as h)`.as('seqs'),
        ]) as unknown as AnyQuery,
      args,
    );
    return rows[0];
  }

  /**
   * A page as one statement: the page's seqs, then its rows by seq with their relation columns and the
   * set's totals (`rel_own`, and `rel_theirs` when the statement reads the shared rows itself) as columns
   * computed once for the statement.
   *
   * The seqs come from one index range of the caller's own rows (the index alone: PostgreSQL's plan for any
   * owner stays on it), merged in order, up to the page's end, with the shared rows: `none` (there are
   * none), `list` (read first, their seqs as the argument `theirs`), or `cte` (read by this statement once,
   * in a materialised CTE, and counted).
   */
  private pageQuery(
    set: VisibleSet,
    p: Page,
    rel: Relations,
    arg: ArgOf<'kind' | 'me' | 'end' | 'limit' | 'offset' | 'theirs'>,
    shared: SharedIn,
    checks: boolean,
  ) {
    const db = set.db;
    const limit = p.limit > 0 ? 'limit' : undefined;
    const offset = p.offset > 0 ? 'offset' : undefined;
    // Only the order's columns: in creation order the own half is then read from the index alone.
    const cols = ORDER_BY[p.order].map(([col]) => col);
    const own = this.sorted(
      this.sets
        .ownHalf(set, arg)
        .clearSelect()
        .select(cols.map((c) => `resources.${c}`) as never[]) as AnyQuery,
      p.order,
      'resources.',
    );
    const rowsOf = (q: Db, where: RawBuilder<SqlBool>, totals: ReturnType<ResourcePages['totalColumns']>) =>
      this.sorted(
        q
          .selectFrom('resources')
          .select([...columnsOf(rel), ...this.relations.columns(rel, arg('me')), ...totals])
          .where(where),
        p.order,
        'resources.',
      );
    if (shared === 'none')
      return rowsOf(
        db as Db,
        this.seqIn(this.sql.pageArgs(own, arg, limit, offset).clearSelect().select('resources.seq')),
        this.totalColumns(set, arg, undefined, checks),
      );
    const end = p.limit > 0 ? 'end' : undefined;
    if (shared === 'list' && this.sql.dialect === 'sqlite') {
      // SQLite: the page's rows are among the caller's first `end` own rows and the shared ones up to the page's
      // end (the argument `theirs`): one list of seqs, looked up, ordered and cut once. The merge below, in order,
      // in a subquery, made SQLite run co-routines and a sorter for it: 7x the cost of this list (a 20-row page).
      const ownSeqs = this.sql.pageArgs(own, arg, end, undefined).clearSelect().select('resources.seq');
      const either = sql<SqlBool>`resources.seq in (select a.seq from (${ownSeqs}) as a union all select value from json_each(${arg('theirs')}))`;
      return this.sql.pageArgs(rowsOf(db as Db, either, this.totalColumns(set, arg, undefined, checks)), arg, limit, offset);
    }
    // A kept list in creation order is merged as the seqs it is: looking its rows up first cost a heap fetch per
    // shared row up to the page's end (1.7x an own page at offset 80). The page's own lookup finds the rows.
    const theirs =
      shared === 'cte'
        ? (db.selectFrom(sql<{ seq: number; updated_at: string }>`theirs`.as('t')).select(['t.seq', 't.updated_at']) as AnyQuery)
        : p.order === 'created'
          ? (db.selectFrom(sql<{ seq: number }>`(select unnest(${arg('theirs')}::bigint[]) as seq)`.as('t')).select('t.seq') as AnyQuery)
          : (db
              .selectFrom('resources as t')
              .select(['t.seq', 't.updated_at'])
              .where(this.sql.inList('t.seq', arg('theirs'))) as AnyQuery);
    // PostgreSQL: both sides ordered and cut at the page's end, merged in order.
    const merged = db
      .selectFrom(this.sql.pageArgs(own, arg, end, undefined).as('a'))
      .select(cols.map((c) => `a.${c}`) as never[])
      .unionAll(
        db
          .selectFrom(this.sql.pageArgs(this.sorted(theirs, p.order, 't.'), arg, shared === 'cte' ? end : undefined, undefined).as('b'))
          .select(cols.map((c) => `b.${c}`) as never[]),
      ) as unknown as AnyQuery;
    const seqs = db.selectFrom(this.sql.pageArgs(this.sorted(merged, p.order, ''), arg, limit, offset).as('m')).select('m.seq') as unknown as AnyQuery;
    if (shared === 'list') return rowsOf(db as Db, this.seqIn(seqs), this.totalColumns(set, arg, undefined, checks));
    const withTheirs = db.with(
      (cte) => cte('theirs').materialized(),
      () => this.sets.theirHalf(set, arg),
    );
    return rowsOf(withTheirs as unknown as Db, this.seqIn(seqs), this.totalColumns(set, arg, 'cte'));
  }

  /**
   * `resources.seq` is one of the seqs `seqs` selects. On PostgreSQL as an array: each row is then looked up
   * by its key, where a plan made once for any caller could choose to merge against the whole table.
   */
  private seqIn(seqs: AnyQuery): RawBuilder<SqlBool> {
    return this.sql.dialect === 'postgres' ? sql<SqlBool>`resources.seq = any(array(${seqs}))` : sql<SqlBool>`resources.seq in (${seqs})`;
  }

  /**
   * The set's totals as columns: `rel_own` the caller's own rows (the kept count; counted when filtered),
   * and `rel_theirs` the shared ones, counted from the statement's `theirs` CTE or from the shared half itself.
   */
  private totalColumns(set: VisibleSet, arg: ArgOf<'kind' | 'me'>, theirs?: 'cte' | 'half', checks = false): AliasedRawBuilder<number, string>[] {
    const own = set.where.length
      ? sql<number>`(select count(*) from (${this.sets.ownHalf(set, arg)}) as c)`
      : sql<number>`(select n from resource_counts where kind = ${arg('kind')} and owner_uuid = ${arg('me')})`;
    if (checks) return [own.as('rel_own'), this.shared.counterSql().as('rel_sharing')];
    if (!set.shared || !theirs) return [own.as('rel_own')];
    const shared = theirs === 'cte' ? sql<number>`(select count(*) from theirs)` : sql<number>`(select count(*) from (${this.sets.theirHalf(set, arg)}) as c)`;
    return [own.as('rel_own'), shared.as('rel_theirs')];
  }

  private sorted<Q extends AnyQuery>(q: Q, order: Order, prefix: string): Q {
    return ORDER_BY[order].reduce((acc, [col, dir]) => acc.orderBy(`${prefix}${col}`, dir) as Q, q);
  }
}
