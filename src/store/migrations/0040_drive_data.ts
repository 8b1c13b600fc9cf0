import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';
import { announceWrites } from './0021_answer_changes.js';

/**
 * Drive data as content-addressed blocks (store/data/): `data_blocks` holds each distinct block once
 * (hash -> bytes, with the number of map entries referring to it), `data_maps` says which block is at
 * each block index of a drive or snapshot (an absent index reads as zeroes), and `upload_chunks` the
 * chunks of a chunked or resumable upload that arrived (a client resumes from them). In the database on
 * both engines, so every API process (and host, on PostgreSQL) reads the same bytes.
 */
export function driveData(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('data_blocks')
        .addColumn('hash', 'varchar(64)', (c) => c.primaryKey())
        .addColumn('data', dialect === 'postgres' ? 'bytea' : 'blob', (c) => c.notNull())
        .addColumn('refs', 'bigint', (c) => c.notNull())
        .execute();
      // Drive images are mostly incompressible: TOAST would try (and fail) to compress every block.
      if (dialect === 'postgres') await sql`alter table data_blocks alter column data set storage external`.execute(db);

      await db.schema
        .createTable('data_maps')
        .addColumn('map', 'varchar(64)', (c) => c.notNull())
        .addColumn('idx', 'bigint', (c) => c.notNull())
        .addColumn('hash', 'varchar(64)', (c) => c.notNull())
        .addPrimaryKeyConstraint('data_maps_pk', ['map', 'idx'])
        .execute();

      await db.schema
        .createTable('upload_chunks')
        .addColumn('drive', 'varchar(64)', (c) => c.notNull())
        .addColumn('offset', 'bigint', (c) => c.notNull())
        .addColumn('size', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('upload_chunks_pk', ['drive', 'offset'])
        .execute();

      // A snapshot's size is the difference of two maps: their writes change answers.
      if (dialect === 'postgres') await announceWrites(db, 'data_maps');
    },
  };
}
