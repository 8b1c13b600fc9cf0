import { sql, type RawBuilder, type SqlBool } from 'kysely';

import type { Db, Tx } from '../db.js';
import { columnsOf, relKey, type Relations, type RelRow, type Resource, type VisibleSet } from './model.js';
import type { ResourceCounts } from './counts.js';
import type { ResourceRelations } from './relations.js';
import type { ResourceSql } from './sql.js';

/**
 * The owner's seqs of a kind from an anchor's seq on: `skip` rows passed, then `count`, in creation order (the
 * walk `ownWindow` runs, and the own part of `atOnce`'s one statement).
 */
function windowFrom(db: Db | Tx, kind: unknown, owner: unknown, from: unknown, count: unknown, skip: unknown) {
  return db
    .selectFrom('resources')
    .select('seq')
    .where('kind', '=', kind as string)
    .where('owner_uuid', '=', owner as string)
    .where('seq', '>=', from as number)
    .orderBy('seq')
    .limit(count as number)
    .offset(skip as number);
}

/**
 * Deep pages of an owner's list without walking to them: the seq at every `step`-th position of the
 * owner's rows of a kind (an anchor), kept per count version, so a page at any depth starts from the
 * nearest anchor and walks at most one step. Lists reach here through pages.ts (`pagesInSteps`).
 */
type A = 'kind' | 'me' | 'from' | 'count' | 'skip' | 'start' | 'theirs' | 'offset' | 'limit';

export class OwnAnchors {
  /**
   * Per (kind, owner): the seq at every `step`-th position of the owner's list, for one count version (and
   * the count at it, `n`); `done` once the pass has answered.
   */
  private readonly anchors = new Map<string, { version: number; n: number; seqs: Promise<number[]>; done?: number[] }>();

  constructor(
    private readonly sql: ResourceSql,
    private readonly counts: ResourceCounts,
    private readonly relations: ResourceRelations,
    /** Positions between anchors; small in tests, so deep pages are exercised on small lists. */
    readonly step = 1000,
  ) {}

  /**
   * The owner's anchors of a kind: the seq at every `step`-th position of their rows in creation order. OFFSET
   * walks the index one entry at a time, so a deep page would cost its depth; a walk starts instead from the
   * nearest anchor, so it is never longer than one step. Anchors are picked by the database in one pass over
   * the owner's index (only they are sent: 100 seqs for 100k rows, where every seq sent was 100k rows held by
   * the driver) and kept until the owner's count changes (its version). Concurrent requests for a page share
   * one pass: the same count version is the same rows, whatever the snapshot.
   */
  private anchorsOf(db: Db | Tx, kind: string, owner: string, version: number, n: number): Promise<number[]> {
    const key = `${kind}/${owner}`;
    let anchors = this.anchors.get(key);
    if (anchors?.version !== version) {
      const seqs = this.sql
        .shaped<{ seq: number }, 'kind' | 'owner' | 'step'>(
          db,
          'own.anchors',
          (arg) =>
            db
              .selectFrom((eb) =>
                eb
                  .selectFrom('resources')
                  .select(['seq', sql<number>`row_number() over (order by seq)`.as('rn')])
                  .where('kind', '=', arg('kind'))
                  .where('owner_uuid', '=', arg('owner'))
                  .as('a'),
              )
              .select('a.seq')
              .where(sql<SqlBool>`(a.rn - 1) % ${arg('step')} = 0`)
              .orderBy('a.seq'),
          { kind, owner, step: this.step },
        )
        .then((rows) => rows.map((r) => Number(r.seq)));
      anchors = { version, n, seqs };
      this.anchors.delete(key);
      if (this.anchors.size >= 1000) this.anchors.delete(this.anchors.keys().next().value!);
      this.anchors.set(key, anchors);
      // A failed pass is not kept (the next request tries again); its own request still sees the error.
      const entry = anchors;
      seqs.then(
        (done) => void (entry.done = done),
        () => this.anchors.get(key) === entry && this.anchors.delete(key),
      );
    }
    return anchors.seqs;
  }

  /** `count` seqs of the owner's rows of a kind from position `from`, in creation order, walked from the nearest anchor. */
  private async ownWindow(db: Db | Tx, kind: string, owner: string, anchors: readonly number[], from: number, count: number): Promise<number[]> {
    const a = Math.floor(from / this.step);
    if (a >= anchors.length || count <= 0) return [];
    const rows = await this.sql.shaped<{ seq: number }, 'kind' | 'owner' | 'from' | 'count' | 'skip'>(
      db,
      'own.window',
      (arg) => windowFrom(db, arg('kind'), arg('owner'), arg('from'), arg('count'), arg('skip')),
      { kind, owner, from: anchors[a], count, skip: from - a * this.step },
    );
    return rows.map((r) => Number(r.seq));
  }

