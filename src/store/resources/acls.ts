import { sql, type SqlBool } from 'kysely';
import type { Db, Tx } from '../db.js';
import type { AnyQuery } from './model.js';

/**
 * The ACL relation tables (`acl_rules`, `acl_grantees`, `acl_tags`): an ACL object's rules, grantees and
 * tags mirrored where the permission model (core/permissions.ts) reads them, and the reads of that model:
 * which resources a grantee holds a permission on through an ACL's tags. The ACL objects themselves are
 * resource rows (rows.ts). Plain functions: the permission model calls them with the handle it was given.
 */

/**
 * Subquery: uuids of `kind` resources on which `grantee` holds `permission` through some ACL. The joins are
 * CROSS JOINs with their conditions in WHERE: SQLite keeps that order (grantee -> ACLs -> rules -> tags ->
 * members, each an index lookup, nothing when the caller is granted nothing), where with plain joins and
 * no statistics it starts from every tagged member of the kind. PostgreSQL plans them as inner joins.
 */
export function grantedUuids(db: Db | Tx, grantee: string, kind: string, permission: string) {
  return db
    .selectFrom('acl_grantees as g')
    .crossJoin('acl_rules as r')
    .crossJoin('acl_tags as t')
    .crossJoin('tag_members as tm')
    .select('tm.res_uuid')
    .where('g.grantee_uuid', '=', grantee)
    .whereRef('r.acl_uuid', '=', 'g.acl_uuid')
    .where('r.permission', '=', permission)
    .whereRef('t.acl_uuid', '=', 'g.acl_uuid')
    .whereRef('tm.tag_uuid', '=', 't.tag_uuid')
    .where('tm.res_type', '=', kind);
}

/** `grantedUuids` for the outer query's `resources` row only (an EXISTS probe, see SharedRows.holds). */
export function grantOfRow(db: Db | Tx, grantee: string, kind: string, permission: string) {
  return grantedUuids(db, grantee, kind, permission).where(sql<SqlBool>`tm.res_uuid = resources.uuid`);
}

/** Whether `grantee` holds `permission` on one resource through some ACL. */
export async function isGranted(db: Db | Tx, grantee: string, kind: string, permission: string, uuid: string): Promise<boolean> {
  const hit = await grantedUuids(db, grantee, kind, permission).where('tm.res_uuid', '=', uuid).executeTakeFirst();
  return hit !== undefined;
}

/** The (resource, permission) pairs among `permissions` the caller's ACLs grant on `uuids`, each once. */
export async function grantsOn(db: Db | Tx, caller: string, kind: string, uuids: readonly string[], permissions: readonly string[]) {
  return db
    .selectFrom('acl_grantees as g')
    .innerJoin('acl_rules as r', 'r.acl_uuid', 'g.acl_uuid')
    .innerJoin('acl_tags as t', 't.acl_uuid', 'g.acl_uuid')
    .innerJoin('tag_members as tm', (j) => j.onRef('tm.tag_uuid', '=', 't.tag_uuid').on('tm.res_type', '=', kind))
    .select(['tm.res_uuid', 'r.permission'])
    .distinct()
    .where('g.grantee_uuid', '=', caller)
    .where('tm.res_uuid', 'in', [...uuids])
    .where('r.permission', 'in', [...permissions])
    .execute();
}

/** Subquery (column `uuid`): the ACLs that name `grantee` (a grantee may read them). */
export function namingGrantee(db: Db | Tx, grantee: string): AnyQuery {
  return db.selectFrom('acl_grantees').select('acl_uuid as uuid').where('grantee_uuid', '=', grantee);
}

/** Replace an ACL's rules. */
export async function setRules(tx: Tx, acl: string, permissions: readonly string[]): Promise<void> {
  await tx.deleteFrom('acl_rules').where('acl_uuid', '=', acl).execute();
  if (permissions.length)
    await tx
      .insertInto('acl_rules')
      .values(permissions.map((permission) => ({ acl_uuid: acl, permission })))
      .execute();
}

/** Replace an ACL's grantees (user uuids, in the order given). */
export async function setGrantees(tx: Tx, acl: string, grantees: readonly string[]): Promise<void> {
  await tx.deleteFrom('acl_grantees').where('acl_uuid', '=', acl).execute();
  if (grantees.length)
    await tx
      .insertInto('acl_grantees')
      .values(grantees.map((grantee_uuid, position) => ({ acl_uuid: acl, grantee_uuid, position })))
      .execute();
}

/** Replace an ACL's tags (in the order given). */
export async function setTags(tx: Tx, acl: string, tags: readonly string[]): Promise<void> {
  await tx.deleteFrom('acl_tags').where('acl_uuid', '=', acl).execute();
  if (tags.length)
    await tx
      .insertInto('acl_tags')
      .values(tags.map((tag_uuid, position) => ({ acl_uuid: acl, tag_uuid, position })))
      .execute();
}

/** A deleted ACL's grantees, rules and tags. */
export async function drop(tx: Tx, acl: string): Promise<void> {
  for (const table of ['acl_grantees', 'acl_rules', 'acl_tags'] as const) await tx.deleteFrom(table).where('acl_uuid', '=', acl).execute();
}

/** The grantees (with their e-mails) and the tags of some ACLs, each in the ACL's order: two queries for a page. */
export async function relationsOf(db: Db | Tx, acls: readonly string[]) {
  const ids = [...acls];
  const [grantees, tags] = await Promise.all([
    db
      .selectFrom('acl_grantees as g')
      .innerJoin('users as u', 'u.uuid', 'g.grantee_uuid')
      .select(['g.acl_uuid', 'g.grantee_uuid', 'u.email'])
      .where('g.acl_uuid', 'in', ids)
      .orderBy('g.position')
      .execute(),
    db.selectFrom('acl_tags').select(['acl_uuid', 'tag_uuid']).where('acl_uuid', 'in', ids).orderBy('position').execute(),
  ]);
  return { grantees, tags };
}
