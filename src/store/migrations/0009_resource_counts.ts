import { sql, type Kysely, type Migration } from 'kysely';

/**
 * How many resources of each kind each owner has (`owner_uuid` '' for the ownerless library), kept by the
 * repository in the transaction that inserts or deletes them: a list's `total_count` is one row read
 * instead of a count over every row of a large account. And a version per resource row, raised by every
 * write of its body, so an object presented once is reused until it changes (in any process).
 */
export const resourceCounts: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .alterTable('resources')
      .addColumn('version', 'integer', (c) => c.notNull().defaultTo(0))
      .execute();
    await db.schema
      .createTable('resource_counts')
      .addColumn('kind', 'varchar(32)', (c) => c.notNull())
      .addColumn('owner_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('n', 'bigint', (c) => c.notNull())
      // Raised with every change of n: positions in the owner's list of the kind are valid for one version.
      .addColumn('version', 'bigint', (c) => c.notNull().defaultTo(1))
      .addPrimaryKeyConstraint('resource_counts_pk', ['kind', 'owner_uuid'])
      .execute();
    await sql`insert into resource_counts (kind, owner_uuid, n) select kind, coalesce(owner_uuid, ''), count(*) from resources group by kind, coalesce(owner_uuid, '')`.execute(
      db,
    );
  },
};
