import { sql } from 'kysely';
import type { Services } from '../core/context.js';
import { validation } from '../core/errors.js';
import type { Tx } from '../store/db.js';
import { VERSION } from '../version.js';

/**
 * The whole state of a deployment as one JSON document (`GET|POST /_stratus/admin/state`, `stratus export`,
 * `stratus import`), so a pipeline seeds once and restores in a second: every table of the schema, read in
 * one snapshot (settings with the shared clock and the Digest secret, users, resources, timers, simulator
 * state, audit log, outbox, counters…). Importing replaces everything in one transaction, into a fresh
 * database or a used one. The document names the schema it came from (the last migration); an import
 * into another schema is refused, as is a document that is not one of these.
 *
 * Tables are found in the database, not listed here, so a table a later migration adds travels too.
 */
export const STATE_FORMAT = 'stratus-state';
const FORMAT_VERSION = 1;

export interface StateDocument {
  format: typeof STATE_FORMAT;
  format_version: number;
  stratus: string;
  schema: string;
  exported_at: string;
  tables: Record<string, Record<string, unknown>[]>;
}

async function tableNames(s: Services, db: Tx): Promise<string[]> {
  const rows =
    s.store.dialect === 'postgres'
      ? (
          await sql<{ name: string }>`select table_name as name from information_schema.tables
            where table_schema = current_schema() and table_type = 'BASE TABLE' and table_name not like 'kysely_%'`.execute(db)
        ).rows
      : (await sql<{ name: string }>`select name from sqlite_master where type = 'table' and name not like 'sqlite_%' and name not like 'kysely_%'`.execute(db))
          .rows;
  return rows.map((r) => r.name).sort();
}

async function schemaName(s: Services): Promise<string> {
  return (await s.store.schemaStatus()).applied.at(-1) ?? '';
}

export async function exportState(s: Services): Promise<StateDocument> {
  const schema = await schemaName(s);
  const tables = await s.store.snapshot(async (tx) => {
    const out: Record<string, Record<string, unknown>[]> = {};
    for (const t of await tableNames(s, tx)) out[t] = (await sql<Record<string, unknown>>`select * from ${sql.table(t)}`.execute(tx)).rows;
    return out;
  });
  return { format: STATE_FORMAT, format_version: FORMAT_VERSION, stratus: VERSION, schema, exported_at: new Date().toISOString(), tables };
}

/** Rows per insert: well under both engines' limits on bound parameters. */
const PARAMS_PER_INSERT = 10_000;

/**
 * Replace the whole state with a document's. Checked before anything is deleted: a wrong document is a 400
 * `validation` (exit code 2) that changes nothing. Returns the rows imported per table.
 */
export async function importState(s: Services, doc: unknown): Promise<Record<string, number>> {
  const d = doc as Partial<StateDocument> | null;
  if (!d || typeof d !== 'object' || d.format !== STATE_FORMAT)
    throw validation('format', `not a Stratus state file (expected "format": "${STATE_FORMAT}", as \`stratus export\` writes)`);
  if (d.format_version !== FORMAT_VERSION)
    throw validation('format_version', `state file format ${String(d.format_version)} is not supported (this Stratus reads ${FORMAT_VERSION})`);
  const schema = await schemaName(s);
  if (d.schema !== schema)
    throw validation(
      'schema',
      `the state file was exported from schema ${String(d.schema)} (Stratus ${String(d.stratus)}); this database is at ${schema}: import it with the same Stratus version`,
    );
  if (!d.tables || typeof d.tables !== 'object') throw validation('tables', 'tables must be an object of table name -> rows');
  const given = d.tables;
  return s.store.transaction(async (tx) => {
    const names = await tableNames(s, tx);
    const missing = names.filter((t) => !Array.isArray(given[t]));
    const extra = Object.keys(given).filter((t) => !names.includes(t));
    if (missing.length || extra.length)
      throw validation(
        'tables',
        `the state file's tables do not match this schema (missing: ${missing.join(', ') || 'none'}; unknown: ${extra.join(', ') || 'none'})`,
      );
    // Cached presentations are keyed by row version: imported rows get versions above any seen before.
    const bump = await maxVersion(tx);
    // `users` is referred to (rate-limit overrides): deleted last, inserted first.
    const order = [...names].sort((a, b) => Number(b === 'users') - Number(a === 'users'));
    for (const t of [...order].reverse()) await sql`delete from ${sql.table(t)}`.execute(tx);
    const counts: Record<string, number> = {};
    for (const t of order) {
      const rows = given[t];
      counts[t] = rows.length;
      if (!rows.length) continue;
      const width = Math.max(1, Object.keys(rows[0]).length);
      const batch = Math.max(1, Math.floor(PARAMS_PER_INSERT / width));
      for (let i = 0; i < rows.length; i += batch)
        await tx
          .insertInto(t as 'settings')
          .values(rows.slice(i, i + batch) as never)
          .execute();
    }
    for (const t of ['resources', 'resource_counts']) if (names.includes(t)) await sql`update ${sql.table(t)} set version = version + ${bump}`.execute(tx);
    if (s.store.dialect === 'postgres') await resetSequences(tx);
    return counts;
  });
}

async function maxVersion(tx: Tx): Promise<number> {
  const r = await sql<{
    v: number | string | null;
  }>`select max(v) as v from (select max(version) as v from resources union all select max(version) as v from resource_counts) m`.execute(tx);
  return Number(r.rows[0]?.v ?? 0) + 1;
}

/** PostgreSQL's serial columns continue after the imported keys (SQLite's autoincrement follows by itself). */
async function resetSequences(tx: Tx): Promise<void> {
  const cols = await sql<{ t: string; c: string }>`select table_name as t, column_name as c from information_schema.columns
    where table_schema = current_schema() and column_default like 'nextval%'`.execute(tx);
  for (const { t, c } of cols.rows)
    await sql`select setval(pg_get_serial_sequence(${t}, ${c}), coalesce((select max(${sql.ref(c)}) from ${sql.table(t)}), 0) + 1, false)`.execute(tx);
}
