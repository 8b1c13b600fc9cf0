import type { FastifyBaseLogger } from 'fastify';
import { isoTimestamp } from './clock.js';
import type { Services } from './context.js';
import { idleUntil, PassLoop } from './pass-loop.js';
import { dueAtOnceCount, dueMs, type TimerHandler, type TimerRow } from './timers.js';
import type { Tx } from '../store/db.js';
import { deleteTimer, dueBacklog, dueTimers, failTimer, insertTimer, insertTimerOnce, nextDue, pendingAttempts, retryTimer } from '../store/timers.js';
import { WAKE_CLOCK, WAKE_TIMERS } from '../store/wakes.js';

const MAX_ATTEMPTS = 5;
/** Due timers read per claim attempt: the first not claimed by another process is run. */
const CLAIM_CANDIDATES = 8;

/** How often passes look for announcements killed processes left (PostgreSQL). */
const DRAIN_EVERY_MS = 10_000;

/** The timer was cancelled while its handler ran: its work is rolled back. */
class Cancelled extends Error {}

/**
 * Runs due timers. A loop runs on real time (polling, or on PostgreSQL sleeping until the next due time or a
 * wake-up: core/pass-loop.ts); `runDue()` can be called directly (tests, the admin clock)
 * right after moving the injected clock. Each timer is claimed and run in one transaction; on
 * PostgreSQL the claim is an advisory lock (runOne), so several API processes share the work and never
 * run one timer twice. Recurring work (handlers with `everyMs`) is a timer row with a unique key: the
 * first pass of any process creates the missing ones, and each run schedules its successor in its own
 * transaction, so a restart resumes the cadence and several processes never double it.
 */
export class Scheduler {
  private readonly loop = new PassLoop(
    () => this.pass(),
    (err) => this.log?.error({ err }, 'scheduler pass failed'),
  );
  private recurringEnsured = false;

  constructor(
    private readonly s: Services,
    private readonly handlers: Record<string, TimerHandler>,
    private readonly log?: FastifyBaseLogger,
    /** Runs before every pass (serve: copy the deployment's shared clock offset in, src/admin/clock.ts). */
    private readonly beforePass?: () => Promise<void>,
  ) {}

  /**
   * The polling loop. Where the store hears wake-ups (PostgreSQL, store/wakes.ts) an idle loop sleeps until
   * the first pending timer falls due, new timers are added, or the shared clock moves.
   */
  start(pollMs = 250): void {
    const { store, clock } = this.s;
    this.loop.start(
      pollMs,
      idleUntil(
        store.wakes,
        [WAKE_TIMERS, WAKE_CLOCK],
        () => nextDue(store.db),
        () => clock.now().getTime(),
      ),
    );
  }

  /** Whether this process's polling loop runs (tests drive the scheduler by hand instead). */
  get polling(): boolean {
    return this.loop.polling;
  }

  /**
   * How far behind the work is: the pending timers already due by the injected clock, and how long the
   * oldest of them has been due (0 when none). One indexed query (readiness, metrics).
   */
  async backlog(): Promise<{ due: number; lagMs: number }> {
    const now = this.s.clock.now();
    const { due, oldest } = await dueBacklog(this.s.store.db, now.getTime());
    return { due, lagMs: oldest === null ? 0 : Math.max(0, now.getTime() - oldest) };
  }

  /** Stop polling and wait for the pass in progress, so the database can close cleanly. */
  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Timers scheduled due at once on this scheduler's store so far (core/timers.ts dueAtOnceCount). */
  dueAtOnce(): number {
    return dueAtOnceCount(this.s.store);
  }

  /** Run every timer due by the injected clock (including ones that become due while running). */
  runDue(): Promise<number> {
    return this.loop.runDue();
  }

  /** Create the pending timer of every recurring handler that has none (any process may; one wins). */
  private async ensureRecurring(): Promise<void> {
    const { store, clock } = this.s;
    const now = clock.now();
    for (const [kind, h] of Object.entries(this.handlers)) {
      if (!h.everyMs) continue;
      await insertTimerOnce(store.db, this.recurringRow(kind, h.firstAt ? h.firstAt(now) : new Date(now.getTime() + h.everyMs(this.s)), isoTimestamp(now)));
    }
    this.recurringEnsured = true;
  }

  private recurringRow(kind: string, due: Date, createdAt: string) {
    return {
      kind,
      subject: kind,
      due_ms: dueMs(due),
      payload: '{}',
      state: 'pending' as const,
      attempts: 0,
      last_error: null,
      created_at: createdAt,
      unique_key: kind,
    };
  }

