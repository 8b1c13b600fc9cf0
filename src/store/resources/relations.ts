import { sql, type RawBuilder } from 'kysely';
import type { Db, Tx } from '../db.js';
import { columnsOf, inOrderOf, relKey, withRelated, type Relations, type RelRow, type Resource } from './model.js';
import type { ResourceSql } from './sql.js';

/**
 * A row's relations read with it, as JSON columns of the row's own statement: the caller's tags on it,
 * its ACL grants (to its owner) or the caller's held permissions (to anyone else), a tag's members. One
 * statement is one snapshot and one round trip; each column is a walk down indexes from its row.
 */
export class ResourceRelations {
  constructor(private readonly sql: ResourceSql) {}

  /**
   * Whether reads may ask for relation stamps (`Relations.stamp`): SQLite, whose `answer_scopes` counters
   * move in the writing transaction (migrations 0090 and 0140). PostgreSQL's scopes are announcements
   * heard after a commit, not rows a statement reads: its readers read the relations themselves.
   */
  get stamps(): boolean {
    return this.sql.dialect === 'sqlite';
  }

  /**
   * Rows of a kind by uuid (any owner), in the order asked (missing ones left out), with the relations `rel`
   * asks for as `me` sees them: one statement.
   */
  async findManyWith(db: Db | Tx, kind: string, uuids: readonly string[], me: string, rel: Relations): Promise<Resource[]> {
    if (!uuids.length) return [];
    const rows = await this.sql.shapedRows<RelRow, 'kind' | 'uuids' | 'me'>(
      db,
      `resources.many-with:${relKey(rel)}`,
      (arg) =>
        db
          .selectFrom('resources')
          .select([...columnsOf(rel), ...this.columns(rel, arg('me'))])
          .where('resources.kind', '=', arg('kind'))
          .where(this.sql.inList('resources.uuid', arg('uuids'))),
      { kind, uuids: this.sql.listArg(uuids), me },
    );
    return inOrderOf(rows.resources(rel), uuids);
  }

  /**
   * One row of a kind, locked until the transaction ends (as `ResourceRows.lock`), with the relations `rel`
   * asks for as `me` sees them: a write can then answer with the object it wrote without reading it again.
   */
  async lockWith(tx: Tx, kind: string, uuid: string, me: string, rel: Relations): Promise<Resource | undefined> {
    const pg = this.sql.dialect === 'postgres';
    const rows = await this.sql.shaped<RelRow, 'kind' | 'uuid' | 'me'>(
      tx,
      `resources.lock-with:${relKey(rel)}`,
      (arg) => {
        const q = tx
          .selectFrom('resources')
          .select([...columnsOf(rel), ...this.columns(rel, arg('me'))])
          .where('resources.kind', '=', arg('kind'))
          .where('resources.uuid', '=', arg('uuid'));
        return pg ? q.forUpdate() : q;
      },
      { kind, uuid, me },
    );
    return rows[0] && withRelated(rows[0], rel);
  }

