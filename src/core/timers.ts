import { isoTimestamp, representable } from './clock.js';
import type { Services } from './context.js';
import type { Tx } from '../store/db.js';

/** A durable follow-up as the scheduler hands it to its handler. */
export interface TimerRow {
  id: number;
  kind: string;
  subject: string;
  /** Epoch ms of the injected clock. */
  due_ms: number;
  payload: string;
  attempts: number;
}

/**
 * What runs when a timer of a kind falls due. `run` executes inside the transaction that also removes
 * the timer, so the effect and its completion commit together. `failed` runs (in its own transaction)
 * when `run` kept failing, to leave the subject in a defined state rather than stuck. A handler with
 * `everyMs` is recurring: one pending timer of its kind exists across all processes, and each run
 * schedules the next in the same transaction.
 */
export interface TimerHandler {
  /** Recurring work may say when it runs next (billing bills a long gap at once, then goes on from there). */
  run(s: Services, tx: Tx, timer: TimerRow, payload: unknown): Promise<void | { nextAt?: Date }>;
  failed?(s: Services, tx: Tx, timer: TimerRow, payload: unknown, error: Error): Promise<void>;
  /** Recurring period in ms of the injected clock (a function of the configuration, read at start). */
  everyMs?: (s: Services) => number;
  /** Recurring work that must run once per missed period after downtime (billing); else once, then on cadence. */
  catchUp?: boolean;
  /** When recurring work first falls due (billing polls on the clock's 5-minute boundaries); default one period from now. */
  firstAt?: (now: Date) => Date;
}

/** A timer's due time as stored; a time the service cannot represent is a bug of the caller, never stored. */
export function dueMs(at: Date): number {
  const ms = at.getTime();
  if (!representable(ms)) throw new RangeError(`timer due out of range: ${ms}`);
  return ms;
}

/** Schedule follow-up work in the caller's transaction (so it exists iff the change committed). */
export async function schedule(tx: Tx, s: Pick<Services, 'clock'>, t: { kind: string; subject: string; inMs: number; payload?: unknown }): Promise<void> {
  const now = s.clock.now();
  await tx
    .insertInto('timers')
    .values({
      kind: t.kind,
      subject: t.subject,
      due_ms: dueMs(new Date(now.getTime() + Math.max(0, t.inMs))),
      payload: JSON.stringify(t.payload ?? {}),
      state: 'pending',
      attempts: 0,
      last_error: null,
      created_at: isoTimestamp(now),
      unique_key: null,
    })
    .execute();
}

/** Cancel pending timers of a subject (e.g. the drive was deleted mid-clone). */
export async function cancelTimers(tx: Tx, subject: string, kinds?: string[]): Promise<void> {
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

/** Pending timers of a subject (a reconciler asks whether anything will finish a transition). */
export async function pendingTimers(tx: Tx, subject: string): Promise<string[]> {
  const rows = await tx.selectFrom('timers').select('kind').where('subject', '=', subject).where('state', '=', 'pending').execute();
  return rows.map((r) => r.kind);
}

/** Payloads of a subject's pending timers of one kind. */
export async function pendingTimerPayloads(tx: Tx, subject: string, kind: string): Promise<unknown[]> {
  const rows = await tx.selectFrom('timers').select('payload').where('subject', '=', subject).where('kind', '=', kind).where('state', '=', 'pending').execute();
  return rows.map((r) => JSON.parse(r.payload) as unknown);
}