  /** The owner's anchors as last read (the count version and count they hold for), if any. */
  kept(kind: string, owner: string): { version: number; n: number; seqs: readonly number[] } | undefined {
    const a = this.anchors.get(`${kind}/${owner}`);
    return a?.done && { version: a.version, n: a.n, seqs: a.done };
  }

  /**
   * PostgreSQL: a deep page in one statement (one snapshot, one round trip) from kept anchors and kept shared
   * rows: the own window (as `ownWindow` walks it) merged with the shared rows and cut to the page in SQL, the
   * rows read with their relations, and beside them the owner's count version (and the `sharing` counter,
   * `sharing`) that the caller compares with what the anchors and the shared rows were kept under. Undefined
   * when nothing is kept or the page is past the end (`deepPage` tells the total then).
   */
  async atOnce(
    set: VisibleSet,
    theirs: readonly number[],
    offset: number,
    limit: number,
    rel: Relations,
    sharing: RawBuilder<number> | undefined,
  ): Promise<{ rows: (RelRow & { rel_version: unknown; rel_sharing: unknown })[]; total: number; version: number } | undefined> {
    const kept = this.kept(set.kind, set.owner);
    if (!kept || offset >= kept.n + theirs.length) return undefined;
    const { start, end } = ownSpan(kept.seqs, this.step, kept.n, theirs, offset, limit);
    // Only the shared rows that can meet the window are sent (with 1,000 shared, about one step's share).
    const { lo, hi } = theirsSpan(kept.seqs, this.step, kept.n, theirs, start, end, offset, limit);
    const a = Math.floor(start / this.step);
    const walk = a < kept.seqs.length && end > start;
    const db = set.db as Db;
    const rows = await this.sql.shaped<RelRow & { rel_version: unknown; rel_sharing: unknown }, A>(
      db,
      `resources.deep-at-once:${relKey(rel)}:${sharing ? 'shared' : 'own'}`,
      (arg) => {
        // mergedPage in SQL: the window, then the shared rows from its first row on (all of them when the
        // window starts the list or is empty), in seq order, from the page's place in that merge.
        const window = windowFrom(db, arg('kind'), arg('me'), arg('from'), arg('count'), arg('skip'));
        const low = sql`case when ${arg('start')}::bigint > 0 then coalesce((select min(o.seq) from own as o), 0) else 0 end`;
        const page = sql`select m.seq from (select o.seq from own as o union all select t.seq from unnest(${arg('theirs')}::bigint[]) as t(seq) where t.seq >= ${low}) as m order by m.seq offset greatest(0, ${arg('offset')}::bigint - ${arg('start')}::bigint - (select count(*) from unnest(${arg('theirs')}::bigint[]) as t(seq) where t.seq < ${low})) limit ${arg('limit')}`;
        return db
          .with(
            (cte) => cte('own').materialized(),
            () => window,
          )
          .selectFrom('resources')
          .select([
            ...columnsOf(rel),
            ...this.relations.columns(rel, arg('me')),
            sql<number>`(select version from resource_counts where kind = ${arg('kind')} and owner_uuid = ${arg('me')})`.as('rel_version'),
            (sharing ?? sql<number>`null`).as('rel_sharing'),
          ])
          .where(sql<SqlBool>`resources.seq = any(array(${page}))`)
          .orderBy('resources.seq') as never;
      },
      {
        kind: set.kind,
        me: set.owner,
        from: walk ? kept.seqs[a] : 0,
        count: walk ? end - start : 0,
        skip: walk ? start - a * this.step : 0,
        start,
        theirs: theirs.slice(lo, hi),
        offset: offset - lo,
        limit,
      },
    );
    return { rows, total: kept.n + theirs.length, version: kept.version };
  }

  /**
   * A deep page of an unfiltered list in creation order: own rows found from the anchors, merged in memory
   * with the shared rows (all of them are in hand, and they are bounded by what is shared), then read by seq
   * with their relations. The own window (ownSpan) is about the page's length plus the shared rows among
   * it; a page past the end reads no row at all. Several statements: the caller runs it in one snapshot.
   */
  async deepPage(
    set: VisibleSet,
    shared: readonly number[],
    offset: number,
    limit: number,
    rel: Relations,
    /** The owner's kept count, when the caller read it in this snapshot. */
    counted?: { n: number; version: number },
  ): Promise<{ rows: Resource[]; total: number }> {
    const db = set.db;
    const count = counted ?? (await this.counts.row(db, set.kind, set.owner));
    // Kept shared rows come in creation order already: sorting a thousand of them cost more than the page.
    const theirs = ascending(shared) ? shared : [...shared].sort((a, b) => a - b);
    const total = count.n + theirs.length;
    // Past the end: the total is all there is to tell.
    if (offset >= total) return { rows: [], total };
    const anchors = count.n ? await this.anchorsOf(db, set.kind, set.owner, count.version, count.n) : [];
    const { start, end } = ownSpan(anchors, this.step, count.n, theirs, offset, limit);
    const own = await this.ownWindow(db, set.kind, set.owner, anchors, start, end - start);
    const page = mergedPage(own, start, theirs, offset, limit);
    if (!page.length) return { rows: [], total };
    const rows = await this.sql.shapedRows<RelRow, 'seqs' | 'me'>(
      db,
      `resources.by-seq:${relKey(rel)}`,
      (arg) =>
        db
          .selectFrom('resources')
          .select([...columnsOf(rel), ...this.relations.columns(rel, arg('me'))])
          .where(this.sql.inList('seq', arg('seqs')))
          .orderBy('seq'),
      { seqs: this.sql.listArg(page), me: set.owner },
    );
    return { rows: rows.resources(rel), total };
  }
}

