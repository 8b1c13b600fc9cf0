import type { Ctx } from './context.js';
import { validation } from './errors.js';
import { relatedId } from './input.js';
import type { Tx } from '../store/db.js';

/**
 * The resource side of tagging: a taggable kind's `tags` field. Writing it replaces the set of the
 * caller's tags that carry the resource; reads bring them along with the rows (the repository's
 * relations). Tag membership lives in `tag_members`, the same rows the tag's own `resources` field shows.
 */
export async function setTagsOf(tx: Tx, ctx: Ctx, kind: string, uuid: string, refs: unknown[]): Promise<void> {
  const ids = [...new Set(refs.map((r) => relatedId(r, 'tags')))];
  // The tags are locked (a tag's own PUT of its members and this change are decided one after the other).
  const have = new Set((await ctx.store.resources.lockMany(tx, 'tags', ids)).filter((t) => t.owner_uuid === ctx.caller.uuid).map((t) => t.uuid));
  const missing = ids.find((id) => !have.has(id));
  if (missing !== undefined) throw validation('tags', `Tag ${missing} does not exist`);
  await ctx.store.resources.setResourceTags(tx, ctx.caller.uuid, kind, uuid, ids);
}
