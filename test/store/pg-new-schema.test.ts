import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Kysely, type CompiledQuery } from 'kysely';
import pg from 'pg';
import { Store } from '../../src/store/db.js';
import { answerChannel, schemaChannel } from '../../src/store/changes.js';
import { migratorOf } from '../../src/store/migrations/index.js';
import { ANSWERS_MARK, CHANGES_MARK, SCHEMA_MARK, type NewSchemaScript } from '../../src/store/migrations/at-once.js';
import { NEW_SCHEMA } from '../../src/store/migrations/pg-new-schema.js';
import { SchemaPostgresDialect } from '../../src/store/pg-dialect.js';
import { freshDatabase } from '../helpers/db.js';
import { onlyOn } from '../helpers/skips.js';

/**
 * A new PostgreSQL schema is made by the recorded script of its migrations in one round trip
 * (src/store/migrations/at-once.ts): proven here to leave what the migrations one by one leave (tables,
 * columns with their types, defaults and order, indexes, constraints, sequences, triggers, functions, and
 * the rows a migration writes). `STRATUS_RECORD_NEW_SCHEMA=1` records the script again (after a new
 * migration) into src/store/migrations/pg-new-schema.ts.
 */
const skip = onlyOn('postgres');
const schemaOf = (url: string) => /search_path%3D([a-z0-9_]+)/.exec(url)![1];

/** A SQL literal of a recorded statement's parameter (the few types migrations write). */
function literal(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (typeof v === 'string') return `'${v.replaceAll("'", "''")}'`;
  throw new Error(`recording the new-schema script: a parameter of type ${typeof v}`);
}

/** What the migrations one by one execute on a new schema, as the script's statements (reads left out). */
async function record(url: string): Promise<NewSchemaScript> {
  const schema = schemaOf(url);
  const seen: CompiledQuery[] = [];
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const db = new Kysely<unknown>({ dialect: new SchemaPostgresDialect({ pool }), log: (e) => void (e.level === 'query' && seen.push(e.query)) });
  try {
    const { error, results } = await migratorOf(db, 'postgres', schema).migrateToLatest();
    if (error) throw error;
    const marks: [string, string][] = [
      [`"${schema}"`, `"${SCHEMA_MARK}"`],
      [answerChannel(schema), ANSWERS_MARK],
      [schemaChannel(schema), CHANGES_MARK],
    ];
    const statements = seen.flatMap(({ sql, parameters }) => {
      // Reads change nothing (a data migration reads empty tables here); Kysely's own lock is kept.
      if (/^\s*(begin|commit)\s*$/i.test(sql) || (/^\s*select\b/i.test(sql) && !/pg_advisory_xact_lock/.test(sql))) return [];
      // Kysely's row per migration: the script writes them all at once (at-once.ts).
      if (/^insert into "[^"]+"\."kysely_migration" /.test(sql)) return [];
      // DDL takes no parameters: `$1` there is a function's own argument.
      let text = parameters.length ? sql.replace(/\$(\d+)/g, (_, n: string) => literal(parameters[Number(n) - 1])) : sql;
      // Without `if not exists`: a schema that is not new fails here (at-once.ts NOT_NEW).
      text = text.replace(/^create table if not exists ("[^"]+"\."kysely_migration") /, 'create table $1 ');
      for (const [from, to] of marks) text = text.replaceAll(from, to);
      if (text.includes(schema) || text.includes(answerChannel(schema).slice(-16)))
        throw new Error(`recording the new-schema script: a statement names the schema in a way it cannot mark: ${text}`);
      return [text];
    });
    return { through: (results ?? []).map((r) => r.migrationName), statements };
  } finally {
    await db.destroy();
  }
}

/** Everything a schema is made of, with its name and channels replaced by marks (so two schemas compare). */
async function catalogue(url: string): Promise<Record<string, unknown>> {
  const schema = schemaOf(url);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const q = async (text: string) => (await client.query(text, [schema])).rows;
    const parts: Record<string, unknown> = {
      tables: await q(`select table_name, table_type from information_schema.tables where table_schema = $1 order by 1`),
      columns: await q(`select c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod) as type, a.attnotnull, a.atthasdef,
          a.atthasmissing, a.attmissingval::text, a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid) as default
        from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
        left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
        where n.nspname = $1 and a.attnum > 0 and not a.attisdropped order by 1, 2`),
      relations: await q(`select c.relname, c.relkind, c.relpersistence, c.reloptions::text from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = $1 order by 1`),
      indexes: await q(`select tablename, indexname, indexdef from pg_indexes where schemaname = $1 order by 2`),
      constraints: await q(`select conrelid::regclass::text as tbl, conname, contype, pg_get_constraintdef(c.oid) as def
        from pg_constraint c join pg_namespace n on n.oid = c.connamespace where n.nspname = $1 order by 1, 2`),
      sequences: await q(`select sequence_name, data_type, start_value, minimum_value, maximum_value, increment, cycle_option
        from information_schema.sequences where sequence_schema = $1 order by 1`),
      triggers: await q(`select t.tgrelid::regclass::text as tbl, t.tgname, pg_get_triggerdef(t.oid) as def, t.tgenabled
        from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = $1 and not t.tgisinternal order by 1, 2`),
      functions: await q(`select p.proname, pg_get_function_identity_arguments(p.oid) as args, pg_get_functiondef(p.oid) as def
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = $1 order by 1, 2`),
    };
    // The rows migrations write (Kysely's own: the names, not when they were applied).
    const rows: Record<string, unknown> = {};
    for (const { table_name } of parts.tables as { table_name: string }[])
      rows[table_name] = (
        await client.query(
          table_name === 'kysely_migration'
            ? `select coalesce(json_agg(name order by name), '[]') as r from "${schema}".kysely_migration`
            : `select coalesce(json_agg(t order by t::text), '[]') as r from "${schema}"."${table_name}" t`,
        )
      ).rows[0].r;
    parts.rows = rows;
    let text = JSON.stringify(parts);
    for (const [from, to] of [
      [schema, SCHEMA_MARK],
      [answerChannel(schema), ANSWERS_MARK],
      [schemaChannel(schema), CHANGES_MARK],
    ])
      text = text.replaceAll(from, to);
    return JSON.parse(text) as Record<string, unknown>;
  } finally {
    await client.end();
  }
}

