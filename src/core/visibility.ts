import type { Ctx } from './context.js';
import type { Db, Tx } from '../store/db.js';

/**
 * The rows of a kind the caller may see. Today that is the caller's own rows (an indexed lookup on
 * kind+owner); sharing through ACLs extends this one function, so every list and get follows.
 */
export function visibleRows(ctx: Ctx, kind: string, db: Db | Tx = ctx.store.db) {
  return db.selectFrom('resources').where('resources.kind', '=', kind).where('resources.owner_uuid', '=', ctx.caller.uuid);
}
