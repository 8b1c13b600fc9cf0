import type { Kysely, Migration } from 'kysely';

/** A kind's status/state as a real column, so status filters (`?state=`, `?status=`) use an index. */
export const statusColumn: Migration = {
  async up(db: Kysely<any>) {
    await db.schema.alterTable('resources').addColumn('status', 'varchar(32)').execute();
    await db.schema.createIndex('resources_owner_status').on('resources').columns(['kind', 'owner_uuid', 'status']).execute();
    await db.schema.createIndex('resources_owner_updated').on('resources').columns(['kind', 'owner_uuid', 'updated_at']).execute();
  },
};