  /**
   * The JSON columns of the relations `rel` asks for, on rows of `resources` (the outer query's table, not
   * aliased) as the caller `me` sees them. Each is a subquery per row, run only for the rows the statement
   * returns, and each is a walk down indexes from that row, whatever the plan's estimates.
   */
  columns(rel: Relations, me: unknown) {
    const pg = this.sql.dialect === 'postgres';
    const array = pg ? sql`json_build_array` : sql`json_array`;
    const cols = [];
    if (rel.stamp && (rel.tags || rel.sharing || rel.members)) {
      if (!this.stamps) throw new Error('relation stamps are read from SQLite’s answer_scopes only');
      cols.push(this.stampColumn(me).as('rel_stamp'));
      if (rel.stamp === 'only') return cols;
    }
    if (rel.tags) {
      // PostgreSQL: each membership's tag by its uuid (the unique index), then its owner compared. As a join,
      // a plan made once for any caller walks the caller's tags (the (kind, owner) index) for every membership.
      const tags = pg
        ? sql`select tm.tag_uuid as v, tm.seq as s from tag_members as tm where tm.res_type = resources.kind and tm.res_uuid = resources.uuid and (select t.owner_uuid from resources as t where t.uuid = tm.tag_uuid and t.kind = 'tags') = ${me}`
        : sql`select tm.tag_uuid as v, tm.seq as s from tag_members as tm inner join resources as t on t.uuid = tm.tag_uuid and t.kind = 'tags' where t.owner_uuid = ${me} and tm.res_type = resources.kind and tm.res_uuid = resources.uuid`;
      cols.push(this.jsonList(tags).as('rel_tags'));
    }
    if (rel.sharing) {
      // In no particular order: granteeEntries and heldPermissions fold repeats and sort.
      const grants = sql`select ${array}(g.grantee_uuid, u.email, r.permission) as v from tag_members as tm inner join acl_tags as t on t.tag_uuid = tm.tag_uuid inner join acl_grantees as g on g.acl_uuid = t.acl_uuid inner join acl_rules as r on r.acl_uuid = t.acl_uuid inner join users as u on u.uuid = g.grantee_uuid where tm.res_type = resources.kind and tm.res_uuid = resources.uuid`;
      // CROSS JOINs in this order: SQLite starts from the caller's grants, as grantedUuids does.
      const held = sql`select r.permission as v from acl_grantees as g cross join acl_rules as r cross join acl_tags as t cross join tag_members as tm where g.grantee_uuid = ${me} and r.acl_uuid = g.acl_uuid and t.acl_uuid = g.acl_uuid and tm.tag_uuid = t.tag_uuid and tm.res_type = resources.kind and tm.res_uuid = resources.uuid`;
      // Most rows are in no ACL: a probe of their tags in acl_tags (two index lookups) rules the five-way join out.
      // OFFSET 0 keeps it a probe on PostgreSQL, which may otherwise plan the EXISTS as a hashed subplan: a scan
      // of every tag membership in the database, once per statement.
      const shareable = sql`exists (select 1 from tag_members as tm inner join acl_tags as t on t.tag_uuid = tm.tag_uuid where tm.res_type = resources.kind and tm.res_uuid = resources.uuid${pg ? sql` offset 0` : sql``})`;
      // Grants show to the owner only, held permissions to everyone else: each is read only where it shows.
      cols.push(
        sql<string>`case when resources.owner_uuid = ${me} and ${shareable} then ${this.jsonList(grants, { json: true, ordered: false })} else '[]' end`.as(
          'rel_grants',
        ),
      );
      cols.push(sql<string>`case when resources.owner_uuid = ${me} then '[]' else ${this.jsonList(held, { ordered: false })} end`.as('rel_held'));
    }
    if (rel.members) {
      // PostgreSQL plans a compiled shape once, for any tag: it guesses hundreds of members per tag and would
      // rather hash them against a scan of every resource. The LATERAL lookup (OFFSET 0 keeps it a subquery)
      // finds each member's row by its index instead. SQLite joins by the index anyway.
      const members = pg
        ? sql`select json_build_array(tm.res_type, tm.res_uuid, o.owner_uuid) as v, tm.seq as s from tag_members as tm cross join lateral (select r.owner_uuid from resources as r where r.uuid = tm.res_uuid and r.kind = tm.res_type offset 0) as o where tm.tag_uuid = resources.uuid`
        : sql`select json_array(tm.res_type, tm.res_uuid, r.owner_uuid) as v, tm.seq as s from tag_members as tm inner join resources as r on r.uuid = tm.res_uuid and r.kind = tm.res_type where tm.tag_uuid = resources.uuid`;
      cols.push(this.jsonList(members, { json: true }).as('rel_members'));
    }
    return cols;
  }

  /**
   * The stamp of a row's relations as `me` sees them: the `s:` scope counters (answer_scopes) of the row's
   * owner and of `me`. Every relation a read can bring along is made of rows whose writes raise one of them
   * in the writing transaction: the caller's tags on the row (`s:<me>`; a tag carries its owner's rows only),
   * the grants on it and the permissions they hold (the owner's ACLs over the owner's tags: `s:<owner>`),
   * a tag's members (the tag owner's memberships, and the member rows themselves: 0140's triggers), a
   * grantee's e-mail (0140). Counters only grow and roll back with their writes, so an equal stamp is equal
   * relations. An own row is its owner's one counter, read once for the statement.
   */
  private stampColumn(me: unknown): RawBuilder<string> {
    const mine = sql`coalesce((select n from answer_scopes where scope = 's:' || ${me}), 0)`;
    const theirs = sql`coalesce((select n from answer_scopes where scope = 's:' || coalesce(resources.owner_uuid, '')), 0)`;
    return sql<string>`case when resources.owner_uuid = ${me} then ${mine} else ${theirs} || '.' || ${mine} end`;
  }

  /**
   * A subquery's values (its column `v`, in the order of its column `s` when it has one) as JSON array text,
   * `[]` when it has none. `json`: the values are JSON arrays themselves (SQLite loses that across a subquery
   * without `json()`).
   */
  private jsonList(sub: RawBuilder<unknown>, opts: { json?: boolean; ordered?: boolean } = {}): RawBuilder<string> {
    const ordered = opts.ordered ?? true;
    if (this.sql.dialect === 'postgres')
      return sql<string>`(select coalesce(json_agg(x.v${ordered ? sql` order by x.s` : sql``}), '[]'::json)::text from (${sub}) as x)`;
    return sql<string>`(select json_group_array(${opts.json ? sql`json(x.v)` : sql`x.v`}) from (${sub}${ordered ? sql` order by s` : sql``}) as x)`;
  }
}