test('recording: the script is what the migrations execute on a new schema', { skip }, async () => {
  const recorded = await record((await freshDatabase()).url);
  if (process.env.STRATUS_RECORD_NEW_SCHEMA === '1') {
    const file = fileURLToPath(new URL('../../src/store/migrations/pg-new-schema.ts', import.meta.url));
    writeFileSync(
      file,
      '// Recorded by `STRATUS_RECORD_NEW_SCHEMA=1 STRATUS_TEST_DB=postgres npx tsx --test test/store/pg-new-schema.test.ts`\n' +
        '// (then `npx prettier --write` this file): do not edit (migrations/at-once.ts says what it is).\n' +
        "import type { NewSchemaScript } from './at-once.js';\n\n" +
        `export const NEW_SCHEMA: NewSchemaScript = ${JSON.stringify(recorded, null, 2)};\n`,
    );
  }
  assert.ok(recorded.statements.length > 100);
  // A recorded script is the migrations' own: the kept one is that of the migrations it covers.
  assert.ok(NEW_SCHEMA.through.length > 0, 'no new-schema script: record it (STRATUS_RECORD_NEW_SCHEMA=1)');
  assert.deepEqual(NEW_SCHEMA.through, recorded.through.slice(0, NEW_SCHEMA.through.length));
});

test('a new schema made at once has the catalogue and rows of one made one migration at a time', { skip }, async () => {
  const [slow, fast] = [await freshDatabase(), await freshDatabase()];
  const one = await Store.open(slow.url, { newSchemaAtOnce: false });
  const all = await Store.open(fast.url);
  try {
    assert.deepEqual(all.migrated, one.migrated);
    assert.ok(one.roundTrips > 40, `${one.roundTrips} round trips one by one`);
    assert.ok(all.roundTrips < 10, `${all.roundTrips} round trips for a new schema at once`);
    assert.deepEqual(await catalogue(fast.url), await catalogue(slow.url));
  } finally {
    await one.close();
    await all.close();
  }
});

test('a schema that is not new after all (bookkeeping left by an interrupted start) takes the one-by-one path', { skip }, async () => {
  const db = await freshDatabase();
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  try {
    await admin.query('create table kysely_migration (name varchar(255) not null primary key, timestamp varchar(255) not null)');
  } finally {
    await admin.end();
  }
  const store = await Store.open(db.url);
  try {
    const status = await store.schemaStatus();
    assert.deepEqual(store.migrated, status.known);
    assert.equal(status.pending.length, 0);
    assert.ok(store.roundTrips > 40, `${store.roundTrips} round trips: one migration at a time`);
  } finally {
    await store.close();
  }
});
