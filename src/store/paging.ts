import type { Dialect } from './db.js';

/** A query that can be paged (any Kysely select builder). */
interface Pageable<Q> {
  limit(n: number): Q;
  offset(n: number): Q;
}

/**
 * One page of a list query: `limit` rows (0 = all of them) after skipping `offset`. SQLite has no OFFSET
 * without a LIMIT, so "all rows after n" is `LIMIT -1 OFFSET n` there (a negative limit means no limit);
 * PostgreSQL takes a plain OFFSET.
 */
export function page<Q extends Pageable<Q>>(query: Q, limit: number, offset: number, dialect: Dialect): Q {
  let q = query;
  if (limit > 0) q = q.limit(limit);
  else if (offset > 0 && dialect === 'sqlite') q = q.limit(-1);
  if (offset > 0) q = q.offset(offset);
  return q;
}