  /** The successor of a recurring timer: one period after the one that ran (every missed period for catch-up work). */
  private async reschedule(tx: Tx, timer: TimerRow, handler: TimerHandler, nextAt?: Date): Promise<void> {
    const every = Math.max(1, handler.everyMs!(this.s));
    const now = this.s.clock.now().getTime();
    let next = nextAt?.getTime() ?? timer.due_ms + every;
    // Never at or before the run it follows: a successor due in the past of its predecessor would loop.
    if (next <= timer.due_ms) next = timer.due_ms + every;
    if (!handler.catchUp && next <= now) next = now + every;
    await insertTimer(tx, this.recurringRow(timer.kind, new Date(next), isoTimestamp(new Date(now))));
  }

  /** When (injected clock, ms) this scheduler last sent announcements killed processes left. */
  private drained = -Infinity;

  private async pass(): Promise<number> {
    await this.beforePass?.();
    if (!this.recurringEnsured) await this.ensureRecurring();
    // Announcements a process killed after a commit left (store/db.ts drainAnnouncements): sent at every
    // start, and by passes at most every DRAIN_EVERY_MS, so a host lost for good leaves none for long.
    const now = this.s.clock.now().getTime();
    if (now - this.drained >= DRAIN_EVERY_MS) {
      this.drained = now;
      await this.s.store.drainAnnouncements();
    }
    let done = 0;
    for (;;) {
      const ran = await this.runOne();
      if (ran === 'none') return done;
      done++;
      if (done > 10_000) return done; // never starve the event loop forever
    }
  }

  /**
   * Claim one due timer and run it. The claim locks no timer row (`tryClaim`, an advisory lock until the
   * transaction ends): the handler locks its objects first and deletes its own timer row last, the order
   * of every other path that touches both (a DELETE or a stop locks the object, then cancels its timers).
   * Holding the timer row from the claim on deadlocked with them. A timer cancelled while its handler
   * waited for the object is gone when the handler ends: the handler's work is rolled back.
   */
  private async runOne(): Promise<'ran' | 'none'> {
    const { store, clock } = this.s;
    const now = clock.now().getTime();
    let failure: { timer: TimerRow; error: Error } | undefined;
    // Read outside a transaction: a pass that finds nothing due (most of them) costs one statement.
    const candidates = await dueTimers(store.db, now, CLAIM_CANDIDATES);
    if (!candidates.length) return 'none';
    const outcome = await store
      .transaction(async (tx) => {
        let timer: TimerRow | undefined;
        for (const c of candidates) {
          if (!(await store.tryClaim(tx, c.id))) continue;
          // Claimed: still there and pending (another process may have run it since it was read)?
          const attempts = await pendingAttempts(tx, c.id);
          if (attempts === undefined) continue;
          timer = { ...c, attempts };
          break;
        }
        if (!timer) return 'busy' as const;
        const handler = this.handlers[timer.kind];
        try {
          if (!handler) throw new Error(`no handler for timer kind ${timer.kind}`);
          // A failing handler rolls the whole transaction back; the failure is recorded in a new one below.
          const outcome = await handler.run(this.s, tx, timer, JSON.parse(timer.payload));
          if (!(await deleteTimer(tx, timer.id))) throw new Cancelled();
          if (handler.everyMs) await this.reschedule(tx, timer, handler, outcome?.nextAt);
        } catch (error) {
          if (!(error instanceof Cancelled)) failure = { timer, error: error as Error };
          throw error;
        }
        return 'ran' as const;
      })
      .catch((err: unknown) => {
        if (err instanceof Cancelled) return 'cancelled' as const;
        if (!failure) throw err;
        return 'failed' as const;
      });
    // Every due timer is claimed by another process right now: nothing left for this pass.
    if (outcome === 'busy') return 'none';
    if (outcome === 'failed' && failure) await this.recordFailure(failure.timer, failure.error);
    return 'ran';
  }

  /** Retry with backoff; after MAX_ATTEMPTS give up and let the handler put things in a defined state. */
  private async recordFailure(timer: TimerRow, error: Error): Promise<void> {
    const { store, clock } = this.s;
    this.log?.warn({ timer: timer.kind, subject: timer.subject, err: error }, 'timer failed');
    const attempts = timer.attempts + 1;
    await store.transaction(async (tx) => {
      if (attempts < MAX_ATTEMPTS) {
        const retryAt = dueMs(new Date(clock.now().getTime() + 1000 * 2 ** attempts));
        await retryTimer(tx, timer.id, attempts, retryAt, error.message);
        return;
      }
      // Kept as `failed` for diagnosis; recurring work gives up its key and goes on at the next period.
      await failTimer(tx, timer.id, attempts, error.message);
      const handler = this.handlers[timer.kind];
      await handler?.failed?.(this.s, tx, timer, JSON.parse(timer.payload), error);
      if (handler?.everyMs) await this.reschedule(tx, timer, handler);
    });
  }
}
