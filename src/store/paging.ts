import type { Dialect } from './db.js';

/**
 * The API's paging rule, once for every list (stored kinds, kinds over their own tables, lists made in
 * memory): `limit` items (0 = all of them) after skipping `offset`, and `total_count` = every item the
 * filters match.
 */

/** A query that can be paged (any Kysely select builder). */
interface Pageable<Q> {
  limit(n: number): Q;
  offset(n: number): Q;
}

/**
 * One page of a list query. SQLite has no OFFSET without a LIMIT, so "all rows after n" is
 * `LIMIT -1 OFFSET n` there (a negative limit means no limit); PostgreSQL takes a plain OFFSET.
 */
export function page<Q extends Pageable<Q>>(query: Q, limit: number, offset: number, dialect: Dialect): Q {
  return pageShape(query, limit > 0 ? limit : undefined, offset > 0 ? offset : undefined, dialect);
}

/**
 * The same rule for a query compiled once (store/shapes.ts): `limit` and `offset` are the shape's argument
 * markers, given when the page has them (limit > 0, offset > 0; which of them it has is part of the shape).
 */
export function pageShape<Q extends Pageable<Q>>(query: Q, limit: number | undefined, offset: number | undefined, dialect: Dialect): Q {
  let q = query;
  if (limit !== undefined) q = q.limit(limit);
  else if (offset !== undefined && dialect === 'sqlite') q = q.limit(-1);
  if (offset !== undefined) q = q.offset(offset);
  return q;
}

/**
 * The total a page read shows by itself, or undefined when it must be counted: a page that is not full
 * (or a first page, even empty) holds everything from the offset on. An empty page past the first says
 * nothing (the offset may be past the end).
 */
export function totalOfPage(rows: number, limit: number, offset: number): number | undefined {
  return (offset === 0 || rows > 0) && (limit === 0 || rows < limit) ? offset + rows : undefined;
}

/** A page of a list made in memory, and its total. */
export function pageOfItems<T>(items: readonly T[], limit: number, offset: number): { rows: T[]; total: number } {
  return { rows: limit === 0 ? items.slice(offset) : items.slice(offset, offset + limit), total: items.length };
}
