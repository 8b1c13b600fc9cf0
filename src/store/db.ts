import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresDialect, SqliteDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.js';
import { migrationProvider } from './migrations/index.js';

export type Dialect = 'sqlite' | 'postgres';
export type Db = Kysely<Database>;
export type Tx = Transaction<Database>;

/** bigint columns (serial keys, counts) come back as JS numbers, as in SQLite. */
pg.types.setTypeParser(20, (v) => Number(v));

export const isPostgresUrl = (url: string): boolean => /^postgres(ql)?:\/\//.test(url);

/**
 * The store: a Kysely handle over one of the two engines, with the few spots where they differ
 * (row locks, case-insensitive match) answered here so queries above stay engine-neutral.
 */
export class Store {
  readonly db: Db;
  readonly dialect: Dialect;
  readonly location: string;

  private constructor(db: Db, dialect: Dialect, location: string) {
    this.db = db;
    this.dialect = dialect;
    this.location = location;
  }

  /** `postgres://…` opens PostgreSQL; `:memory:` an in-memory SQLite; anything else a SQLite file (created). */
  static async open(url: string, opts: { poolSize?: number } = {}): Promise<Store> {
    let store: Store;
    if (isPostgresUrl(url)) {
      const pool = new pg.Pool({ connectionString: url, max: opts.poolSize ?? 10 });
      // Fail fast with a clear message instead of on the first request.
      const client = await pool.connect();
      client.release();
      store = new Store(new Kysely<Database>({ dialect: new PostgresDialect({ pool }) }), 'postgres', redact(url));
    } else {
      if (url !== ':memory:') mkdirSync(dirname(url), { recursive: true });
      const sqlite = new SQLite(url);
      // WAL + NORMAL: an acknowledged commit survives a process kill; readers never block the writer.
      sqlite.pragma('journal_mode = WAL');
      sqlite.pragma('synchronous = NORMAL');
      sqlite.pragma('busy_timeout = 5000');
      sqlite.pragma('foreign_keys = ON');
      store = new Store(new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) }), 'sqlite', url);
    }
    await store.migrate();
    return store;
  }

  async migrate(): Promise<void> {
    // On PostgreSQL, pin the bookkeeping tables to our own schema: Kysely otherwise finds a
    // `kysely_migration` table in any schema of the database and skips creating ours.
    const schema =
      this.dialect === 'postgres'
        ? (await sql<{ s: string }>`select current_schema() as s`.execute(this.db)).rows[0]?.s
        : undefined;
    const migrator = new Migrator({ db: this.db, provider: migrationProvider(this.dialect), migrationTableSchema: schema });
    const { error, results } = await migrator.migrateToLatest();
    if (error) {
      const failed = results?.find((r) => r.status === 'Error')?.migrationName;
      throw new Error(`database migration ${failed ?? ''} failed: ${(error as Error).message ?? error}`);
    }
  }

  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(fn);
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

  /** One page of a list query on this engine: see `page` below (limit 0 = all rows after `offset`). */
  page<Q extends Pageable<Q>>(query: Q, limit: number, offset: number): Q {
    return page(query, limit, offset, this.dialect);
  }

  async ping(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }

  async close(): Promise<void> {
    await this.db.destroy();
  }
}

/** A query that can be paged (any Kysely select builder). */
interface Pageable<Q> {
  limit(n: number): Q;
  offset(n: number): Q;
}

/**
 * One page of a list query: `limit` rows (0 = all of them) after skipping `offset`. SQLite has no OFFSET
 * without a LIMIT, so "all rows after n" is `LIMIT -1 OFFSET n` there (a negative limit means no limit);
 * PostgreSQL takes a plain OFFSET.
 */
export function page<Q extends Pageable<Q>>(query: Q, limit: number, offset: number, dialect: Dialect): Q {
  let q = query;
  if (limit > 0) q = q.limit(limit);
  else if (offset > 0 && dialect === 'sqlite') q = q.limit(-1);
  if (offset > 0) q = q.offset(offset);
  return q;
}

/**
 * Kysely prepares every query afresh; on SQLite preparing costs more than running a small indexed
 * query. Queries are built from a fixed set of shapes, so their SQL texts repeat: keep the prepared
 * statements (bounded, least recently used out). Reuse is safe because better-sqlite3 runs each
 * statement synchronously to completion.
 */
function withStatementCache(db: SQLite.Database, max = 500) {
  const cache = new Map<string, SQLite.Statement>();
  return {
    close: () => db.close(),
    prepare(text: string) {
      let stmt = cache.get(text);
      if (stmt) {
        cache.delete(text);
      } else {
        stmt = db.prepare(text);
        if (cache.size >= max) cache.delete(cache.keys().next().value!);
      }
      cache.set(text, stmt);
      return stmt;
    },
  };
}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}
