import { isoTimestamp, representable } from './clock.js';
import type { Services } from './context.js';
import type { Tx } from '../store/db.js';
import { deleteTimersOf, insertTimer, nextDueExcept, pendingKindsOf, pendingPayloadsOf, type DueTimer } from '../store/timers.js';

/** A durable follow-up as the scheduler hands it to its handler: the row store/timers.ts reads (due_ms: epoch ms of the injected clock). */
export type TimerRow = DueTimer;

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

/** Timers scheduled due at once, per store: a serving process settles them before a write's answer leaves. */
const dueAtOnce = new WeakMap<object, number>();

/**
 * How many timers due at once were scheduled on `store` so far. A zero-length transition (every duration is 0
 * under `--ci`) is such a timer: http/routes.ts compares this count before and after a write and, when it
 * moved, runs the due timers before answering, so the very next request sees the transition done.
 */
export const dueAtOnceCount = (store: object): number => dueAtOnce.get(store) ?? 0;

/** Schedule follow-up work in the caller's transaction (so it exists iff the change committed). */
export async function schedule(
  tx: Tx,
  s: Pick<Services, 'clock'> & { store?: object },
  t: { kind: string; subject: string; inMs: number; payload?: unknown },
): Promise<void> {
  const now = s.clock.now();
  if (t.inMs <= 0 && s.store) dueAtOnce.set(s.store, dueAtOnceCount(s.store) + 1);
  await insertTimer(tx, {
    kind: t.kind,
    subject: t.subject,
    due_ms: dueMs(new Date(now.getTime() + Math.max(0, t.inMs))),
    payload: JSON.stringify(t.payload ?? {}),
    state: 'pending',
    attempts: 0,
    last_error: null,
    created_at: isoTimestamp(now),
    unique_key: null,
  });
}

/** Cancel pending timers of a subject (e.g. the drive was deleted mid-clone). */
export const cancelTimers = (tx: Tx, subject: string, kinds?: string[]): Promise<void> => deleteTimersOf(tx, subject, kinds);

/** When (epoch ms) the first pending timer of another kind than `kind` falls due (null: none pending). */
export { nextDueExcept };

/** Pending timers of a subject (a reconciler asks whether anything will finish a transition). */
export const pendingTimers = (tx: Tx, subject: string): Promise<string[]> => pendingKindsOf(tx, subject);

/** Payloads of a subject's pending timers of one kind. */
export async function pendingTimerPayloads(tx: Tx, subject: string, kind: string): Promise<unknown[]> {
  return (await pendingPayloadsOf(tx, subject, kind)).map((p) => JSON.parse(p) as unknown);
}
