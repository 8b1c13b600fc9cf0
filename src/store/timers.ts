import { sql, type Insertable } from 'kysely';
import { SENT_AHEAD_MARK } from './shapes.js';
import type { Db, Tx } from './db.js';
import type { TimersTable } from './schema.js';

/**
 * The SQL of the durable timers table (`timers`): follow-ups written in the transaction of the change that
 * needs them (core/timers.ts), claimed and run by the scheduler (core/scheduler.ts).
 */
export type TimerInsert = Insertable<TimersTable>;

/** A due timer as the scheduler reads it. */
export interface DueTimer {
  id: number;
  kind: string;
  subject: string;
  due_ms: number;
  payload: string;
  attempts: number;
}

/** A follow-up of the change in `tx`: nobody reads its answer (sent ahead on PostgreSQL, store/pg-client.ts). */
export async function insertTimer(tx: Tx, row: TimerInsert): Promise<void> {
  await tx.insertInto('timers').values(row).modifyEnd(sql.raw(SENT_AHEAD_MARK)).execute();
}

/** A recurring timer: one pending row per unique key across all processes (the loser inserts nothing). */
export async function insertTimerOnce(db: Db | Tx, row: TimerInsert): Promise<void> {
  await db
    .insertInto('timers')
    .values(row)
    .onConflict((oc) => oc.column('unique_key').doNothing())
    .execute();
}

/** Remove a subject's timers (of `kinds` when given). */
export async function deleteTimersOf(tx: Tx, subject: string, kinds?: string[]): Promise<void> {
  let q = tx.deleteFrom('timers').where('subject', '=', subject);
  if (kinds?.length) q = q.where('kind', 'in', kinds);
  await q.execute();
}

/** When (epoch ms) the first pending timer of another kind than `kind` falls due (null: none pending). */
export async function nextDueExcept(db: Tx, kind: string): Promise<number | null> {
  const row = await db
    .selectFrom('timers')
    .select((eb) => eb.fn.min<number>('due_ms').as('due'))
    .where('state', '=', 'pending')
    .where('kind', '<>', kind)
    .executeTakeFirst();
  return row?.due === null || row?.due === undefined ? null : Number(row.due);
}

/** Kinds of a subject's pending timers. */
export async function pendingKindsOf(tx: Tx, subject: string): Promise<string[]> {
  const rows = await tx.selectFrom('timers').select('kind').where('subject', '=', subject).where('state', '=', 'pending').execute();
  return rows.map((r) => r.kind);
}

/** Payload texts of a subject's pending timers of one kind. */
export async function pendingPayloadsOf(tx: Tx, subject: string, kind: string): Promise<string[]> {
  const rows = await tx.selectFrom('timers').select('payload').where('subject', '=', subject).where('kind', '=', kind).where('state', '=', 'pending').execute();
  return rows.map((r) => r.payload);
}

/** When (epoch ms) the first pending timer falls due (null: none pending). */
export async function nextDue(db: Db): Promise<number | null> {
  const row = await db
    .selectFrom('timers')
    .select((eb) => eb.fn.min<number>('due_ms').as('due'))
    .where('state', '=', 'pending')
    .executeTakeFirst();
  return row?.due === null || row?.due === undefined ? null : Number(row.due);
}

/** Pending timers already due at `nowMs`: how many, and the oldest due time (null: none). One indexed query. */
export async function dueBacklog(db: Db, nowMs: number): Promise<{ due: number; oldest: number | null }> {
  const row = await db
    .selectFrom('timers')
    .select((eb) => [eb.fn.countAll<number>().as('n'), eb.fn.min('due_ms').as('oldest')])
    .where('state', '=', 'pending')
    .where('due_ms', '<=', nowMs)
    .executeTakeFirst();
  const oldest = row?.oldest === null || row?.oldest === undefined ? NaN : Number(row.oldest);
  return { due: Number(row?.n ?? 0), oldest: Number.isNaN(oldest) ? null : oldest };
}

/** The first `limit` pending timers due at `nowMs`, oldest first (candidates to claim). */
export async function dueTimers(tx: Db | Tx, nowMs: number, limit: number): Promise<DueTimer[]> {
  const rows = await tx
    .selectFrom('timers')
    .select(['id', 'kind', 'subject', 'due_ms', 'payload', 'attempts'])
    .where('state', '=', 'pending')
    .where('due_ms', '<=', nowMs)
    .orderBy('due_ms')
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((r) => ({ ...r, id: Number(r.id), due_ms: Number(r.due_ms), attempts: Number(r.attempts) }));
}

/** A claimed timer's attempts, if it is still there and pending (another process may have run it since). */
export async function pendingAttempts(tx: Tx, id: number): Promise<number | undefined> {
  const row = await tx.selectFrom('timers').select(['attempts']).where('id', '=', id).where('state', '=', 'pending').executeTakeFirst();
  return row ? Number(row.attempts) : undefined;
}

/** Remove a timer that ran; false when it was gone already (cancelled while its handler ran). */
export async function deleteTimer(tx: Tx, id: number): Promise<boolean> {
  const done = await tx.deleteFrom('timers').where('id', '=', id).executeTakeFirst();
  return Number(done.numDeletedRows) > 0;
}

/** A failed run to retry at `dueMs`. */
export async function retryTimer(tx: Tx, id: number, attempts: number, dueMs: number, error: string): Promise<void> {
  await tx.updateTable('timers').set({ attempts, due_ms: dueMs, last_error: error }).where('id', '=', id).execute();
}

/** A timer given up on: kept as `failed` for diagnosis; recurring work gives up its key. */
export async function failTimer(tx: Tx, id: number, attempts: number, error: string): Promise<void> {
  await tx.updateTable('timers').set({ attempts, state: 'failed', last_error: error, unique_key: null }).where('id', '=', id).execute();
}
