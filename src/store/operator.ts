import type { Db, Tx } from './db.js';

/**
 * What the operator plane reads across accounts' objects (`resources`): the metrics' servers by status and
 * seeding's counts and names. Kept apart from the resource repository (store/repository.ts), which serves
 * the kinds' request paths.
 */
export class OperatorReads {
  /** Every account's servers, counted by status. */
  async serversByStatus(db: Db | Tx): Promise<{ status: string | null; n: number }[]> {
    const rows = await db
      .selectFrom('resources')
      .select((eb) => ['status', eb.fn.countAll<number>().as('n')])
      .where('kind', '=', 'servers')
      .groupBy('status')
      .execute();
    return rows.map((r) => ({ status: r.status, n: Number(r.n) }));
  }

  /** How many objects of a kind an account has (its rows, counted). */
  async countOwned(db: Db | Tx, kind: string, owner: string): Promise<number> {
    const row = await db
      .selectFrom('resources')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('kind', '=', kind)
      .where('owner_uuid', '=', owner)
      .executeTakeFirst();
    return Number(row?.n ?? 0);
  }

  /** The names of an account's objects of some kinds, with their kind and uuid (unnamed ones left out). */
  async namedOwned(db: Db | Tx, owner: string, kinds: readonly string[]): Promise<{ kind: string; name: string; uuid: string }[]> {
    const rows = await db
      .selectFrom('resources')
      .select(['kind', 'name', 'uuid'])
      .where('owner_uuid', '=', owner)
      .where('kind', 'in', [...kinds])
      .execute();
    return rows.filter((r): r is typeof r & { name: string } => r.name !== null);
  }
}
