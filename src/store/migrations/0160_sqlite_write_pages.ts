import { sql, type Kysely, type Migration, type Transaction } from 'kysely';
import type { Dialect } from '../db.js';

/**
 * SQLite: fewer pages per write. A commit writes every page it changed to the WAL (and later again into the
 * file), so each b-tree a write touches is a page (bench/pages.ts names them): a `POST /servers/` wrote 15.5,
 * a `PUT` 9.1. Two of them carried nothing a reader needs:
 *
 * - `sqlite_sequence`, the high-water mark AUTOINCREMENT keeps for `resources` and `audit_log` (one page,
 *   written by every insert into either). Without it a new row's key is the largest one in the table plus
 *   one: still above every row there is, so creation order (lists, `/logs/` newest first, keyset scans by
 *   seq) is unchanged. A key may come back only after the row that had it is gone (the newest rows
 *   deleted), and nothing refers to a gone row's seq: the caches keyed on seqs are checked against counters
 *   that every insert and delete raises (anchors: the owner's count version; shared rows: `sharing`).
 * - `answer_scopes` kept its rows in a rowid table and again in the index of its text key: a new scope (every
 *   new resource's `r:<uuid>`) wrote two b-trees. WITHOUT ROWID keeps the row in its key's b-tree only.
 *
 * Tables are rebuilt (new table, rows copied, old dropped, new renamed) with their indexes and every trigger
 * on or naming them dropped first and created again from their own text, in one transaction.
 */
export const sqliteWritePages = (dialect: Dialect): Migration => ({
  async up(db: Kysely<any>) {
    if (dialect !== 'sqlite') return;
    await db.transaction().execute(async (tx) => {
      const noAutoincrement = (create: string) => create.replace(/\s+autoincrement\b/i, '');
      await rebuild(tx, 'resources', noAutoincrement);
      await rebuild(tx, 'audit_log', noAutoincrement);
      await rebuild(tx, 'answer_scopes', (create) => `${create} without rowid`);
    });
  },
});

/** Rebuilds `table` from its CREATE statement as `change` makes it, keeping its rows, indexes and triggers. */
async function rebuild(tx: Transaction<any>, table: string, change: (create: string) => string): Promise<void> {
  const schema = (type: string, where = sql`tbl_name = ${table}`) =>
    sql<{ name: string; sql: string }>`select name, sql from sqlite_master where type = ${type} and sql is not null and ${where} order by rowid`
      .execute(tx)
      .then((r) => r.rows);
  const [create] = await schema('table', sql`name = ${table}`);
  if (!create) throw new Error(`rebuild: no table ${table}`);
  const indexes = await schema('index');
  // Triggers on the table, and those of other tables whose bodies name it (a rename checks every one).
  const triggers = await schema('trigger', sql`(tbl_name = ${table} or sql like ${`%${table}%`})`);
  for (const t of triggers) await sql`drop trigger ${sql.id(t.name)}`.execute(tx);
  const rebuilt = `${table}__rebuilt`;
  const text = change(create.sql).replace(/^create table\s+("?)[^\s"(]+\1/i, `create table "${rebuilt}"`);
  if (!text.startsWith(`create table "${rebuilt}"`)) throw new Error(`rebuild: cannot rename ${create.sql}`);
  await sql.raw(text).execute(tx);
  await sql`insert into ${sql.table(rebuilt)} select * from ${sql.table(table)}`.execute(tx);
  await sql`drop table ${sql.table(table)}`.execute(tx);
  await sql`alter table ${sql.table(rebuilt)} rename to ${sql.table(table)}`.execute(tx);
  for (const o of [...indexes, ...triggers]) await sql.raw(o.sql).execute(tx);
}
