import { sql, type CompiledQuery, type Compilable, type RawBuilder, type SqlBool } from 'kysely';
import type { Db, Dialect, Tx } from '../db.js';
import { page, pageShape } from '../paging.js';
import { Shapes, type ArgOf } from '../shapes.js';
import { ReadRows, type AnyQuery, type ColumnAt } from './model.js';

/**
 * SQLite's one connection, run synchronously (see ResourceSql): `run` answers rows as objects (none for a
 * write), `raw` a read's rows as arrays (better-sqlite3's `.raw()`) with where each column is. Either answers
 * undefined where it may not run (see `direct`).
 */
export interface SqliteDirect {
  run(text: string, parameters: readonly unknown[], outside?: boolean): unknown[] | undefined;
  raw(text: string, parameters: readonly unknown[], outside?: boolean): { rows: unknown[][]; at: ColumnAt } | undefined;
}

/**
 * What every module of the `resources` family shares: running a compiled shape (directly on SQLite's
 * connection when it may), and the SQL fragments where the two engines differ (lists as one parameter,
 * LIKE with its escape, JSON body fields, paging). One instance per store.
 */
export class ResourceSql {
  private readonly shapes = new Shapes();

  /**
   * `direct` runs a statement on SQLite's one connection synchronously. A transaction holds that
   * connection until it ends, so inside one a compiled shape can skip Kysely's executor (its connection
   * hand-off and promises cost more than the statement) with the same result. Outside one (`outside`), it
   * runs only a read, and only while no transaction is open on the connection (else it answers undefined):
   * a read that runs to its end synchronously, between transactions, sees what is committed, as through
   * Kysely.
   */
  constructor(
    readonly dialect: Dialect,
    private readonly direct?: SqliteDirect,
  ) {}

  /** Runs a compiled shape: directly on SQLite when it may (see `direct`), through Kysely otherwise. */
  async exec<R>(db: Db | Tx, compiled: CompiledQuery): Promise<R[]> {
    const rows = this.direct?.run(compiled.sql, compiled.parameters, !db.isTransaction);
    if (rows) return rows as R[];
    return (await db.executeQuery<R>(compiled)).rows;
  }

  /** `exec` for rows read in bulk: arrays where `direct` runs the statement (no object per row), objects otherwise. */
  async execRows<R extends object>(db: Db | Tx, compiled: CompiledQuery): Promise<ReadRows<R>> {
    const raw = this.direct?.raw(compiled.sql, compiled.parameters, !db.isTransaction);
    if (raw) return new ReadRows<R>(raw.rows, raw.at);
    return new ReadRows<R>((await db.executeQuery<R>(compiled)).rows);
  }

  /** `run` with its rows as `execRows` reads them. */
  async runRows<R extends object, K extends string>(
    key: string | undefined,
    db: Db | Tx,
    build: (arg: ArgOf<K>) => AnyQuery,
    args: Record<K, unknown>,
  ): Promise<ReadRows<R>> {
    if (key) return this.execRows<R>(db, this.shapes.get(key, build, args));
    return new ReadRows<R>((await build(((name: K) => args[name]) as ArgOf<K>).execute()) as R[]);
  }

  /** `shaped` with its rows as `execRows` reads them. */
  async shapedRows<R extends object, K extends string>(
    db: Db | Tx,
    key: string,
    build: (arg: ArgOf<K>) => Compilable,
    args: Record<K, unknown>,
  ): Promise<ReadRows<R>> {
    return this.execRows<R>(db, this.shapes.get(key, build, args));
  }

  /**
   * Runs the query shape `key` (compiled on first use, see shapes.ts) with `args`. A list of values goes in
   * as one argument through `inList` and `listArg`, so its length does not change the shape.
   */
  async shaped<R, K extends string>(db: Db | Tx, key: string, build: (arg: ArgOf<K>) => Compilable, args: Record<K, unknown>): Promise<R[]> {
    return this.exec<R>(db, this.shapes.get(key, build, args));
  }

  /** Runs a query compiled once when it has a shape key, built afresh otherwise (a filtered list is one of a kind). */
  async run<R, K extends string>(key: string | undefined, db: Db | Tx, build: (arg: ArgOf<K>) => AnyQuery, args: Record<K, unknown>): Promise<R[]> {
    if (key) return this.shaped<R, K>(db, key, build, args);
    return (await build(((name: K) => args[name]) as ArgOf<K>).execute()) as R[];
  }

