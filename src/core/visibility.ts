import type { Ctx } from './context.js';
import type { Db, Tx } from '../store/db.js';
import { grantedUuids } from './permissions.js';

/**
 * The rows of a kind the caller may see: their own, plus — for shareable kinds — those an ACL grants
 * them LIST on. Both halves are index lookups (kind+owner; grantee->acl->tag->member), never a scan of
 * every user's rows, so lists page and count in the database.
 */
export function visibleRows(ctx: Ctx, kind: string, db: Db | Tx = ctx.store.db, shared = false) {
  const q = db.selectFrom('resources').where('resources.kind', '=', kind);
  if (!shared) return q.where('resources.owner_uuid', '=', ctx.caller.uuid);
  // A UNION of the two halves rather than `owner = me OR uuid IN (…)`: with OR both engines scan every
  // row of the kind; with the union each half is an index lookup bounded by what the caller can see.
  const own = db.selectFrom('resources as mine').select('mine.uuid as res_uuid').where('mine.kind', '=', kind).where('mine.owner_uuid', '=', ctx.caller.uuid);
  return q.where('resources.uuid', 'in', own.union(grantedUuids(db, ctx.caller.uuid, kind, 'LIST')));
}
