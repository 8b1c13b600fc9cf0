import type { Ctx } from './context.js';
import { validation } from './errors.js';
import { relatedId, type Obj } from './input.js';
import type { Tx } from '../store/db.js';

/**
 * The resource side of tagging: a taggable kind's `tags` field. Writing it replaces the set of the
 * caller's tags that carry the resource; reading it lists them. Tag membership lives in `tag_members`,
 * the same rows the tag's own `resources` field shows.
 */
export async function setTagsOf(tx: Tx, ctx: Ctx, kind: string, uuid: string, refs: unknown[]): Promise<void> {
  const ids = [...new Set(refs.map((r) => relatedId(r, 'tags')))];
  if (ids.length) {
    const owned = await tx
      .selectFrom('resources')
      .select('uuid')
      .where('kind', '=', 'tags')
      .where('owner_uuid', '=', ctx.caller.uuid)
      .where('uuid', 'in', ids)
      .execute();
    const have = new Set(owned.map((r) => r.uuid));
    const missing = ids.find((id) => !have.has(id));
    if (missing !== undefined) throw validation('tags', `Tag ${missing} does not exist`);
  }
  // Only the caller's own tags are replaced; tags of other users on a shared resource stay.
  await tx
    .deleteFrom('tag_members')
    .where('res_type', '=', kind)
    .where('res_uuid', '=', uuid)
    .where('tag_uuid', 'in', (eb) => eb.selectFrom('resources').select('uuid').where('kind', '=', 'tags').where('owner_uuid', '=', ctx.caller.uuid))
    .execute();
  if (ids.length) await tx.insertInto('tag_members').values(ids.map((t) => ({ tag_uuid: t, res_type: kind, res_uuid: uuid }))).execute();
}

/**
 * Fill `tags` ([{resource_uri, uuid}]) for a page of objects of one kind, in one query. Only the
 * caller's own tags show: a grantee does not see how the owner organises a shared resource.
 */
export async function attachTags(ctx: Ctx, kind: string, objects: Obj[]): Promise<void> {
  const rows = await ctx.store.db
    .selectFrom('tag_members')
    .innerJoin('resources as t', (j) => j.onRef('t.uuid', '=', 'tag_members.tag_uuid').on('t.kind', '=', 'tags'))
    .select(['res_uuid', 'tag_uuid'])
    .where('t.owner_uuid', '=', ctx.caller.uuid)
    .where('res_type', '=', kind)
    .where(
      'res_uuid',
      'in',
      objects.map((o) => o.uuid as string),
    )
    .orderBy('tag_members.seq')
    .execute();
  const byResource = new Map<string, Obj[]>();
  for (const r of rows) {
    const list = byResource.get(r.res_uuid) ?? [];
    list.push({ resource_uri: `/api/2.0/tags/${r.tag_uuid}/`, uuid: r.tag_uuid });
    byResource.set(r.res_uuid, list);
  }
  for (const o of objects) o.tags = byResource.get(o.uuid as string) ?? [];
}