  /** `column IN (the list argument)`, as one parameter whatever the list's length. */
  inList(column: string, arg: unknown): RawBuilder<SqlBool> {
    return this.dialect === 'postgres'
      ? sql<SqlBool>`${sql.ref(column)} = any(${arg})`
      : sql<SqlBool>`${sql.ref(column)} in (select value from json_each(${arg}))`;
  }

  /** A list as the one parameter `inList` takes: an array for PostgreSQL, JSON text for SQLite's json_each. */
  listArg(values: readonly unknown[]): unknown {
    return this.dialect === 'postgres' ? [...values] : JSON.stringify(values);
  }

  /** The case-insensitive LIKE operator of this engine. */
  get ilike(): 'ilike' | 'like' {
    return this.dialect === 'postgres' ? 'ilike' : 'like';
  }

  /**
   * `column LIKE pattern` where `%`, `_` and `\` in `literal` match themselves: SQLite has no default
   * escape character, so the ESCAPE clause is spelled out for both engines.
   */
  like(column: string, literal: string, opts: { prefix?: boolean; contains?: boolean; caseInsensitive?: boolean } = {}) {
    const escaped = literal.replace(/[\\%_]/g, (c) => `\\${c}`);
    const pattern = opts.contains ? `%${escaped}%` : opts.prefix ? `${escaped}%` : escaped;
    const op = sql.raw(opts.caseInsensitive ? this.ilike : 'like');
    return sql<boolean>`${sql.ref(column)} ${op} ${pattern} escape '\\'`;
  }

  /** A string field of the JSON body, in the engine's own JSON functions. */
  bodyText(key: string, column = 'resources.body'): RawBuilder<string> {
    return this.dialect === 'postgres'
      ? sql<string>`(${sql.ref(column)}::jsonb ->> ${sql.lit(key)})`
      : sql<string>`json_extract(${sql.ref(column)}, ${sql.lit(`$.${key}`)})`;
  }

  /** The body's string field `key` is one of `values`. */
  bodyTextIn(key: string, values: readonly string[]): RawBuilder<boolean> {
    return sql<boolean>`${this.bodyText(key)} in (${sql.join([...values])})`;
  }

  /** The body's list field `key` contains one of `values`. */
  bodyListHasAny(key: string, values: string[], column = 'resources.body'): RawBuilder<boolean> {
    return this.dialect === 'postgres'
      ? sql<boolean>`exists (select 1 from jsonb_array_elements_text(${sql.ref(column)}::jsonb -> ${sql.lit(key)}) as c(value) where c.value in (${sql.join(values)}))`
      : sql<boolean>`exists (select 1 from json_each(${sql.ref(column)}, ${sql.lit(`$.${key}`)}) as c where c.value in (${sql.join(values)}))`;
  }

  /**
   * The row is listed in the body list `key` of one of the `kind` objects `of` (the snapshots of some
   * drives): an index lookup of those objects, then of the uuids they list, never a scan of the kind.
   */
  listedIn(kind: string, key: string, of: readonly string[], column = 'resources.uuid'): RawBuilder<boolean> {
    const parents = sql`select p.body from resources p where p.kind = ${kind} and p.uuid in (${sql.join([...of])})`;
    return this.dialect === 'postgres'
      ? sql<boolean>`${sql.ref(column)} in (select l.value from (${parents}) as b cross join jsonb_array_elements_text(b.body::jsonb -> ${sql.lit(key)}) as l(value))`
      : sql<boolean>`${sql.ref(column)} in (select l.value from (${parents}) as b, json_each(b.body, ${sql.lit(`$.${key}`)}) as l)`;
  }

  /** LIMIT/OFFSET with the API's meaning (limit 0 = all), see paging.ts. */
  page<Q extends { limit(n: number): Q; offset(n: number): Q }>(q: Q, limit: number, offset: number): Q {
    return page(q, limit, offset, this.dialect);
  }

  /** The same rule in a shape (see pageShape): argument markers for the LIMIT/OFFSET the page has. */
  pageArgs<Q extends AnyQuery, K extends string>(q: Q, arg: ArgOf<K>, limitArg: K | undefined, offsetArg: K | undefined): Q {
    return pageShape<AnyQuery>(q, limitArg && arg(limitArg), offsetArg && arg(offsetArg), this.dialect) as Q;
  }
}
