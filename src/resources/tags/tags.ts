import { f } from '../../core/fields.js';
import { relatedId, type Obj } from '../../core/input.js';
import type { Ctx } from '../../core/context.js';
import { ownerRef, resourceUri } from '../../store/repository.js';
import { validation } from '../../core/errors.js';
import { storedDecl, type Row } from '../../core/stored.js';
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

/** Replace a tag's members; every named resource must exist and be the caller's. */
async function setMembers(tx: Tx, ctx: Ctx, tagUuid: string, refs: unknown[]): Promise<void> {
  const ids = [...new Set(refs.map((r) => relatedId(r, 'resources')))];
  const byUuid = await ctx.store.resources.kindsOf(tx, ids, ctx.caller.uuid, 'tags');
  const missing = ids.find((id) => !byUuid.has(id));
  if (missing !== undefined) throw validation('resources', `Resource ${missing} does not exist`);
  await ctx.store.resources.setTagMembers(
    tx,
    tagUuid,
    ids.map((id) => ({ kind: byUuid.get(id)!, uuid: id })),
  );
}

/** Fill `resources` for a page of tags from the members read with them (`reads: { members: true }`). */
async function attachMembers(_ctx: Ctx, tags: Obj[], rows: Row[]): Promise<void> {
  tags.forEach((t, i) => {
    t.resources = rows[i].related!.members.map((m) => ({
      owner: ownerRef(m.owner_uuid),
      res_type: m.res_type,
      resource_uri: resourceUri(m.res_type, m.res_uuid),
      uuid: m.res_uuid,
    }));
  });
}

export const tags: CollectionDecl = storedDecl(
  {
    kind: 'tags',
    flavour: 'model',
    fields: tagFields,
    listMethods: ['get', 'post'],
    detailMethods: ['get', 'put', 'delete'],
    // The recorded `schema/` prints no `filtering`; the standard filters still work.
    filtering: {},
    unlistedFilters: ['name', 'name__contains', 'uuid'],
    // A tag's members are its owner's objects (setMembers): uuid, kind and owner only.
    answersFromVisibleOwners: true,
  },
  {
    external: ['resources'],
    async afterWrite(tx, ctx, uuid, values) {
      // null clears the member set; absent leaves it alone.
      if (values.resources !== undefined) await setMembers(tx, ctx, uuid, (values.resources as unknown[] | null) ?? []);
    },
    async beforeDelete(tx, ctx, uuid) {
      await ctx.store.resources.dropTag(tx, uuid);
    },
    reads: { members: true },
    decorate: attachMembers,
    // Members come from the relations read with the row.
    varies: () => false,
  },
);
