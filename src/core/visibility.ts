import type { Ctx } from './context.js';
import type { Db, Tx } from '../store/db.js';
import { grantedUuids } from './permissions.js';

/**
 * The rows of a kind the caller may see: their own, plus — for shareable kinds — those an ACL grants
 * them LIST on. Both halves are index lookups (kind+owner; grantee->acl->tag->member), never a scan of
 * every user's rows, so lists page and count in the database.
 */
export function visibleRows(ctx: Ctx, kind: string, db: Db | Tx = ctx.store.db, shared = false) {
  return ctx.store.resources.visible(db, kind, ctx.caller.uuid, shared ? grantedUuids(db, ctx.caller.uuid, kind, 'LIST') : undefined);
}
