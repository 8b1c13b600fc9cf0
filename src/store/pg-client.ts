import type { PostgresPool } from 'kysely';
import type Pg from 'pg';
import { readWithCommit, sentAhead, shapeName, statementName } from './shapes.js';

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
 * - a read whose answer is wanted only after the commit (shapes.ts `readWithCommit`) is written at once and
 *   answered on the commit's round trip.
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

/** A statement handed to Riders: its answer's rows, once something carried it (or it went alone). */
export interface Ride<R> {
  /** The rows; sends the statement on its own first if no other statement has carried it yet. */
  result(): Promise<R[]>;
}

interface Rider {
  name: string;
  text: string;
  values: unknown[];
  /** Whether it is still waiting for a carrier. */
  queued: boolean;
  answer: Promise<Pg.QueryResult>;
  sent(query: Promise<Pg.QueryResult>): void;
}

/**
 * Statements that need no round trip of their own: each travels, sent ahead, with the next statement any of
 * the pool's clients waits for outside a transaction (never inside one: a rollback would undo it, and its row
 * locks would be held to the commit). The rate limiter's count rides with the request's own read
 * (http/ratelimit/limiter.ts), so a GET is one round trip where it was two. A rider runs as a transaction
 * of its own (pipeline mode gives each statement its own Sync), so a carrier failing does not fail it.
 * `result()` of a rider nothing carried sends it alone (with any other waiting rider).
 */
export class Riders {
  private queue: Rider[] = [];
  /** Set by pipelinedClients: a client of the pool (a rider sent alone). */
  connect: () => Promise<Pg.PoolClient> = () => Promise.reject(new Error('riders: no pool'));

  /** `statements` counts the statements sent (as the store's counter does; riders bypass Kysely). */
  constructor(private readonly statements: { n: number }) {}

  /** Queues `text` as the named prepared statement `name` (a fixed name per text). */
  add<R>(name: string, text: string, values: unknown[]): Ride<R> {
    let sent!: (query: Promise<Pg.QueryResult>) => void;
    const answer = new Promise<Pg.QueryResult>((resolve, reject) => (sent = (query) => query.then(resolve, reject)));
    // A request that failed before asking for its result leaves nobody waiting: not an unhandled rejection.
    answer.catch(() => undefined);
    const rider: Rider = { name, text, values, queued: true, answer, sent };
    this.queue.push(rider);
    this.statements.n++;
    return { result: () => this.result<R>(rider) };
  }

  /** The riders waiting for a carrier, taken by one. */
  take(): Rider[] {
    const list = this.queue;
    if (list.length) this.queue = [];
    for (const r of list) r.queued = false;
    return list;
  }

  private async result<R>(rider: Rider): Promise<R[]> {
    if (rider.queued) {
      this.queue.splice(this.queue.indexOf(rider), 1);
      rider.queued = false;
      const client = await this.connect();
      try {
        rider.sent(client.query({ name: rider.name, text: rider.text, values: rider.values }));
        await rider.answer.catch(() => undefined);
      } finally {
        client.release();
      }
    }
    return (await rider.answer).rows as R[];
  }
}

export function pipelinedClients(
  pool: Pg.Pool,
  roundTrips: { n: number },
  mode: PipelineMode = { migrating: false },
  riders: Riders | null = null,
): PostgresPool {
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
    /** Outside a transaction: the waiting riders, sent ahead with the statement about to be waited for. */
    const carry = (): void => {
      if (inTransaction || !riders) return;
      const list = riders.take();
      if (!list.length) return;
      if (stream && !held) {
        stream.cork();
        held = true;
      }
      for (const r of list) r.sent(query({ name: r.name, text: r.text, values: r.values }));
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
      if (typeof text !== 'string') {
        carry();
        roundTrips.n++;
        return corked(() => query(text, values));
      }
      if (text === 'begin' || text.startsWith('start transaction')) {
        carry();
        inTransaction = true;
        return sendAhead(text, values, 'BEGIN');
      }
      if (inTransaction && (sentAhead(shapeName(text), text) || (mode.migrating && SCHEMA_CHANGE.test(text)))) return sendAhead(text, values, 'INSERT');
      if (text === 'commit' || text === 'rollback') inTransaction = false;
      // Answered on the COMMIT's round trip (its caller awaits it after the commit).
      else if (inTransaction && readWithCommit(shapeName(text))) return send(text, values);
      else carry();
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
  const clients = { connect: async () => wrap(await connect()), end: () => pool.end() };
  if (riders) riders.connect = clients.connect;
  return clients;
}