/**
 * The positions [start, end) of the owner's rows a deep page must read to merge them with the shared rows
 * (`theirs`, ascending seqs). An own row at position p sits at p + (shared rows below it) in the merged
 * list; between two anchors that count lies between the counts below the anchors, so, anchors in hand, the
 * walk starts at the last own row that surely sits at or before `offset` and stops at the first that surely
 * sits past the page: about `limit` rows plus the shared rows among them, where "every shared row could come
 * first" made it `limit` + all of them (1,000 shared rows: 1,000 index entries read for a 20-row page).
 */
export function ownSpan(
  anchors: readonly number[],
  step: number,
  n: number,
  theirs: readonly number[],
  offset: number,
  limit: number,
): { start: number; end: number } {
  let start = 0;
  let end = Math.min(n, offset + limit);
  if (!theirs.length) return { start: Math.min(offset, end), end };
  for (let k = 0; k < anchors.length; k++) {
    const first = k * step;
    const last = Math.min(n, (k + 1) * step) - 1;
    const below = lowerBound(theirs, anchors[k]);
    const belowNext = k + 1 < anchors.length ? lowerBound(theirs, anchors[k + 1]) : theirs.length;
    // The anchor's own position is exact; rows after it have at most `belowNext` shared rows before them.
    if (first + below <= offset) start = Math.max(start, first);
    const surely = Math.min(last, offset - belowNext);
    if (surely > first) start = Math.max(start, surely);
    // The first row here with at least `below` shared rows before it past the page's end.
    const past = Math.max(first, offset + limit - below);
    if (past <= last) {
      end = Math.min(end, past);
      break;
    }
  }
  return { start: Math.min(start, end), end };
}

/**
 * The shared rows [lo, hi) that can take part in merging the own window [start, end) (ownSpan's) into a page:
 * those below the window's first anchor sit before it (they only shift the page, by `lo`), and those past the
 * anchor at or after the window's end, or past the page's last position, sit after the page. So
 * `mergedPage(window, start, theirs.slice(lo, hi), offset - lo, limit)` is the page (an empty window, or one
 * from the list's start, merges every shared row from the first).
 */
export function theirsSpan(
  anchors: readonly number[],
  step: number,
  n: number,
  theirs: readonly number[],
  start: number,
  end: number,
  offset: number,
  limit: number,
): { lo: number; hi: number } {
  const k = Math.ceil(end / step);
  const past = end < n && k < anchors.length ? lowerBound(theirs, anchors[k]) : theirs.length;
  const hi = Math.min(past, offset + limit, theirs.length);
  const lo = start > 0 && end > start ? Math.min(lowerBound(theirs, anchors[Math.floor(start / step)]), hi) : 0;
  return { lo, hi: Math.max(lo, hi) };
}

/**
 * The page's seqs: the own rows from position `start` (`own`, as ownSpan picked them) merged in creation
 * order with the shared ones (`theirs`, ascending), from `offset`, `limit` of them.
 */
export function mergedPage(own: readonly number[], start: number, theirs: readonly number[], offset: number, limit: number): number[] {
  // Shared rows before the window sit at positions below `offset` (the window starts early enough), except
  // when the window starts at the very beginning: then every shared row takes part in the merge.
  let j = own.length && start > 0 ? lowerBound(theirs, own[0]) : 0;
  let pos = start + j;
  const page: number[] = [];
  for (let i = 0; page.length < limit && (i < own.length || j < theirs.length); pos++) {
    const next = i < own.length && (j >= theirs.length || own[i] < theirs[j]) ? own[i++] : theirs[j++];
    if (pos >= offset) page.push(next);
  }
  return page;
}

function ascending(seqs: readonly number[]): boolean {
  for (let i = 1; i < seqs.length; i++) if (seqs[i - 1] > seqs[i]) return false;
  return true;
}

/** The index of the first element of ascending `sorted` that is not below `value`. */
function lowerBound(sorted: readonly number[], value: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid] < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
