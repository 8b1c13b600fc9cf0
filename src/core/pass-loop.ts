import type { WakeSource } from '../store/wakes.js';

/**
 * How an idle loop waits (PostgreSQL, store/wakes.ts): until its next work falls due or a wake-up of one of
 * `payloads` comes, instead of every poll interval.
 */
export interface IdleWait {
  wakes: WakeSource;
  payloads: readonly string[];
  /** Milliseconds until the next known work falls due (0 or less: now; null: none), read after a pass. */
  nextDueIn(): Promise<number | null>;
}

/**
 * The IdleWait of a loop whose work has due times (epoch ms of the injected clock, `nextDueMs`) and is
 * announced by `payloads`; undefined (poll) where the store hears no wake-ups.
 */
export function idleUntil(
  wakes: WakeSource | null,
  payloads: readonly string[],
  nextDueMs: () => Promise<number | null>,
  nowMs: () => number,
): IdleWait | undefined {
  if (!wakes) return undefined;
  return {
    wakes,
    payloads,
    nextDueIn: async () => {
      const due = await nextDueMs();
      return due === null ? null : due - nowMs();
    },
  };
}

/** The longest an idle loop sleeps without a wake-up: a safety net, not a poll. */
export const IDLE_MAX_MS = 60_000;

/**
 * Background work of one process done in passes (the scheduler's due timers, the notification worker's
 * deliveries): one pass at a time, either from a loop polling on real time (`start`) or called directly
 * (`runDue`: tests and clock moves, right after the injected clock moved). A caller arriving mid-pass waits
 * for it and then runs its own, so work that fell due meanwhile is not missed. With an IdleWait the loop
 * sleeps between passes until the next due time or a poll interval after a wake-up (so wake-ups under
 * load cost no more passes than polling did); while wake-ups are not heard it polls.
 */
export class PassLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private halted = false;
  private unwake: (() => void) | undefined;

  constructor(
    private readonly pass: () => Promise<number>,
    private readonly onError: (err: unknown) => void,
  ) {}

  start(pollMs: number, idle?: IdleWait): void {
    this.halted = false;
    /** Whether a wake-up came since the last pass began; whether the loop sleeps (no pass runs); when it wakes. */
    let woken = false;
    let sleeping = false;
    let wakesAt = 0;
    const at = (ms: number) => {
      clearTimeout(this.timer);
      wakesAt = Date.now() + ms;
      this.timer = setTimeout(loop, Math.max(0, ms));
    };
    const loop = async () => {
      sleeping = false;
      if (this.halted) return;
      woken = false;
      try {
        await this.runDue();
      } catch (err) {
        this.onError(err);
      }
      let delay = pollMs;
      if (idle?.wakes.listening && !woken)
        try {
          const due = await idle.nextDueIn();
          delay = Math.min(IDLE_MAX_MS, Math.max(pollMs, due ?? IDLE_MAX_MS));
        } catch (err) {
          this.onError(err);
        }
      if (this.halted) return;
      sleeping = true;
      at(woken ? pollMs : delay);
    };
    this.unwake?.();
    // A wake-up's pass comes a poll interval later: the writer whose request made work due at once runs it
    // itself meanwhile (http/routes.ts), and wake-ups under load share one pass.
    this.unwake = idle?.wakes.on(idle.payloads, () => {
      woken = true;
      if (sleeping && wakesAt > Date.now() + pollMs) at(pollMs);
    });
    at(0);
  }

  /** Whether the polling loop runs (tests drive passes by hand instead). */
  get polling(): boolean {
    return this.timer !== undefined && !this.halted;
  }

  /** Whether `stop` was called: a long pass checks it to end early. */
  get stopped(): boolean {
    return this.halted;
  }

  /** Stop polling and wait for the pass in progress (so the database can close cleanly). */
  async stop(): Promise<void> {
    this.halted = true;
    clearTimeout(this.timer);
    this.unwake?.();
    this.unwake = undefined;
    await this.running?.catch(() => 0);
  }

  runDue(): Promise<number> {
    const previous = this.running ?? Promise.resolve(0);
    const next = previous.catch(() => 0).then(() => this.pass());
    this.running = next;
    return next;
  }
}
