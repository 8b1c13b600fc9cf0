import type { PostgresPool } from 'kysely';
import type Pg from 'pg';
import { answeredWithCommit, sentAhead, shapeName, statementName, WITH_COMMIT } from './shapes.js';

/**
 * The PostgreSQL pool's clients as the store uses them. The pool's clients run in pg's pipeline mode
 * (each statement is written at once, with its own Sync, and answered in order), which this wrapper uses
 * to save round trips inside a transaction:
 * - compiled-once query shapes (shapes.ts) run as named prepared statements: PostgreSQL parses and plans
 *   them once per connection; other SQL runs unnamed, so one-off texts never pile up on the server;
 * - `begin` and the writes nobody reads an answer of (shapes.ts `sentAhead`: the row inserted, its new
 *   body, the audit entry, the event and timer rows, the counts, the change notice) are sent without
 *   waiting: they travel with the next statement that is waited for, and the commit waits for them all. A
 *   POST /servers/ is then one round trip (all of it with the commit) where it was six; a PUT two (begin
 *   with the row's lock, the rest with the commit);
 * - a read whose answer is needed only after the commit (shapes.ts `answeredWithCommit`: a serving
 *   process's announcements) is written at once and answered with the commit, in its round trip.
 * A statement sent ahead that fails fails the transaction as if it had been waited for: PostgreSQL aborts
 * the transaction at once (later statements fail, COMMIT rolls back), and the next statement waited for,
 * the commit included, throws the first such error (so the caller rolls back and sees the cause).
 *
 * pg writes each message of a statement (parse, bind, describe, execute, sync) to the socket on its own: a
 * write system call each, ~20 per POST. The socket is corked while statements are sent ahead and around
 * each one waited for, so what travels together leaves in one write (a round trip is one system call).
 */
/**
 * `migrating`: while the migrations run (one transaction, Store.migrate), their schema changes and writes are
 * sent ahead too: nobody reads their answers, and a new schema's ~200 statements were ~200 round trips
 * (half a second of a PostgreSQL start-up). Each migration still ends with one statement waited for
 * (migrations/index.ts), so a failure is reported with the migration that caused it.
 */
export interface PipelineMode {
  migrating: boolean;
}

/** Statements whose answer is only "done": DDL and writes without RETURNING. */
const SCHEMA_CHANGE = /^\s*(create|alter|drop|comment|insert|update|delete)\b(?![\s\S]*\breturning\b)/i;

export function pipelinedClients(pool: Pg.Pool, roundTrips: { n: number }, mode: PipelineMode = { migrating: false }): PostgresPool {
  const wrapped = new WeakSet<Pg.PoolClient>();
  const connect = pool.connect.bind(pool) as () => Promise<Pg.PoolClient>;
  const wrap = (client: Pg.PoolClient): Pg.PoolClient => {
    if (wrapped.has(client)) return client;
    wrapped.add(client);
    const query = client.query.bind(client) as (config: unknown, values?: unknown) => Promise<Pg.QueryResult>;
    /** Inside a transaction begun ahead: what was sent ahead and not yet answered, and the first failure. */
    let inTransaction = false;
    let ahead: Promise<unknown>[] = [];
    let failed: unknown;
    /** The socket pg writes to (absent before it connects: then nothing is corked). */
    const stream = (client as unknown as { connection?: { stream?: { cork(): void; uncork(): void; writableCorked: number } } }).connection?.stream;
    /** Whether statements sent ahead wait, corked, for the next statement waited for. */
    let held = false;
    const submit = (text: string, values: unknown): Promise<Pg.QueryResult> => {
      const name = shapeName(text);
      return name ? query({ name: statementName(name), text, values }) : query(text, values);
    };
    /** A statement waited for: written (with whatever was held) in one system call. */
    const corked = (write: () => Promise<Pg.QueryResult>): Promise<Pg.QueryResult> => {
      if (!stream) return write();
      if (!held) stream.cork();
      held = false;
      try {
        return write();
      } finally {
        stream.uncork();
      }
    };
    const send = (text: string, values: unknown): Promise<Pg.QueryResult> => corked(() => submit(text, values));
    const sendAhead = (text: string, values: unknown, command: string): Promise<Pg.QueryResult> => {
      if (stream && !held) {
        stream.cork();
        held = true;
      }
      ahead.push(
        submit(text, values).catch((err: unknown) => {
          failed ??= err;
        }),
      );
      return Promise.resolve({ command, rowCount: 1, rows: [], oid: 0, fields: [] });
    };
    /**
     * A read answered with the commit (shapes.ts `answeredWithCommit`): written now, so it runs in the
     * transaction before the commit written after it, and answered in the commit's round trip. Its failure
     * fails the commit like a write sent ahead; its rows come as a promise in the one row answered now.
     */
    const withCommit = (text: string, values: unknown): Promise<Pg.QueryResult> => {
      const real = submit(text, values);
      ahead.push(
        real.catch((err: unknown) => {
          failed ??= err;
        }),
      );
      const rows = real.then(
        (r) => r.rows,
        () => undefined,
      );
      return Promise.resolve({ command: 'SELECT', rowCount: 1, rows: [{ [WITH_COMMIT]: rows }], oid: 0, fields: [] });
    };
    /** The statements sent ahead, answered: throws the first that failed. */
    const settle = async (): Promise<void> => {
      if (ahead.length) await Promise.all(ahead);
      ahead = [];
      const err = failed;
      failed = undefined;
      if (err !== undefined) throw err;
    };
    (client as { query: unknown }).query = async (text: unknown, values?: unknown) => {
      if (typeof text !== 'string') return corked(() => query(text, values));
      if (text === 'begin' || text.startsWith('start transaction')) {
        inTransaction = true;
        return sendAhead(text, values, 'BEGIN');
      }
      if (inTransaction && (sentAhead(shapeName(text), text) || (mode.migrating && SCHEMA_CHANGE.test(text)))) return sendAhead(text, values, 'INSERT');
      if (inTransaction && answeredWithCommit(shapeName(text))) return withCommit(text, values);
      if (text === 'commit' || text === 'rollback') inTransaction = false;
      roundTrips.n++;
      let result: Pg.QueryResult;
      try {
        result = await send(text, values);
      } catch (err) {
        // The cause is a statement sent ahead when one failed (this one then failed as aborted).
        await settle();
        throw err;
      }
      // A rollback ends what failed; a commit after a failure rolled back (PostgreSQL answers COMMIT in an
      // aborted transaction with ROLLBACK, no error): throw the failure, so the caller rolls back too.
      if (text === 'rollback') {
        await settle().catch(() => undefined);
        return result;
      }
      await settle();
      return result;
    };
    return client;
  };
  return { connect: async () => wrap(await connect()), end: () => pool.end() };
}
