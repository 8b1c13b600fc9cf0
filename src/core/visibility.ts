import type { Ctx } from './context.js';
import type { Db, Tx } from '../store/db.js';
import type { AnyQuery, SharedRows, VisibleSet } from '../store/repository.js';
import { grantedUuids, grantOfRow } from '../store/resources/acls.js';

/**
 * The rows of a kind the caller may see: their own, plus — for shareable kinds — those an ACL grants
 * them LIST on. Both halves are index lookups (kind+owner; grantee->acl->tag->member), never a scan of
 * every user's rows, so lists page and count in the database.
 */
export function visibleRows(ctx: Ctx, kind: string, db: Db | Tx = ctx.store.db, shared = false): VisibleSet {
  const rows = shared
    ? sharedRows(
        `acl.${kind}`,
        (me) => grantedUuids(db, me, kind, 'LIST'),
        (me) => grantOfRow(db, me, kind, 'LIST'),
      )
    : undefined;
  return ctx.store.resources.visible(db, kind, ctx.caller.uuid, rows);
}

/** A shared-rows subquery of the caller's uuid, with the key that names its shape (see SharedRows). */
export function sharedRows(key: string, build: (me: string) => AnyQuery, holds?: (me: string) => AnyQuery): SharedRows {
  return Object.assign((me: string) => build(me), { key, ...(holds ? { holds } : {}) });
}
