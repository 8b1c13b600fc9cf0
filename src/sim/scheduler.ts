import type { FastifyBaseLogger } from 'fastify';
import { isoTimestamp } from '../core/clock.js';
import type { Services } from '../core/context.js';
import type { Tx } from '../store/db.js';

/** A durable follow-up: what to do (`kind`), to what (`subject`), when, with what data. */
export interface TimerRow {
  id: number;
  kind: string;
  subject: string;
  due_at: string;
  payload: string;
  attempts: number;
}

/**
 * What runs when a timer of a kind falls due. `run` executes inside the transaction that also removes
 * the timer, so the effect and its completion commit together. `failed` runs (in its own transaction)
 * when `run` kept failing, to leave the subject in a defined state rather than stuck.
 */
export interface TimerHandler {
  run(s: Services, tx: Tx, timer: TimerRow, payload: any): Promise<void>;
  failed?(s: Services, tx: Tx, timer: TimerRow, payload: any, error: Error): Promise<void>;
}

/** Schedule follow-up work in the caller's transaction (so it exists iff the change committed). */
export async function schedule(
  tx: Tx,
  s: Pick<Services, 'clock'>,
  t: { kind: string; subject: string; inMs: number; payload?: unknown },
): Promise<void> {
  const now = s.clock.now();
  await tx
    .insertInto('timers')
    .values({
      kind: t.kind,
      subject: t.subject,
      due_at: isoTimestamp(new Date(now.getTime() + Math.max(0, t.inMs))),
      payload: JSON.stringify(t.payload ?? {}),
      state: 'pending',
      attempts: 0,
      last_error: null,
      created_at: isoTimestamp(now),
    })
    .execute();
}

/** Cancel pending timers of a subject (e.g. the drive was deleted mid-clone). */
export async function cancelTimers(tx: Tx, subject: string, kinds?: string[]): Promise<void> {
  let q = tx.deleteFrom('timers').where('subject', '=', subject);
  if (kinds?.length) q = q.where('kind', 'in', kinds);
  await q.execute();
}

const MAX_ATTEMPTS = 5;

/**
 * Runs due timers. A loop polls on real time; `runDue()` can be called directly (tests, the admin clock)
 * right after moving the injected clock. Each timer is claimed and run in one transaction; on
 * PostgreSQL the claim uses FOR UPDATE SKIP LOCKED, so several API processes share the work and never
 * run one timer twice.
 */
export class Scheduler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private stopped = false;

  constructor(
    private readonly s: Services,
    private readonly handlers: Record<string, TimerHandler>,
    private readonly log?: FastifyBaseLogger,
  ) {}

  start(pollMs = 250): void {
    this.stopped = false;
    const loop = async () => {
      if (this.stopped) return;
      try {
        await this.runDue();
      } catch (err) {
        this.log?.error({ err }, 'scheduler pass failed');
      }
      if (!this.stopped) this.timer = setTimeout(loop, pollMs);
    };
    this.timer = setTimeout(loop, 0);
  }

  /** Stop polling and wait for the pass in progress, so the database can close cleanly. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running?.catch(() => 0);
  }

  /** Run every timer due by the injected clock (including ones that become due while running). */
  runDue(): Promise<number> {
    // One pass at a time per process; a caller arriving mid-pass waits for it and then runs its own.
    const previous = this.running ?? Promise.resolve(0);
    const next = previous.catch(() => 0).then(() => this.pass());
    this.running = next;
    return next;
  }

  private async pass(): Promise<number> {
    let done = 0;
    for (;;) {
      const ran = await this.runOne();
      if (ran === 'none') return done;
      done++;
      if (done > 10_000) return done; // never starve the event loop forever
    }
  }

  private async runOne(): Promise<'ran' | 'none'> {
    const { store, clock } = this.s;
    const now = isoTimestamp(clock.now());
    let failure: { timer: TimerRow; error: Error } | undefined;
    const outcome = await store.transaction(async (tx) => {
      let q = tx
        .selectFrom('timers')
        .select(['id', 'kind', 'subject', 'due_at', 'payload', 'attempts'])
        .where('state', '=', 'pending')
        .where('due_at', '<=', now)
        .orderBy('due_at')
        .orderBy('id')
        .limit(1);
      if (store.dialect === 'postgres') q = q.forUpdate().skipLocked();
      const timer = await q.executeTakeFirst();
      if (!timer) return 'none' as const;
      const handler = this.handlers[timer.kind];
      try {
        if (!handler) throw new Error(`no handler for timer kind ${timer.kind}`);
        // A failing handler rolls the whole transaction back; the failure is recorded in a new one below.
        await handler.run(this.s, tx, timer, JSON.parse(timer.payload));
        await tx.deleteFrom('timers').where('id', '=', timer.id).execute();
      } catch (error) {
        failure = { timer, error: error as Error };
        throw error;
      }
      return 'ran' as const;
    }).catch((err: unknown) => {
      if (!failure) throw err;
      return 'failed' as const;
    });
    if (outcome !== 'failed' || !failure) return outcome === 'none' ? 'none' : 'ran';
    await this.recordFailure(failure.timer, failure.error);
    return 'ran';
  }

  /** Retry with backoff; after MAX_ATTEMPTS give up and let the handler put things in a defined state. */
  private async recordFailure(timer: TimerRow, error: Error): Promise<void> {
    const { store, clock } = this.s;
    this.log?.warn({ timer: timer.kind, subject: timer.subject, err: error }, 'timer failed');
    const attempts = timer.attempts + 1;
    await store.transaction(async (tx) => {
      if (attempts < MAX_ATTEMPTS) {
        const retryAt = isoTimestamp(new Date(clock.now().getTime() + 1000 * 2 ** attempts));
        await tx.updateTable('timers').set({ attempts, due_at: retryAt, last_error: error.message }).where('id', '=', timer.id).execute();
        return;
      }
      await tx.updateTable('timers').set({ attempts, state: 'failed', last_error: error.message }).where('id', '=', timer.id).execute();
      await this.handlers[timer.kind]?.failed?.(this.s, tx, timer, JSON.parse(timer.payload), error);
    });
  }
}
