import type { Db, Tx } from '../db.js';
import { toResource, type AnyQuery, type Resource, type Row } from './model.js';
import type { ResourceRows } from './rows.js';
import type { ResourceSql } from './sql.js';

/**
 * Questions about many rows of `resources` answered from the indexed columns (kind, owner, status, name,
 * uuid) without reading bodies: which are in a state, which exist, which names are taken. Also the
 * subqueries of an owner's uuids other queries put in their conditions.
 */
export class ResourceScans {
  constructor(
    private readonly sql: ResourceSql,
    private readonly rows: ResourceRows,
  ) {}

  /** uuids of a kind in some states (indexed status column), optionally one owner's. */
  async uuidsInStatus(db: Db | Tx, kind: string, statuses: readonly string[], owner?: string): Promise<string[]> {
    let q = db
      .selectFrom('resources')
      .select('uuid')
      .where('kind', '=', kind)
      .where('status', 'in', [...statuses]);
    if (owner !== undefined) q = q.where('owner_uuid', '=', owner);
    return (await q.execute()).map((r) => r.uuid);
  }

  /** Whether any of `uuids` (of kind) is in one of `statuses`. */
  async anyInStatus(db: Db | Tx, kind: string, uuids: readonly string[], statuses: readonly string[]): Promise<boolean> {
    if (!uuids.length) return false;
    const row = await db
      .selectFrom('resources')
      .select('uuid')
      .where('kind', '=', kind)
      .where('uuid', 'in', [...uuids])
      .where('status', 'in', [...statuses])
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Names an owner already uses for a kind (clone naming), optionally only those starting with `prefix`. */
  async namesOf(db: Db | Tx, kind: string, owner: string, prefix?: string): Promise<Set<string>> {
    let q = db.selectFrom('resources').select('name').where('kind', '=', kind).where('owner_uuid', '=', owner);
    if (prefix !== undefined) q = q.where(this.sql.like('name', prefix, { prefix: true }));
    return new Set((await q.execute()).map((r) => r.name).filter((n): n is string => n !== null));
  }

  /** Which of `uuids` exist as `kind` (and, if given, belong to `owner`): uuid -> kind. */
  async existing(db: Db | Tx, kinds: string | readonly string[], uuids: readonly string[], owner?: string): Promise<Map<string, Resource>> {
    if (!uuids.length) return new Map();
    if (typeof kinds === 'string' && owner === undefined) {
      const rows = await this.sql.shaped<Row, 'kind' | 'uuids'>(
        db,
        'resources.existing',
        (arg) => this.rows.select(db, arg('kind')).where(this.sql.inList('uuid', arg('uuids'))),
        {
          kind: kinds,
          uuids: this.sql.listArg(uuids),
        },
      );
      return new Map(rows.map((r) => [r.uuid, toResource(r)]));
    }
    let q = this.rows.select(db, kinds).where('uuid', 'in', [...uuids]);
    if (owner !== undefined) q = q.where('owner_uuid', '=', owner);
    return new Map(((await q.execute()) as Row[]).map((r) => [r.uuid, toResource(r)]));
  }

  /** Every row of a kind with an owner's e-mail (operator listings), in creation order. */
  listWithOwnerEmail(db: Db | Tx, kind: string, owner?: string) {
    let q = db
      .selectFrom('resources as r')
      .leftJoin('users as u', 'u.uuid', 'r.owner_uuid')
      .select(['r.uuid', 'r.owner_uuid', 'u.email'])
      .where('r.kind', '=', kind);
    if (owner) q = q.where('r.owner_uuid', '=', owner);
    return q.orderBy('r.seq').execute();
  }

  /** Subquery: uuids of an owner's objects of a kind (for IN conditions of other queries). */
  ownedUuids(db: Db | Tx, kind: string, owner: string | null) {
    const q = db.selectFrom('resources as own').select('own.uuid').where('own.kind', '=', kind);
    return owner === null ? q.where('own.owner_uuid', 'is', null) : q.where('own.owner_uuid', '=', owner);
  }

  /** Every uuid of a kind (a small kind: the pool's taken addresses). */
  async allUuids(db: Db | Tx, kind: string): Promise<Set<string>> {
    return new Set((await db.selectFrom('resources').select('uuid').where('kind', '=', kind).execute()).map((r) => r.uuid));
  }

  /** Objects of any kind but `notKind` among `uuids` owned by `owner`: uuid -> kind. */
  async kindsOf(db: Db | Tx, uuids: readonly string[], owner: string, notKind: string): Promise<Map<string, string>> {
    if (!uuids.length) return new Map();
    const rows = await db
      .selectFrom('resources')
      .select(['kind', 'uuid'])
      .where('uuid', 'in', [...uuids])
      .where('kind', '!=', notKind)
      .where('owner_uuid', '=', owner)
      .execute();
    return new Map(rows.map((r) => [r.uuid, r.kind]));
  }

  /** Whether `uuid` is among the uuids a subquery selects (its column `uuid`): a visibility rule asked of one row. */
  async selects(db: Db | Tx, subquery: AnyQuery, uuid: string): Promise<boolean> {
    const hit = await db.selectFrom(subquery.as('v')).select('v.uuid').where('v.uuid', '=', uuid).executeTakeFirst();
    return hit !== undefined;
  }
}
