import { existsSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import SQLite from 'better-sqlite3';
import {
  CompiledQuery,
  Kysely,
  SqliteDialect,
  SqliteQueryCompiler,
  ValueNode,
  sql,
  type Driver,
  type LimitNode,
  type Migrator,
  type QueryCompiler,
  type SqliteDialectConfig,
  type Transaction,
} from 'kysely';
import type Pg from 'pg';
import { lazyPackage } from '../core/lazy.js';
import { byCodePoint } from '../core/order.js';
import type { Database } from './schema.js';
import { answerChannel, ChangeFeed, relayedChanges, schemaChannel, type Change } from './changes.js';
import { AnswerBarrier, notifications } from './answer-barrier.js';
import { pgScopedTokens, sqliteScopedTokens, type ScopedAnswerTokens } from './answer-scopes.js';
import { ListenConnection } from './listen.js';
import type { WakeSource } from './wakes.js';
import { migrationProvider, migratorOf } from './migrations/index.js';
import { newSchemaBatch, NOT_NEW } from './migrations/at-once.js';

let addon: string | undefined | null = null;
/**
 * better-sqlite3's native addon by its path, where its build puts it: without one the package finds it
 * through `bindings`, which tries a dozen paths (~10 ms of CPU at every start). Elsewhere (undefined) the
 * package's own search.
 */
function sqliteAddon(): string | undefined {
  if (addon === null) {
    const path = join(dirname(createRequire(import.meta.url).resolve('better-sqlite3')), '../build/Release/better_sqlite3.node');
    addon = existsSync(path) ? path : undefined;
  }
  return addon;
}
import { databaseOpenError } from './errors.js';
import { ConfigError } from '../core/errors.js';
import { ResourceRepository, type AnyQuery } from './repository.js';
import type { SqliteDirect } from './resources/sql.js';
import type { ColumnAt } from './resources/model.js';
import { pipelinedClients, Riders, type PipelineMode } from './pg-client.js';
import { VersionedCache } from './object-cache.js';
import { StatementCache } from './statement-cache.js';
import { markSnapshot } from './snapshots.js';
import { StateQueries } from './state.js';
import { AuditQueries, EventQueries } from './audit.js';
import { lockRows } from './locks.js';
import { SchemaPostgresDialect } from './pg-dialect.js';
import { NotificationQueries } from './notifications/index.js';
import { BillingQueries } from './billing/index.js';
import { TablePages } from './table-pages.js';
import { AccountQueries } from './accounts/index.js';
import { LimitQueries } from './limits/index.js';
import { SettingQueries } from './settings.js';
import { OperatorReads } from './operator.js';
import { DataQueries } from './data/index.js';
import { GroupCommit } from './group-commit.js';

/** The advisory-lock key (with the schema name's hash) that serialises migrations of one schema: 'STMG'. */
const MIGRATION_LOCK = 1398033735;

/**
 * PostgreSQL (`pgUrl` given): one migration at a time in the URL's schema. Kysely's migrator lists the
 * schema's tables and columns (SchemaPostgresDialect's introspector) before it takes its own lock, and that
 * listing fails ("column … of relation … does not exist") when another process migrates the same schema
 * meanwhile (two processes of one deployment starting together). Other schemas' migrations go on side by
 * side. Held on a connection of its own, outside the pool, so a pool of one still has its connection for
 * the migrator.
 */
export async function migrationsAlone<T>(pgUrl: string | null, fn: () => Promise<T>): Promise<T> {
  if (!pgUrl) return fn();
  const { Client } = loadPg();
  const lock = new Client({ connectionString: pgUrl });
  await lock.connect();
  try {
    await lock.query('select pg_advisory_lock($1, hashtext(current_schema()))', [MIGRATION_LOCK]);
    return await fn();
  } finally {
    await lock.end().catch(() => undefined); // ending the session releases the lock
  }
}

/** The database's time in epoch ms (announce_pending's ages: one clock for every host). */
const DB_NOW_MS = sql<number>`(extract(epoch from clock_timestamp()) * 1000)::bigint`;

/** Presented objects kept per store, in MiB (the `cache-mib` setting). */
export const DEFAULT_CACHE_MIB = 32;
/**
 * `change_relay` rows kept behind the newest one read (several workers on SQLite): a worker further behind
 * than this misses changes (its sockets' clients re-read). Pruned every RELAY_PRUNE_EVERY rows.
 */
const RELAY_KEPT = 20_000;
const RELAY_PRUNE_EVERY = 1_000;

/** SQLite prepared statements kept (`--statement-cache`). */
export const DEFAULT_STATEMENT_CACHE = 500;

export type Dialect = 'sqlite' | 'postgres';
export type Db = Kysely<Database>;
export type Tx = Transaction<Database>;

/**
 * pg, loaded when a PostgreSQL URL is first opened (core/lazy.ts). bigint columns (serial keys, counts)
 * come back as JS numbers, as in SQLite.
 */
export const loadPg = lazyPackage<typeof Pg>('pg', (pg) => pg.types.setTypeParser(20, (v) => Number(v)));

export const isPostgresUrl = (url: string): boolean => /^postgres(ql)?:\/\//.test(url);

/**
 * The store: a Kysely handle over one of the two engines, with the few spots where they differ
 * (row locks, case-insensitive match) answered here so queries above stay engine-neutral.
 */
export class Store {
  readonly db: Db;
  readonly dialect: Dialect;
  readonly location: string;
  /** SQL on the shared `resources` table, and the engines' differences for it. */
  readonly resources: ResourceRepository;
  /** The audit log's writes, and the event outbox's (store/audit.ts). */
  readonly audit: AuditQueries;
  readonly events: EventQueries;
  /** SQL of notifications: fan-out, deliveries, feed, preferences (store/notifications/). */
  readonly notifications: NotificationQueries;
  /** SQL of accounts: users and profiles, sessions, login guard, one-time links, Digest nonces (store/accounts/). */
  readonly accounts: AccountQueries;
  /** SQL of accounts' rate-limit overrides (store/limits/; the request counters are store/limits/counters.ts). */
  readonly limits = new LimitQueries();
  /** The deployment's own values: Digest secret, shared clock offset, demo login (store/settings.ts). */
  readonly settings: SettingQueries;
  /** The operator plane's reads across accounts' objects: metrics, seeding (store/operator.ts). */
  readonly operator = new OperatorReads();
  /** SQL of drive data: content-addressed blocks, the block maps of drives and snapshots, upload chunks (store/data/). */
  readonly data = new DataQueries();
  /** SQL of billing: balances and the ledger, burst levels, usage records, subscriptions (store/billing/). */
  readonly billing: BillingQueries;
  /** SQL of whole-deployment and whole-account state: reset, export, import (store/tables.ts drives it). */
  readonly state: StateQueries;
  /** Pages of kinds over their own tables (ledger, audit log, ...), described as data (core/table-kind.ts). */
  readonly tablePages: TablePages;
  /** Objects presented from this store's rows, by (kind/uuid, version); bounded by half of `cacheMiB`. */
  readonly presented: VersionedCache<Record<string, unknown>>;
  /**
   * Objects as served (JSON text), by (kind/uuid, the form and the viewer's side) and (row version,
   * relations as read): core/stored.ts `fragments`. Bounded by the other half of `cacheMiB`.
   */
  readonly fragments: VersionedCache<string, string>;
  /** Committed changes of users' objects for the live event stream (store/changes.ts); off until a listener asks. */
  readonly changes: ChangeFeed;
  /** SQLite's kept prepared statements (`--statement-cache`); null on PostgreSQL (its own per-connection statements). */
  preparedStatements: StatementCache<unknown> | null = null;
  /**
   * PostgreSQL: statements that travel with the next one the pool waits for outside a transaction, costing no
   * round trip of their own (pg-client.ts; the rate limiter's counts). Null on SQLite.
   */
  riders: Riders | null = null;
  /** PostgreSQL's connection pool (metrics read its counts); null on SQLite (one connection). */
  private pgPool: Pg.Pool | null = null;
  private pgUrl: string | null = null;
  private pgSchema: string | null = null;
  /** PostgreSQL's answer token, once enableAnswerReuse opened it. */
  private barrier: AnswerBarrier | null = null;
  get answerBarrier(): AnswerBarrier | null {
    return this.barrier;
  }
  /** Wake-ups of background loops (store/wakes.ts): PostgreSQL once enableAnswerReuse listens; null: poll. */
  get wakes(): WakeSource | null {
    return this.barrier?.wakes ?? null;
  }
  /**
   * Connections of the pool: open, idle, and requests waiting for one. Null on SQLite. pg-pool queues a
   * request even while a connection is idle and hands it over on the next tick, so its `waitingCount` counted
   * the metrics' own queries, started in the same collection, as waiting (1 at rest): requests up to the
   * number of idle connections are served at once, and only the rest wait.
   */
  poolStats(): { total: number; idle: number; waiting: number } | null {
    const p = this.pgPool;
    return p ? { total: p.totalCount, idle: Math.max(0, p.idleCount - p.waitingCount), waiting: Math.max(0, p.waitingCount - p.idleCount) } : null;
  }
  /** The migrations opening it applied (`schema: 'migrate'`); none when the schema was current. */
  migrated: string[] = [];
  /**
   * A token that changes whenever committed data may have changed, or undefined where none is available.
   * Two equal tokens mean no row changed in between, so an answer read after the first is still the
   * answer (http/answer-cache.ts).
   * - SQLite (one connection per process): the rows this connection changed (`total_changes()`, raised by
   *   every insert, update and delete, before its commit) and `data_version` (raised by every commit of
   *   another connection: an operator command, another process on the file). Exact at every read.
   * - PostgreSQL: a generation raised by every write's announcement (store/answer-barrier.ts), once
   *   enableAnswerReuse opened it. Exact after `settleAnswers()`; a token read before an answer's rows
   *   were read is never newer than them, so an answer made afresh may be kept under it.
   */
  answerToken: () => string | undefined = () => undefined;
  /**
   * The token made exact for everything committed before the call (undefined: it cannot tell, reuse
   * nothing). Calls made in the same turn of the event loop share one read (SQLite) or one barrier
   * (PostgreSQL), taken after all of them were made.
   */
  settleAnswers: () => Promise<string | undefined> = async () => undefined;
  /**
   * Tokens of answers made of a caller's visible owners' objects only (store/answer-scopes.ts): they move
   * with those owners' writes, not with every write. Null where none are available (PostgreSQL until
   * enableAnswerReuse).
   */
  scopedAnswers: ScopedAnswerTokens | null = null;

  /**
   * Opens what answerToken needs: nothing on SQLite; on PostgreSQL a LISTEN connection on the schema's
   * answer channel (store/answer-barrier.ts). Only a serving process calls it.
   */
  async enableAnswerReuse(): Promise<void> {
    if (this.dialect !== 'postgres' || this.barrier || !this.pgUrl) return;
    const barrier = (this.barrier = await AnswerBarrier.open(loadPg(), this.pgUrl, answerChannel(this.pgSchema ?? 'public')));
    await this.drainAnnouncements();
    this.answerToken = () => barrier.token();
    this.settleAnswers = async () => ((await barrier.settle()) ? barrier.token() : undefined);
    this.scopedAnswers = pgScopedTokens(this.db, barrier);
  }
  /** Statements run since the store opened (the bench prints statements per request). */
  get statements(): number {
    return this.counter.n;
  }
  /**
   * Statements the store waited for since it opened: on PostgreSQL the round trips (statements sent ahead,
   * store/pg-client.ts, travel with the next one); on SQLite every statement is a call of its own.
   */
  get roundTrips(): number {
    return this.pgRoundTrips?.n ?? this.counter.n;
  }
  private pgRoundTrips: { n: number } | null = null;
  /** PostgreSQL: whether the pool's clients send the migrations' statements ahead (pg-client.ts). */
  private pipeline: PipelineMode | null = null;

  private constructor(
    db: Db,
    dialect: Dialect,
    location: string,
    private readonly counter: { n: number },
    cacheMiB: number,
    direct?: SqliteDirect,
    anchorStep?: number,
  ) {
    // One budget for both forms of a presented object: each cache had the whole of it, so `--cache-mib 32`
    // held 64 MiB (and the V8 heap grew to about twice what it retains).
    this.presented = new VersionedCache((cacheMiB * 1024 * 1024) / 2);
    this.fragments = new VersionedCache((cacheMiB * 1024 * 1024) / 2);
    this.db = db;
    this.dialect = dialect;
    this.location = location;
    this.changes = new ChangeFeed(dialect);
    this.resources = new ResourceRepository(dialect, direct, anchorStep, this.changes);
    this.audit = new AuditQueries(this.resources);
    this.events = new EventQueries(this.resources);
    this.notifications = new NotificationQueries(dialect);
    this.accounts = new AccountQueries(dialect);
    this.settings = new SettingQueries(dialect);
    this.billing = new BillingQueries(dialect);
    this.state = new StateQueries(dialect);
    this.tablePages = new TablePages(this.resources);
  }

  /**
   * `postgres://…` opens PostgreSQL; `:memory:` an in-memory SQLite; anything else a SQLite file.
   * `schema: 'migrate'` (the default: `serve`, `stratus migrate`, tests) creates the schema or upgrades it
   * to this version's; `'check'` (operator commands) changes nothing: a missing file, an empty or older
   * schema is a ConfigError that says to run `stratus migrate`. A schema of a newer Stratus is refused either
   * way. A database that cannot be opened (unreachable, missing, refused, not a SQLite file, not writable)
   * is a ConfigError naming the setting (store/errors.ts), with whatever was opened closed again.
   */
  static async open(
    url: string,
    opts: {
      poolSize?: number;
      cacheMiB?: number;
      statementCache?: number;
      anchorStep?: number;
      connectTimeoutMs?: number;
      schema?: 'migrate' | 'check';
      /** PostgreSQL: a new schema made by its script in one round trip (default), or one migration at a time. */
      newSchemaAtOnce?: boolean;
    } = {},
  ): Promise<Store> {
    let store: Store | undefined;
    const cleanup: (() => unknown)[] = [];
    const check = opts.schema === 'check';
    try {
      if (check && !isPostgresUrl(url) && (url === ':memory:' || !existsSync(url)))
        throw new ConfigError(
          url === ':memory:'
            ? 'db: an in-memory database belongs to the one process that made it: give this command the --db of the running server (a file or postgres://)'
            : `db: there is no database at ${url}: run \`stratus migrate --db ${url}\` (or start \`stratus serve\`) to create it, or fix --db`,
        );
      store = isPostgresUrl(url)
        ? await Store.openPostgres(url, { ...opts, createSchema: !check }, cleanup)
        : Store.openSqlite(url, { ...opts, mustExist: check }, cleanup);
      const status = await store.schemaStatus();
      if (status.unknown.length)
        throw new ConfigError(
          `db: ${store.location} was upgraded by a newer Stratus (schema ${status.unknown.at(-1)}; this one knows up to ${status.known.at(-1)}): run that version, or restore a backup`,
        );
      if (!check) store.migrated = await store.migrate(status.applied.length === 0, opts.newSchemaAtOnce ?? true);
      else if (status.applied.length === 0)
        throw new ConfigError(
          `db: ${store.location} has no Stratus schema: run \`stratus migrate --db …\` (or start \`stratus serve\`) to create it, or fix --db`,
        );
      else if (status.pending.length)
        throw new ConfigError(
          `db: ${store.location} has an older Stratus schema (${status.applied.at(-1)}; this version needs ${status.known.at(-1)}): run \`stratus migrate --db …\` (or start \`stratus serve\`) to upgrade it`,
        );
      return store;
    } catch (err) {
      await Promise.allSettled(store ? [store.close()] : cleanup.map(async (fn) => fn()));
      throw databaseOpenError(url, err) ?? err;
    }
  }

  private static async openPostgres(
    url: string,
    opts: { poolSize?: number; cacheMiB?: number; anchorStep?: number; connectTimeoutMs?: number; createSchema?: boolean },
    cleanup: (() => unknown)[],
  ): Promise<Store> {
    // Kysely calls `log` after every statement; counting is all it does here.
    const counter = { n: 0 };
    const log = () => void counter.n++;
    const roundTrips = { n: 0 };
    const pipeline: PipelineMode = { migrating: false };
    const { Pool } = loadPg();
    // Pipeline mode: statements are written without waiting for the one before (store/pg-client.ts).
    const pool = new Pool({ connectionString: url, max: opts.poolSize ?? 10, pipeline: true });
    cleanup.push(() => pool.end());
    // An idle client that loses its server (PostgreSQL restarted) must not crash the process: the pool drops it.
    pool.on('error', () => undefined);
    // The named statements are the compiled shapes (index lookups whose best plan does not depend on the
    // values): planned once per connection. Left to choose, PostgreSQL re-plans the larger ones (a single
    // GET with its relations) on every run: measured 1.2 ms of planning against 0.03 ms of execution.
    // Unnamed statements (one-off SQL) are planned for their values as before.
    // No JIT either: a plan made for any caller costs its per-row subqueries (a tag's members) from
    // averages, and once the total passes jit_above_cost every run compiles: a page of 20 tags with a member
    // each, beside an account of 100k tagged servers, took 20 ms of JIT for 0.35 ms of execution. Stratus's
    // statements are small indexed reads that JIT never pays back.
    pool.on('connect', (c) => void c.query('set plan_cache_mode = force_generic_plan; set jit = off').catch(() => undefined));
    // Fail fast with a clear message instead of on the first request; a host that never answers is given
    // up on after connectTimeoutMs (the pool's own timeout would also cut requests queueing for a client).
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(Object.assign(new Error('no answer'), { code: 'CONNECT_TIMEOUT' })), opts.connectTimeoutMs ?? 10_000);
      timer.unref();
    });
    try {
      const client = await Promise.race([pool.connect(), timeout]);
      try {
        // A search_path naming a schema that does not exist yet (a location's own, core/locations.ts): made here.
        if (opts.createSchema) {
          const { rows } = await client.query<{ s: string | null; p: string }>(`select current_schema() as s, current_setting('search_path') as p`);
          const first = rows[0]?.p
            .split(',')[0]
            .trim()
            .replace(/^"(.*)"$/, '$1');
          if (rows[0] && rows[0].s === null && first && /^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(first))
            await client.query(`create schema if not exists "${first}"`);
        }
      } finally {
        client.release();
      }
    } finally {
      clearTimeout(timer);
    }
    const riders = new Riders(counter);
    const store = new Store(
      new Kysely<Database>({ dialect: new SchemaPostgresDialect({ pool: pipelinedClients(pool, roundTrips, pipeline, riders) }), log }),
      'postgres',
      redact(url),
      counter,
      opts.cacheMiB ?? DEFAULT_CACHE_MIB,
      undefined,
      opts.anchorStep,
    );
    store.pgPool = pool;
    store.riders = riders;
    store.pgRoundTrips = roundTrips;
    store.pipeline = pipeline;
    store.pgUrl = url;
    store.pgSchema = (await sql<{ s: string }>`select current_schema() as s`.execute(store.db)).rows[0]?.s ?? 'public';
    store.changes.channel = schemaChannel(store.pgSchema);
    return store;
  }

  private static openSqlite(
    url: string,
    opts: { cacheMiB?: number; statementCache?: number; anchorStep?: number; mustExist?: boolean },
    cleanup: (() => unknown)[],
  ): Store {
    const counter = { n: 0 };
    const log = () => void counter.n++;
    if (url !== ':memory:' && !opts.mustExist) mkdirSync(dirname(url), { recursive: true });
    const sqlite = new SQLite(url, { fileMustExist: opts.mustExist ?? false, nativeBinding: sqliteAddon() });
    cleanup.push(() => sqlite.close());
    // WAL + NORMAL: an acknowledged commit survives a process kill; readers never block the writer.
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    sqlite.pragma('foreign_keys = ON');
    // Temporary files in memory: above all the savepoint journal of group commit (store/group-commit.ts), which
    // otherwise spills past 64 KiB into a file in /var/tmp written page by page (2 system calls a page).
    sqlite.pragma('temp_store = MEMORY');
    const cache = new StatementCache((text) => sqlite.prepare(text), opts.statementCache ?? DEFAULT_STATEMENT_CACHE);
    const statements = { close: () => sqlite.close(), prepare: (text: string) => cache.prepare(text) };
    const yielding = { on: false };

    // Two statements, not `select total_changes(), data_version from pragma_data_version`: the table-valued
    // form costs 6.5 µs a call, these 2.9 µs together (measured with better-sqlite3, 200k calls).
    const dataVersion = sqlite.prepare('pragma data_version').pluck();
    const totalChanges = sqlite.prepare('select total_changes()').pluck();
    // Where each column of a kept statement is, for its rows read as arrays (asked of the statement once).
    const columnsAt = new WeakMap<SQLite.Statement, ColumnAt>();
    const direct: SqliteDirect = {
      run(text, parameters, outside = false) {
        const stmt = statements.prepare(text);
        if (outside && (!stmt.reader || sqlite.inTransaction)) return undefined;
        counter.n++;
        if (stmt.reader) return stmt.all(parameters) as unknown[];
        stmt.run(parameters);
        return [];
      },
      raw(text, parameters, outside = false) {
        const stmt = statements.prepare(text);
        if (!stmt.reader || (outside && sqlite.inTransaction)) return undefined;
        counter.n++;
        let at = columnsAt.get(stmt);
        if (!at) columnsAt.set(stmt, (at = Object.fromEntries(stmt.columns().map((c, i) => [c.name, i]))));
        // Kysely runs the same kept statements and reads objects: the mode is the statement's, so it is set back.
        stmt.raw(true);
        try {
          return { rows: stmt.all(parameters) as unknown[][], at };
        } finally {
          stmt.raw(false);
        }
      },
    };
    const store = new Store(
      new Kysely<Database>({ dialect: new SqliteImmediateWrites({ database: statements }, sqlite, yielding), log }),
      'sqlite',
      url,
      counter,
      opts.cacheMiB ?? DEFAULT_CACHE_MIB,
      direct,
      opts.anchorStep,
    );
    store.preparedStatements = cache;
    store.answerToken = () => {
      counter.n += 2;
      return `${totalChanges.get() as number}:${dataVersion.get() as number}`;
    };
    store.settleAnswers = sharedPerTurn(() => (sqlite.open ? store.answerToken() : undefined));
    store.otherCommits = () => (sqlite.open ? (dataVersion.get() as number) : -1);
    store.yielding = yielding;
    // A write's savepoint statements, counted like BEGIN and COMMIT (which Kysely's log counts).
    const [savepoint, release, rollback] = ['savepoint stratus_write', 'release stratus_write', 'rollback to stratus_write'].map((text) => {
      const stmt = sqlite.prepare(text);
      return () => {
        counter.n++;
        stmt.run();
      };
    });
    store.group = new GroupCommit(store.db, sqlite, { begin: savepoint, release, rollback });
    store.scopedAnswers = sqliteScopedTokens(sqlite, store.answerToken, store.settleAnswers, counter);
    return store;
  }

  /**
   * Creates or upgrades the schema; returns the names of the migrations it applied (none: it was current).
   * `fresh`: the schema had no migrations when last looked at (PostgreSQL then tries the new-schema script
   * first, unless `atOnce` is false: the test comparing both paths).
   */
  async migrate(fresh = false, atOnce = true): Promise<string[]> {
    let early: string[] = [];
    const { error, results } = await migrationsAlone(this.dialect === 'postgres' ? this.pgUrl : null, async () => {
      if (fresh && atOnce && this.dialect === 'postgres') {
        early = (await this.newSchemaAtOnce()) ?? [];
        // Migrations newer than the script run one by one below; none left: Kysely is not asked at all.
        if (early.length && early.length === Object.keys(await migrationProvider(this.dialect).getMigrations()).length) return { results: [] };
      }
      const migrator = await this.migrator();
      if (this.pipeline) this.pipeline.migrating = true;
      try {
        return await migrator.migrateToLatest();
      } finally {
        if (this.pipeline) this.pipeline.migrating = false;
      }
    });
    if (error) {
      const failed = results?.find((r) => r.status === 'Error')?.migrationName;
      // The engine's code (a permission, a full disk) stays on the error, for databaseOpenError.
      throw Object.assign(new Error(`database migration ${failed ?? ''} failed: ${(error as Error).message ?? error}`), {
        code: (error as { code?: unknown }).code,
      });
    }
    return [...early, ...(results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName)];
  }

  /**
   * Where the schema stands, read without changing anything: the migrations this version knows (in
   * order), those the database has, those it lacks, and those it has that this version does not know (it
   * was upgraded by a newer Stratus).
   */
  async schemaStatus(): Promise<{ known: string[]; applied: string[]; pending: string[]; unknown: string[] }> {
    const known = Object.keys(await migrationProvider(this.dialect).getMigrations()).sort(byCodePoint);
    let applied: string[] = [];
    try {
      // The bookkeeping table of this connection's schema (search_path on PostgreSQL), as migrate() pins it.
      applied = (await sql<{ name: string }>`select name from kysely_migration`.execute(this.db)).rows.map((r) => r.name).sort(byCodePoint);
    } catch (err) {
      // No such table: nothing was ever migrated here.
      if (!/no such table|does not exist/.test((err as Error).message)) throw err;
    }
    const has = new Set(applied);
    const knows = new Set(known);
    return { known, applied, pending: known.filter((n) => !has.has(n)), unknown: applied.filter((n) => !knows.has(n)) };
  }

  private async migrator(): Promise<Migrator> {
    const schema = this.dialect === 'postgres' ? (await sql<{ s: string }>`select current_schema() as s`.execute(this.db)).rows[0]?.s : undefined;
    return migratorOf(this.db, this.dialect, schema);
  }

  /**
   * PostgreSQL, a schema without migrations: the migrations known to the new-schema script
   * (migrations/at-once.ts) applied in one round trip, or null when the schema turned out not to be new
   * (another process migrated it first, or an earlier attempt left its bookkeeping table).
   */
  private async newSchemaAtOnce(): Promise<string[] | null> {
    const schema = this.pgSchema;
    if (!schema || !this.pgUrl) return null;
    const known = Object.keys(await migrationProvider(this.dialect).getMigrations()).sort(byCodePoint);
    const batch = newSchemaBatch(schema, { answers: answerChannel(schema), changes: schemaChannel(schema) }, known, new Date().toISOString());
    if (!batch) return null;
    try {
      await sql.raw(batch.sql).execute(this.db);
    } catch (err) {
      if ((err as { code?: unknown }).code === NOT_NEW) return null;
      throw Object.assign(new Error(`database migration (new schema at once, through ${batch.through.at(-1)}) failed: ${(err as Error).message}`), {
        code: (err as { code?: unknown }).code,
      });
    }
    return [...batch.through];
  }

  /** A read-write transaction; the repository's kept counts are written last, just before commit. */
  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    if (this.barrier) return this.announcedAfter(this.barrier, fn);
    if (this.group) {
      // SQLite: in a savepoint of a transaction shared with the writes that arrived together (store/group-commit.ts).
      const { out, changed } = await this.group.run(async (tx) => {
        const out = await fn(tx);
        await this.resources.flushCounts(tx);
        return { out, changed: await this.changes.flush(tx) };
      });
      this.changes.committed(changed);
      return out;
    }
    let changed: Change[] | undefined;
    const result = await this.db.transaction().execute(async (tx) => {
      const out = await fn(tx);
      await this.resources.flushCounts(tx);
      changed = await this.changes.flush(tx);
      return out;
    });
    this.changes.committed(changed);
    return result;
  }

  /**
   * A serving process's transaction on PostgreSQL: its write announcements (answer payloads, migration
   * 0120; event stream changes) are NOTIFYed after the commit, not in it. A NOTIFYing commit holds a lock
   * for the whole database through its WAL flush, so such commits take turns: 8 writers spent 3.6–4.0 of
   * themselves waiting on it. The announcements still leave before the caller answers (the barrier of a
   * request that follows hears them), and only when the transaction committed.
   */
  private async announcedAfter<T>(barrier: AnswerBarrier, fn: (tx: Tx) => Promise<T>): Promise<T> {
    let changed: Change[] | undefined;
    let kept: Promise<{ rows: { id: number; a: string }[] }> | undefined;
    const result = await this.db.transaction().execute(async (tx) => {
      await sql`/* shape announce.later */ select set_config('stratus.announce_later', 'on', true)`.execute(tx);
      const out = await fn(tx);
      await this.resources.flushCounts(tx);
      changed = await this.changes.flush(tx, true);
      // The announcements, kept in the transaction (migration 0131) until the NOTIFY after the commit deletes
      // them: a process killed in between leaves them for the next to start (drainAnnouncements). Not waited
      // for here: it travels with the COMMIT (shapes.ts `readWithCommit`), so it costs no round trip of its
      // own while the transaction holds its locks. A failure fails the commit, which throws.
      const changes = changed?.length ? JSON.stringify(changed) : null;
      kept = sql<{ id: number; a: string }>`/* shape announce.keep */ insert into announce_pending (payloads, changes, created_ms)
        select a, ${changes}::text, ${DB_NOW_MS} from (select coalesce(current_setting('stratus.announced', true), '') as a) s
        where a <> '' or ${changes}::text is not null
        returning id, payloads as a`.execute(tx);
      kept.catch(() => undefined);
      return out;
    });
    const row = (await kept!).rows[0];
    if (row) {
      // Each payload ends with a newline ('' is a payload: "anything may have changed").
      const payloads = row.a.split('\n').slice(0, -1);
      if (!(await barrier.announce(payloads, changed, this.changes.channel, row.id))) await this.announceThroughPool(payloads, changed, row.id);
    }
    barrier.bump();
    return result;
  }

  /** The announcements of a commit when the listening connection is away: a pool connection's NOTIFY, flushed or not. */
  private async announceThroughPool(payloads: string[], changed: Change[] | undefined, kept: number): Promise<void> {
    const { channels, payloads: all } = notifications(answerChannel(this.pgSchema ?? 'public'), payloads, changed ?? [], this.changes.channel);
    await this.db.transaction().execute(async (tx) => {
      await sql`set local synchronous_commit = off`.execute(tx);
      await sql`select pg_notify(c, p) from unnest(${channels}::text[], ${all}::text[]) as t(c, p)`.execute(tx);
      await tx.deleteFrom('announce_pending').where('id', '=', kept).execute();
    });
  }

  /**
   * Sends the announcements that processes killed between a commit and its NOTIFY left (migration 0131),
   * and deletes them; those younger than `minAgeMs` may still be on their way from a live process. Every
   * serving process does it as it starts (enableAnswerReuse), so a supervisor restarting a killed worker
   * sends what it left. Returns how many transactions' announcements it sent.
   */
  async drainAnnouncements(minAgeMs = 1000): Promise<number> {
    if (this.dialect !== 'postgres') return 0;
    return this.db.transaction().execute(async (tx) => {
      const rows = await tx
        .deleteFrom('announce_pending')
        .where('created_ms', '<', sql<number>`${DB_NOW_MS} - ${minAgeMs}`)
        .returning(['payloads', 'changes'])
        .execute();
      if (!rows.length) return 0;
      const scopes = new Set<string>();
      const changes: Change[] = [];
      for (const r of rows) {
        for (const p of r.payloads.split('\n').slice(0, -1)) scopes.add(p);
        if (r.changes) changes.push(...(JSON.parse(r.changes) as Change[]));
      }
      const { channels, payloads } = notifications(answerChannel(this.pgSchema ?? 'public'), scopes, changes, this.changes.channel);
      await sql`select pg_notify(c, p) from unnest(${channels}::text[], ${payloads}::text[]) as t(c, p)`.execute(tx);
      return rows.length;
    });
  }

  private yielding: { on: boolean } | null = null;
  /** SQLite: the write transactions' group commit (store/group-commit.ts); null on PostgreSQL. */
  group: GroupCommit | null = null;

  /**
   * A serving process (SQLite): a write waiting for another process's write lock waits on the event loop,
   * so the process's other requests go on (beginYielding). An operator command keeps SQLite's busy handler.
   */
  waitForWritesOnEventLoop(): void {
    if (this.yielding) this.yielding.on = true;
  }

  /** SQLite: `data_version`, raised by every commit of another connection (an operator command's). */
  private otherCommits: (() => number) | null = null;

  /**
   * Committed changes of other processes, handed to `onChanges`; resolves to a function that ends it.
   * PostgreSQL: a dedicated connection LISTENing on this schema's change channel (every process, this one
   * included). SQLite: the changes operator commands relayed (`change_relay`, ChangeFeed.relay), read and
   * deleted whenever another connection committed, checked every `pollMs`; this process's own changes
   * come through `changes.subscribe`. What was relayed while no server ran has no listener: dropped at start.
   */
  async listenChanges(onChanges: (changes: Change[]) => void, onError: (err: Error) => void, pollMs = 100): Promise<(() => Promise<void>) | null> {
    if (this.dialect === 'sqlite') return this.pollRelayed(onChanges, onError, pollMs);
    const url = this.pgUrl;
    const channel = this.changes.channel;
    if (!url || !channel) return null;
    const listen = await ListenConnection.open(loadPg(), url, channel, {
      onNotification: (payload) => {
        if (!payload) return;
        try {
          onChanges(JSON.parse(payload) as Change[]);
        } catch (err) {
          onError(err as Error);
        }
      },
      onLost: (err) => {
        if (err) onError(err);
      },
    });
    return () => listen.close();
  }

  private async pollRelayed(onChanges: (changes: Change[]) => void, onError: (err: Error) => void, pollMs: number): Promise<() => Promise<void>> {
    const version = this.otherCommits;
    if (!version) throw new Error('pollRelayed: SQLite only');
    const origin = this.changes.origin;
    // One serving process: it takes the relayed rows (and deletes them). Several (`--workers`): each reads
    // from its own cursor, skipping its own rows, and rows far behind every cursor are pruned.
    let cursor = 0;
    const takeOwn = () =>
      this.db.transaction().execute(async (tx) => {
        const rows = await tx.selectFrom('change_relay').select(['seq', 'changes']).orderBy('seq').execute();
        if (rows.length) await tx.deleteFrom('change_relay').where('seq', '<=', rows.at(-1)!.seq).execute();
        return rows.flatMap((r) => relayedChanges(r.changes, null) ?? []);
      });
    const takeShared = async () => {
      const rows = await this.db.selectFrom('change_relay').select(['seq', 'changes']).where('seq', '>', cursor).orderBy('seq').execute();
      if (!rows.length) return [];
      cursor = Number(rows.at(-1)!.seq);
      if (cursor % RELAY_PRUNE_EVERY < rows.length)
        await this.db
          .deleteFrom('change_relay')
          .where('seq', '<=', cursor - RELAY_KEPT)
          .execute();
      return rows.flatMap((r) => relayedChanges(r.changes, origin) ?? []);
    };
    const take = origin ? takeShared : takeOwn;
    if (origin) {
      // What was relayed before this worker started is not for it.
      const last = await this.db
        .selectFrom('change_relay')
        .select((eb) => eb.fn.max('seq').as('seq'))
        .executeTakeFirst();
      cursor = Number(last?.seq ?? 0);
    } else await take();
    let seen = version();
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    let pass: Promise<void> = Promise.resolve();
    const tick = () => {
      pass = (async () => {
        const now = version();
        if (now !== seen && now !== -1) {
          seen = now;
          const changes = await take();
          if (changes.length) onChanges(changes);
        }
      })()
        .catch((err: unknown) => onError(err as Error))
        .finally(() => {
          if (!stopped) timer = setTimeout(tick, pollMs).unref();
        });
    };
    timer = setTimeout(tick, pollMs).unref();
    return async () => {
      stopped = true;
      clearTimeout(timer);
      await pass;
    };
  }

  /**
   * Several reads that must agree with each other (an object's visibility and the caller's permissions
   * on it): one snapshot (REPEATABLE READ, read only, on PostgreSQL; a transaction on SQLite's one
   * connection). `fn` must read through the handle it is given: on SQLite another handle would wait for
   * this transaction's connection forever.
   */
  snapshot<T>(fn: (db: Tx) => Promise<T>): Promise<T> {
    const marked = (tx: Tx) => {
      markSnapshot(tx);
      return fn(tx);
    };
    if (this.dialect === 'sqlite') return this.db.transaction().setAccessMode('read only').execute(marked);
    return this.db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(marked);
  }

  /**
   * A select that locks the rows it reads until the transaction ends (`FOR UPDATE`, optionally
   * `SKIP LOCKED` so concurrent workers take different rows). SQLite runs one transaction at a time on
   * its connection: the plain select is already exclusive there.
   */
  locking<Q extends AnyQuery>(q: Q, opts: { skipLocked?: boolean } = {}): Q {
    return lockRows(this.dialect, q, opts);
  }

  /**
   * A claim on `key` held until the transaction ends (commit, rollback, or the connection dying), that
   * locks no row: PostgreSQL's transaction-scoped advisory lock, keyed by this schema and `key`. False when
   * another transaction holds it. SQLite: always true (its writers take turns anyway).
   */
  async tryClaim(tx: Tx, key: number): Promise<boolean> {
    if (this.dialect !== 'postgres') return true;
    const k = key % 2_147_483_647;
    const { rows } = await sql<{ ok: boolean }>`select pg_try_advisory_xact_lock(hashtext(current_schema()), ${k}::int) as ok`.execute(tx);
    return rows[0]?.ok === true;
  }

  /**
   * Waits for the claim on `name` and holds it until the transaction ends: for a read-then-assign over rows
   * no constraint guards (a pool's free values), so two PostgreSQL transactions take turns. SQLite: nothing
   * to do (its writers take turns anyway).
   */
  async claim(tx: Tx, name: string): Promise<void> {
    if (this.dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext(${`claim/${name}/`} || current_schema()))`.execute(tx);
  }

  async ping(): Promise<void> {
    await sql`select 1`.execute(this.db);
  }

  async close(): Promise<void> {
    await this.barrier?.close();
    await this.db.destroy();
  }
}

/**
 * SQLite's write transactions begin IMMEDIATE. A deferred BEGIN reads from a snapshot, and its first write
 * fails at once (SQLITE_BUSY_SNAPSHOT, which busy_timeout does not wait out) when another process (an
 * operator command, a second server on the file) committed meanwhile: seen as timers failing in the bench.
 * IMMEDIATE takes the write lock first, waiting up to busy_timeout for the other process's commit. Read-only
 * transactions (Store.snapshot) stay deferred: they never block a writer.
 */
class SqliteImmediateWrites extends SqliteDialect {
  constructor(
    config: SqliteDialectConfig,
    private readonly sqlite: SQLite.Database,
    private readonly yielding: { on: boolean },
  ) {
    super(config);
  }

  override createDriver(): Driver {
    const driver = super.createDriver();
    const deferred = driver.beginTransaction.bind(driver);
    driver.beginTransaction = async (connection, settings) => {
      if (settings.accessMode === 'read only') return deferred(connection, settings);
      const begin = () => connection.executeQuery(CompiledQuery.raw('begin immediate'));
      if (this.yielding.on) await beginYielding(this.sqlite, begin);
      else await begin();
    };
    return driver;
  }

  override createQueryCompiler(): QueryCompiler {
    return new SqliteStableLimits();
  }
}

/**
 * A LIMIT given as a parameter is written `limit (? + 0)`. SQLite (3.53) reads a bare `limit ?`'s bound value
 * when it plans, and so marks the statement to be prepared again whenever that parameter is bound, which is
 * every run: a kept statement (statement-cache.ts) was parsed and planned afresh each time, 4x the cost of
 * running it (a 20-row page: ~360k instructions, ~90k as an expression). An expression is evaluated when
 * the statement runs, with the same meaning (a negative limit: none; 0: no rows).
 */
class SqliteStableLimits extends SqliteQueryCompiler {
  protected override visitLimit(node: LimitNode): void {
    if (!ValueNode.is(node.limit) || node.limit.immediate) return super.visitLimit(node);
    this.append('limit (');
    this.visitNode(node.limit);
    this.append(' + 0)');
  }
}

/** How long a write waits for another process's write lock before it fails with SQLITE_BUSY (busy_timeout). */
const BUSY_TIMEOUT_MS = 5000;

/**
 * BEGIN IMMEDIATE for a serving process: while another process (a second worker on the file, an operator
 * command) holds the write lock, wait on the event loop, not in SQLite's busy handler. better-sqlite3 is
 * synchronous: its busy handler sleeps the whole process (1, 2, 5, 10, ... ms at a time), so every request
 * of the worker stalls until the other worker commits. Here the BEGIN fails at once (busy_timeout 0 for that
 * statement) and is tried again on a later turn, the other requests running meanwhile.
 */
async function beginYielding(sqlite: SQLite.Database, begin: () => Promise<unknown>): Promise<void> {
  const deadline = Date.now() + BUSY_TIMEOUT_MS;
  for (let i = 0; ; i++) {
    sqlite.pragma('busy_timeout = 0');
    try {
      await begin();
      return;
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() >= deadline) throw err;
    } finally {
      sqlite.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
    await new Promise((r) => (i < 2 ? setImmediate(r) : setTimeout(r, Math.min(i - 1, 5))));
  }
}

/**
 * `read` once per turn of the event loop (in its check phase), shared by every call made before it: each
 * caller gets a value read after its call. A reused answer then costs a fraction of a token read.
 */
function sharedPerTurn<T>(read: () => T | undefined): () => Promise<T | undefined> {
  let waiting: ((value: T | undefined) => void)[] | null = null;
  const run = () => {
    const w = waiting!;
    waiting = null;
    let value: T | undefined;
    try {
      value = read();
    } catch {
      value = undefined;
    }
    for (const resolve of w) resolve(value);
  };
  return () =>
    new Promise((resolve) => {
      if (!waiting) {
        waiting = [];
        setImmediate(run);
      }
      waiting.push(resolve);
    });
}

function redact(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}
