/**
 * Background work of one process done in passes (the scheduler's due timers, the notification worker's
 * deliveries): one pass at a time, either from a loop polling on real time (`start`) or called directly
 * (`runDue`: tests and clock moves, right after the injected clock moved). A caller arriving mid-pass waits
 * for it and then runs its own, so work that fell due meanwhile is not missed.
 */
export class PassLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;
  private halted = false;

  constructor(
    private readonly pass: () => Promise<number>,
    private readonly onError: (err: unknown) => void,
  ) {}

  start(pollMs: number): void {
    this.halted = false;
    const loop = async () => {
      if (this.halted) return;
      try {
        await this.runDue();
      } catch (err) {
        this.onError(err);
      }
      if (!this.halted) this.timer = setTimeout(loop, pollMs);
    };
    this.timer = setTimeout(loop, 0);
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
    await this.running?.catch(() => 0);
  }

  runDue(): Promise<number> {
    const previous = this.running ?? Promise.resolve(0);
    const next = previous.catch(() => 0).then(() => this.pass());
    this.running = next;
    return next;
  }
}
