import type { Db, Tx } from '../db.js';
import type { ArgOf } from '../shapes.js';
import { columnsOf, relKey, type AnyQuery, type Condition, type Relations, type RelRow, type Resource, type SharedRows, type VisibleSet } from './model.js';
import type { ResourceRelations } from './relations.js';
import type { ResourceSql } from './sql.js';

/**
 * What a caller may see of a kind, as query pieces: their own rows and the rows others share with them
 * (two halves, each an index range, never a scan of every account), with the filters' conditions. Lists
 * (pages.ts) and single reads turn a visible set into SQL from these pieces.
 */
export class VisibleSets {
  constructor(
    private readonly sql: ResourceSql,
    private readonly relations: ResourceRelations,
  ) {}

  /**
   * The rows of a kind a user may see: their own, plus rows whose uuids `shared(me)` selects (ACL grants,
   * the library, DHCP leases). Filters add conditions with `where`; `listPage` and `findVisibleWith`
   * turn it into SQL.
   */
  of(db: Db | Tx, kind: string, owner: string, shared?: SharedRows): VisibleSet {
    return { db, kind, owner, shared, where: [] };
  }

  /** The caller's own rows of the set (seq and the order columns), filtered, not yet ordered. */
  ownHalf(set: VisibleSet, arg: ArgOf<'kind' | 'me'>) {
    return this.half(set, arg).where('resources.owner_uuid', '=', arg('me'));
  }

  /** Seq and order column of the set's rows of its kind with its filters; each half adds whose rows. */
  private half(set: VisibleSet, arg: ArgOf<'kind' | 'me'>) {
    return this.withWhere(
      set.db.selectFrom('resources').select(['resources.seq', 'resources.updated_at']).where('resources.kind', '=', arg('kind')),
      set.where,
    );
  }

  /** Other users' rows the set shares with the caller, filtered, not yet ordered. */
  theirHalf(set: VisibleSet, arg: ArgOf<'kind' | 'me'>) {
    return this.half(set, arg)
      .where('resources.uuid', 'in', set.shared!(arg('me')))
      .where((eb) => eb.or([eb('resources.owner_uuid', '!=', arg('me')), eb('resources.owner_uuid', 'is', null)]));
  }

  private withWhere<Q extends AnyQuery>(q: Q, where: readonly Condition[]): Q {
    return where.reduce((acc, c) => acc.where(c) as Q, q);
  }

  /** The shape key of a visible set's query, or undefined when filters make it one of a kind. */
  shapeKey(purpose: string, set: VisibleSet, ...flags: (string | boolean)[]): string | undefined {
    if (set.where.length) return undefined;
    return [purpose, set.kind, set.shared?.key ?? 'own', ...flags.map(String)].join(':');
  }

  /**
   * One visible row by uuid with the relations `rel` asks for, in one statement (a statement is its own
   * snapshot: no transaction, and on PostgreSQL one round trip).
   */
  async findVisibleWith(set: VisibleSet, uuid: string, rel: Relations): Promise<Resource | undefined> {
    const db = set.db;
    const rows = await this.sql.runRows<RelRow, 'kind' | 'me' | 'uuid'>(
      this.shapeKey('visible.one-with', set, relKey(rel)),
      db,
      (arg) => {
        const me = arg('me');
        return this.withWhere(
          db
            .selectFrom('resources')
            .select([...columnsOf(rel), ...this.relations.columns(rel, me)])
            .where('resources.kind', '=', arg('kind'))
            .where('resources.uuid', '=', arg('uuid'))
            .where((eb) =>
              set.shared
                ? eb.or([
                    eb('resources.owner_uuid', '=', me),
                    // A probe of this row's grants where the rule has one: the list of everything shared is O(shares).
                    set.shared.holds ? eb.exists(set.shared.holds(me)) : eb('resources.uuid', 'in', set.shared(me)),
                  ])
                : eb('resources.owner_uuid', '=', me),
            ),
          set.where,
        );
      },
      { kind: set.kind, me: set.owner, uuid },
    );
    return rows.length ? rows.resource(0, rel) : undefined;
  }
}
