import { f } from '../../core/fields.js';
import { relatedId, type Obj } from '../../core/input.js';
import { ownerRef, type Ctx } from '../../core/context.js';
import { validation } from '../../core/errors.js';
import { storedDecl } from '../../core/stored.js';
import type { CollectionDecl } from '../../core/resource.js';
import type { Tx } from '../../store/db.js';

/**
 * Tags group the caller's resources. A tag's `resources` is its member set (replaced as a whole on PUT);
 * members are kept in `tag_members`, so tag filters on other kinds are an indexed EXISTS.
 */
export const tagFields = {
  meta: f.dict(),
  name: f.string({ required: true, maxLength: 1024 }),
  owner: f.related({ readonly: true }),
  resource_uri: f.string({ readonly: true }),
  resources: f.relatedMany({ nullable: true }),
  uuid: f.string({ readonly: true }),
};

/** Replace a tag's members; every named resource must exist and be visible to the caller. */
async function setMembers(tx: Tx, ctx: Ctx, tagUuid: string, refs: unknown[]): Promise<void> {
  const ids = [...new Set(refs.map((r) => relatedId(r, 'resources')))];
  const found = ids.length
    ? await tx
        .selectFrom('resources')
        .select(['kind', 'uuid'])
        .where('uuid', 'in', ids)
        .where('kind', '!=', 'tags')
        .where('owner_uuid', '=', ctx.caller.uuid)
        .execute()
    : [];
  const byUuid = new Map(found.map((r) => [r.uuid, r.kind]));
  const missing = ids.find((id) => !byUuid.has(id));
  if (missing !== undefined) throw validation('resources', `Resource ${missing} does not exist`);
  await tx.deleteFrom('tag_members').where('tag_uuid', '=', tagUuid).execute();
  if (ids.length) {
    await tx
      .insertInto('tag_members')
      .values(ids.map((id) => ({ tag_uuid: tagUuid, res_type: byUuid.get(id)!, res_uuid: id })))
      .execute();
  }
}

/** Fill `resources` for a page of tags with one query. */
async function attachMembers(ctx: Ctx, tags: Obj[]): Promise<void> {
  const rows = await ctx.store.db
    .selectFrom('tag_members as tm')
    .innerJoin('resources as r', (j) => j.onRef('r.uuid', '=', 'tm.res_uuid').onRef('r.kind', '=', 'tm.res_type'))
    .select(['tm.tag_uuid', 'tm.res_type', 'tm.res_uuid', 'r.owner_uuid'])
    .where(
      'tm.tag_uuid',
      'in',
      tags.map((t) => t.uuid as string),
    )
    .orderBy('tm.seq')
    .execute();
  const byTag = new Map<string, Obj[]>();
  for (const r of rows) {
    const list = byTag.get(r.tag_uuid) ?? [];
    list.push({
      owner: ownerRef(r.owner_uuid),
      res_type: r.res_type,
      resource_uri: `/api/2.0/${r.res_type}/${r.res_uuid}/`,
      uuid: r.res_uuid,
    });
    byTag.set(r.tag_uuid, list);
  }
  for (const t of tags) t.resources = byTag.get(t.uuid as string) ?? [];
}

export const tags: CollectionDecl = storedDecl(
  {
    shape: 'collection',
    kind: 'tags',
    flavour: 'model',
    fields: tagFields,
    defaultLimit: 20,
    listMethods: ['get', 'post'],
    detailMethods: ['get', 'put', 'delete'],
    filtering: { name: 'exact', name__contains: 'exact', uuid: 'exact' },
  },
  {
    external: ['resources'],
    async afterWrite(tx, ctx, uuid, values) {
      // null clears the member set; absent leaves it alone.
      if (values.resources !== undefined) await setMembers(tx, ctx, uuid, (values.resources as unknown[] | null) ?? []);
    },
    async beforeDelete(tx, _ctx, uuid) {
      // A deleted tag stops carrying its resources and stops sharing them through ACLs.
      await tx.deleteFrom('tag_members').where('tag_uuid', '=', uuid).execute();
      await tx.deleteFrom('acl_tags').where('tag_uuid', '=', uuid).execute();
    },
    decorate: attachMembers,
  },
);
