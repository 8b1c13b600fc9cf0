import type { Selectable } from 'kysely';
import type { Db, Tx } from '../db.js';
import type { BurstLevelsTable } from '../schema.js';

/** The burst levels in force and next (`burst_levels`), one row per priced resource (billing/levels.ts). */
export type LevelRow = Selectable<BurstLevelsTable>;

export class LevelQueries {
  async read(db: Db | Tx): Promise<Pick<LevelRow, 'resource' | 'current' | 'next'>[]> {
    return db.selectFrom('burst_levels').select(['resource', 'current', 'next']).execute();
  }

  /** Every resource's levels as given (inserted or replaced), a statement per 200. */
  async write(tx: Tx, rows: readonly LevelRow[]): Promise<void> {
    for (let i = 0; i < rows.length; i += 200)
      await tx
        .insertInto('burst_levels')
        .values(rows.slice(i, i + 200))
        .onConflict((oc) =>
          oc
            .column('resource')
            .doUpdateSet((eb) => ({ current: eb.ref('excluded.current'), next: eb.ref('excluded.next'), updated_at: eb.ref('excluded.updated_at') })),
        )
        .execute();
  }
}
