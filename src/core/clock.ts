/** Time is injected everywhere so tests and the admin plane can move it without sleeping. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/**
 * A clock that follows real time plus an offset that can be advanced (tests, admin clock control). `now()`
 * is one addition: the request path never waits for the database. The offset shared by every process of a
 * deployment lives in the database (src/admin/clock.ts); each process copies it in at its scheduler ticks.
 */
export class AdjustableClock implements Clock {
  private offsetMs = 0;
  get offset(): number {
    return this.offsetMs;
  }
  setOffset(ms: number): void {
    this.offsetMs = ms;
  }
  now(): Date {
    return new Date(Date.now() + this.offsetMs);
  }
  advance(ms: number): void {
    this.offsetMs += ms;
  }
  set(to: Date): void {
    this.offsetMs = to.getTime() - Date.now();
  }
}

/** ISO-8601 with microseconds and `+00:00`, the form the real API prints (`2014-06-05T00:27:12.890638+00:00`). */
export function isoTimestamp(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, '.$1000+00:00');
}
