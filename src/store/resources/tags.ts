import { sql } from 'kysely';
import type { Tx } from '../db.js';
import type { AnyExpressions } from './model.js';
import type { ResourceScans } from './scans.js';

/**
 * Tag membership (`tag_members`, joined to the tags it names): which resources a tag carries, which of
 * an owner's tags carry a resource, and the condition the `tag` filters put on a list. Only a tag's owner
 * writes its members, so a tag holds its owner's resources only (the ACL model relies on it).
 */
export class TagMembership {
  constructor(private readonly scans: ResourceScans) {}

  /** Replace a tag's member set. */
  async setTagMembers(tx: Tx, tag: string, members: readonly { kind: string; uuid: string }[]): Promise<void> {
    await tx.deleteFrom('tag_members').where('tag_uuid', '=', tag).execute();
    if (members.length)
      await tx
        .insertInto('tag_members')
        .values(members.map((m) => ({ tag_uuid: tag, res_type: m.kind, res_uuid: m.uuid })))
        .onConflict((oc) => oc.columns(['tag_uuid', 'res_type', 'res_uuid']).doNothing())
        .execute();
  }

  /** Replace the set of `owner`'s tags that carry one resource (other users' tags on it stay). */
  async setResourceTags(tx: Tx, owner: string, kind: string, uuid: string, tags: readonly string[]): Promise<void> {
    await tx
      .deleteFrom('tag_members')
      .where('res_type', '=', kind)
      .where('res_uuid', '=', uuid)
      .where('tag_uuid', 'in', this.scans.ownedUuids(tx, 'tags', owner))
      .execute();
    if (tags.length)
      await tx
        .insertInto('tag_members')
        .values(tags.map((t) => ({ tag_uuid: t, res_type: kind, res_uuid: uuid })))
        .onConflict((oc) => oc.columns(['tag_uuid', 'res_type', 'res_uuid']).doNothing())
        .execute();
  }

  /** A deleted tag stops carrying resources and stops sharing them through ACLs. */
  async dropTag(tx: Tx, tag: string): Promise<void> {
    await tx.deleteFrom('tag_members').where('tag_uuid', '=', tag).execute();
    await tx.deleteFrom('acl_tags').where('tag_uuid', '=', tag).execute();
  }

  /**
   * Condition: the row at `uuidColumn` (of kind `kind`, or any kind when null) carries one of `owner`'s
   * tags whose uuid (or name) is among `values`.
   */
  carriesOwnTag(eb: AnyExpressions, opts: { kind: string | null; owner: string; by: 'uuid' | 'name'; values: string[]; uuidColumn: string }) {
    let q = eb
      .selectFrom('tag_members as ctm')
      .innerJoin('resources as ct', (j) => j.onRef('ct.uuid', '=', 'ctm.tag_uuid').on('ct.kind', '=', 'tags'))
      .select(sql.lit(1).as('one'))
      .whereRef('ctm.res_uuid', '=', opts.uuidColumn)
      .where('ct.owner_uuid', '=', opts.owner)
      .where(opts.by === 'uuid' ? 'ct.uuid' : 'ct.name', 'in', opts.values);
    if (opts.kind !== null) q = q.where('ctm.res_type', '=', opts.kind);
    return eb.exists(q);
  }
}
