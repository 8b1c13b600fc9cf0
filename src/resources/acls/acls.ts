import Type from 'typebox';
import { f } from '../../core/fields.js';
import { isPlainObject, relatedId, type Obj } from '../../core/input.js';
import type { Ctx } from '../../core/context.js';
import { validation } from '../../core/errors.js';
import { isPermission, type Permission } from '../../core/permissions.js';
import { storedDecl } from '../../core/stored.js';
import type { CollectionDecl } from '../../core/resource.js';
import type { Tx } from '../../store/db.js';
import { normalizeEmail } from '../users/users.js';

/**
 * ACLs share the owner's tagged resources with other users (spec "ACL"). The ACL object is stored like
 * any kind; its grantees, rules and tags are mirrored into relation tables that core/permissions reads.
 * Owners create and change ACLs; a grantee can read the ACLs that name them (as the recorded API shows),
 * seeing only themselves among the grantees and none of the owner's tags.
 */
// A grantee as an ACL shows it carries `resource_uri` as a nested reference (a recorded quirk): an ACL PUT
// back as it was read must validate.
const nestedRef = Type.Object({ uuid: Type.Optional(Type.String()), resource_uri: Type.Optional(Type.String()) });
const ref = Type.Union([
  Type.String(),
  Type.Object({
    uuid: Type.Optional(Type.String()),
    email: Type.Optional(Type.String()),
    resource_uri: Type.Optional(Type.Union([Type.String(), nestedRef])),
  }),
]);

export const aclFields = {
  grantees: f.relatedItems(ref, { nullable: true }),
  meta: f.dict(),
  name: f.string({ default: '', maxLength: 1024 }),
  owner: f.related({ readonly: true }),
  resource_uri: f.string({ readonly: true }),
  rules: f.relatedItems(Type.Union([Type.Object({ permission: Type.String() }), Type.String()]), { nullable: true, help: 'ACL rules' }),
  tags: f.relatedItems(ref, { nullable: true }),
  uuid: f.string({ readonly: true }),
};

/** `[{permission}]` (or bare strings) -> distinct permissions in the order given; anything else is a 400. */
function parseRules(items: unknown[]): Permission[] {
  const out: Permission[] = [];
  for (const item of items) {
    const p = typeof item === 'string' ? item : isPlainObject(item) ? item.permission : undefined;
    if (!isPermission(p))
      throw validation('rules', `Unknown permission ${JSON.stringify(p)}; allowed: LIST, EDIT, CLONE, START, STOP, OPEN_VNC, ATTACH, DELETE`);
    if (!out.includes(p)) out.push(p);
  }
  return out;
}

/** Grantees by uuid or e-mail (or both, which must agree); unknown users are a 400 on `grantees`. */
async function resolveGrantees(tx: Tx, ctx: Ctx, items: unknown[]): Promise<string[]> {
  const out: string[] = [];
  for (const item of items) {
    const uuid =
      typeof item === 'string'
        ? relatedId(item, 'grantees')
        : isPlainObject(item) && (item.uuid || item.resource_uri)
          ? relatedId(item, 'grantees')
          : undefined;
    const email = isPlainObject(item) && typeof item.email === 'string' && item.email ? normalizeEmail(item.email) : undefined;
    if (!uuid && !email) throw validation('grantees', 'Each grantee needs a uuid or an email');
    const users = ctx.store.accounts.users;
    const user = uuid ? await users.byUuid(tx, uuid) : await users.byEmail(tx, email!);
    if (!user || (email && user.email !== email)) throw validation('grantees', `User ${uuid ?? email} does not exist`);
    if (!out.includes(user.uuid)) out.push(user.uuid);
  }
  return out;
}

/** The ACL's tags must be the caller's own tags. */
async function resolveTags(tx: Tx, ctx: Ctx, items: unknown[]): Promise<string[]> {
  const ids = [...new Set(items.map((t) => relatedId(t, 'tags')))];
  if (!ids.length) return ids;
  const have = await ctx.store.resources.existing(tx, 'tags', ids, ctx.caller.uuid);
  const missing = ids.find((id) => !have.has(id));
  if (missing !== undefined) throw validation('tags', `Tag ${missing} does not exist`);
  return ids;
}

async function writeRelations(tx: Tx, ctx: Ctx, acl: string, values: Obj): Promise<void> {
  if (values.rules !== undefined) {
    const rules = values.rules as { permission: Permission }[];
    await ctx.store.resources.acls.setRules(
      tx,
      acl,
      rules.map((r) => r.permission),
    );
  }
  if (values.grantees !== undefined) {
    await ctx.store.resources.acls.setGrantees(tx, acl, await resolveGrantees(tx, ctx, (values.grantees as unknown[] | null) ?? []));
  }
  if (values.tags !== undefined) {
    await ctx.store.resources.acls.setTags(tx, acl, await resolveTags(tx, ctx, (values.tags as unknown[] | null) ?? []));
  }
}

/** Grantees and tags for a page of ACLs: two queries for the page. */
async function attachRelations(ctx: Ctx, acls: Obj[]): Promise<void> {
  const ids = acls.map((a) => a.uuid as string);
  const { grantees, tags } = await ctx.store.resources.acls.relationsOf(ctx.store.db, ids);
  for (const acl of acls) {
    const own = (acl.owner as { uuid: string }).uuid === ctx.caller.uuid;
    acl.grantees = grantees
      .filter((g) => g.acl_uuid === acl.uuid && (own || g.grantee_uuid === ctx.caller.uuid))
      .map((g) => {
        const uri = `/api/2.0/user/${g.grantee_uuid}/`;
        return { email: g.email, resource_uri: { resource_uri: uri, uuid: g.grantee_uuid }, uuid: g.grantee_uuid };
      });
    acl.tags = own ? tags.filter((t) => t.acl_uuid === acl.uuid).map((t) => ({ resource_uri: `/api/2.0/tags/${t.tag_uuid}/`, uuid: t.tag_uuid })) : [];
    acl.rules ??= [];
  }
}

export const acls: CollectionDecl = storedDecl(
  {
    kind: 'acls',
    flavour: 'model',
    fields: aclFields,
    listMethods: ['get', 'post'],
    detailMethods: ['get', 'put', 'delete'],
    // The recorded `schema/` prints no `filtering`; the standard filters still work.
    filtering: {},
    unlistedFilters: ['name', 'name__contains', 'uuid'],
  },
  {
    external: ['grantees', 'tags'],
    // Rules are kept in the body in the caller's order (what GET shows) and mirrored into acl_rules.
    prepare: (values) =>
      values.rules === undefined ? values : { ...values, rules: parseRules((values.rules as unknown[] | null) ?? []).map((permission) => ({ permission })) },
    async afterWrite(tx, ctx, uuid, values) {
      await writeRelations(tx, ctx, uuid, values);
    },
    async beforeDelete(tx, ctx, uuid) {
      await ctx.store.resources.acls.drop(tx, uuid);
    },
    alsoVisible: (ctx, db) => ctx.store.resources.acls.namingGrantee(db, ctx.caller.uuid),
    decorate: attachRelations,
  },
);
