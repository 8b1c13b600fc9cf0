import { NEW_SCHEMA } from './pg-new-schema.js';

/**
 * A new PostgreSQL schema in one round trip. Run one at a time, a new schema's migrations were 72 round trips
 * (a read or a final wait each: 0021 alone reads the schema name once per table), most of a PostgreSQL
 * start-up's time on a busy machine, where every round trip waits for the scheduler twice. The script
 * (pg-new-schema.ts) is what those migrations executed on a new schema, recorded by
 * test/store/pg-new-schema.test.ts, which proves that both paths leave the same catalogue and rows. It is
 * sent as one simple query (one implicit transaction), ending with Kysely's bookkeeping rows.
 *
 * Released migrations never change, so the script stays true for them. A migration newer than the script
 * runs one by one after it (a stale script is slower, never wrong); the test's `STRATUS_RECORD_NEW_SCHEMA=1`
 * mode records it again.
 */
export interface NewSchemaScript {
  /** The migrations the script stands for, in order: a prefix of the known ones. */
  through: readonly string[];
  /** Their statements, with the marks below in place of the schema's name and channels. */
  statements: readonly string[];
}

export const SCHEMA_MARK = '{{schema}}';
export const ANSWERS_MARK = '{{answers}}';
export const CHANGES_MARK = '{{changes}}';

/**
 * The SQLSTATE of the script's first statement when the schema is not new: it creates Kysely's bookkeeping
 * table without `if not exists` (duplicate_table), so a schema another process migrated first, or one an
 * interrupted attempt left its bookkeeping in, takes the one-by-one path.
 */
export const NOT_NEW = '42P07';

/** Names the script may quote as they are (the schemas Stratus makes; anything else goes one by one). */
const PLAIN = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * The script for `schema` (whose answer and change channels are given) as one text, or null when there is no
 * script, its migrations are not the first `known` ones, or the schema's name needs quoting.
 */
export function newSchemaBatch(
  schema: string,
  channels: { answers: string; changes: string },
  known: readonly string[],
  now: string,
  script: NewSchemaScript = NEW_SCHEMA,
): { sql: string; through: readonly string[] } | null {
  const { through, statements } = script;
  if (!statements.length || !PLAIN.test(schema) || through.some((name, i) => known[i] !== name || !/^[\w.-]+$/.test(name))) return null;
  const fill = (text: string) => text.replaceAll(SCHEMA_MARK, schema).replaceAll(ANSWERS_MARK, channels.answers).replaceAll(CHANGES_MARK, channels.changes);
  const rows = through.map((name) => `('${name}', '${now}')`).join(', ');
  return { through, sql: [...statements.map(fill), `insert into "${schema}"."kysely_migration" ("name", "timestamp") values ${rows}`].join(';\n') };
}
