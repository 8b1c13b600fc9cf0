import {
  PostgresAdapter,
  PostgresDialect,
  sql,
  type DatabaseIntrospector,
  type DatabaseMetadata,
  type DatabaseMetadataOptions,
  type Kysely,
  type TableMetadata,
} from 'kysely';

/**
 * The PostgreSQL dialect of a Stratus store, whose migrations concern its own schema only. Several deployments
 * (or test servers) share one database, each in its schema (the URL's search_path). Kysely's stock dialect
 * serialises every migration of the whole database on one advisory lock, and its migrator lists the tables
 * and columns of every schema of the database (three times a start): with hundreds of schemas each start
 * waits for all the others' and reads all their catalogues (a test run on a loaded machine: servers 90 s
 * late, queued on the lock behind one another's catalogue reads). Here both the listing and the lock are
 * the current schema's: starts in other schemas run side by side, and the listing cannot see (and so
 * cannot trip over) another schema's migration in progress.
 */
export class SchemaPostgresDialect extends PostgresDialect {
  override createAdapter(): PostgresAdapter {
    return new SchemaMigrationLock();
  }
  override createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new SchemaIntrospector(db);
  }
}

/**
 * 'STMK': Kysely's own migration lock, per schema (`pg_advisory_xact_lock(key, hashtext(schema))`). Apart
 * from db.ts's MIGRATION_LOCK, which migrationsAlone holds on another connection around the same migration.
 */
const KYSELY_MIGRATION_LOCK = 1398033739;

/** Kysely's migration lock (taken inside the migration transaction), per schema instead of per database. */
class SchemaMigrationLock extends PostgresAdapter {
  override async acquireMigrationLock(db: Kysely<unknown>): Promise<void> {
    await sql`select pg_advisory_xact_lock(${sql.lit(KYSELY_MIGRATION_LOCK)}, hashtext(current_schema()))`.execute(db);
  }
  override async releaseMigrationLock(): Promise<void> {
    // A transaction lock: released at the migration transaction's end.
  }
}

/** What the migrator asks (which schemas and tables exist), answered for the current schema only. */
class SchemaIntrospector implements DatabaseIntrospector {
  constructor(private readonly db: Kysely<unknown>) {}

  async getSchemas(): Promise<{ name: string }[]> {
    const { rows } = await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace where nspname = current_schema()`.execute(this.db);
    return rows;
  }

  async getTables(options: DatabaseMetadataOptions = { withInternalKyselyTables: false }): Promise<TableMetadata[]> {
    const { rows } = await sql<{
      table: string;
      kind: string;
      schema: string;
      column: string;
      type: string;
      type_schema: string;
      not_null: boolean;
      has_default: boolean;
    }>`select c.relname as table, c.relkind as kind, ns.nspname as schema, a.attname as column, typ.typname as type,
              tns.nspname as type_schema, a.attnotnull as not_null, a.atthasdef as has_default
         from pg_catalog.pg_class c
         join pg_catalog.pg_namespace ns on ns.oid = c.relnamespace
         join pg_catalog.pg_attribute a on a.attrelid = c.oid and a.attnum >= 0 and not a.attisdropped
         join pg_catalog.pg_type typ on typ.oid = a.atttypid
         join pg_catalog.pg_namespace tns on tns.oid = typ.typnamespace
        where ns.nspname = current_schema() and c.relkind in ('r', 'v', 'p')
        order by c.relname, a.attnum`.execute(this.db);
    const tables = new Map<string, TableMetadata>();
    for (const r of rows) {
      if (!options.withInternalKyselyTables && (r.table === 'kysely_migration' || r.table === 'kysely_migration_lock')) continue;
      let t = tables.get(r.table);
      if (!t) tables.set(r.table, (t = { name: r.table, schema: r.schema, isView: r.kind === 'v', columns: [] }));
      (t.columns as TableMetadata['columns'][number][]).push({
        name: r.column,
        dataType: r.type,
        dataTypeSchema: r.type_schema,
        isNullable: !r.not_null,
        hasDefaultValue: r.has_default,
        isAutoIncrementing: false,
      });
    }
    return [...tables.values()];
  }

  async getMetadata(options?: DatabaseMetadataOptions): Promise<DatabaseMetadata> {
    return { tables: await this.getTables(options) };
  }
}
