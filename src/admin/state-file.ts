import type { Services } from '../core/context.js';
import { validation } from '../core/errors.js';
import { VERSION } from '../version.js';

/**
 * The whole state of a deployment as one JSON document (`GET|POST /_stratus/admin/state`, `stratus export`,
 * `stratus import`), so a pipeline seeds once and restores in a second: every table of the schema, read in
 * one snapshot (settings with the shared clock and the Digest secret, users, resources, timers, simulator
 * state, audit log, outbox, counters…). Importing replaces everything in one transaction, into a fresh
 * database or a used one. The document names the schema it came from (the last migration); an import
 * into another schema is refused, as is a document that is not one of these.
 *
 * Tables are found in the database (those store/tables.ts marks exported), so a table a later migration adds travels too.
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

async function schemaName(s: Services): Promise<string> {
  return (await s.store.schemaStatus()).applied.at(-1) ?? '';
}

/** Where long work reports how far it is (the command line's progress line): steps done, of how many, the current one. */
export type OnProgress = (done: number, total: number, item: string) => void;

export async function exportState(s: Services, progress?: OnProgress): Promise<StateDocument> {
  const schema = await schemaName(s);
  const tables = await s.store.snapshot(async (tx) => {
    const out: Record<string, Record<string, unknown>[]> = {};
    const names = await s.store.state.tableNames(tx);
    for (const [i, t] of names.entries()) {
      out[t] = await s.store.state.rowsOf(tx, t);
      progress?.(i + 1, names.length, `table ${t} (${out[t].length} rows)`);
    }
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
export async function importState(s: Services, doc: unknown, progress?: OnProgress): Promise<Record<string, number>> {
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
    const names = await s.store.state.tableNames(tx);
    const missing = names.filter((t) => !Array.isArray(given[t]));
    const extra = Object.keys(given).filter((t) => !names.includes(t));
    if (missing.length || extra.length)
      throw validation(
        'tables',
        `the state file's tables do not match this schema (missing: ${missing.join(', ') || 'none'}; unknown: ${extra.join(', ') || 'none'})`,
      );
    return s.store.state.replaceAll(tx, names, given, PARAMS_PER_INSERT, (done, t) => progress?.(done, names.length, `table ${t} (${given[t].length} rows)`));
  });
}
