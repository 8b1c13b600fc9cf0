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

/**
 * The moments the service represents: years 0000 to 9999, the ones ISO-8601 writes with four digits. A
 * later moment prints as `+010000-…`, which sorts before every four-digit year; such a time once made a
 * renewal timer due forever. Requests are refused past this range (400) and nothing out of it is written.
 */
export const EARLIEST_TIME_MS = Date.parse('0000-01-01T00:00:00.000Z');
export const LATEST_TIME_MS = Date.parse('9999-12-31T23:59:59.999Z');

/** Whether `ms` is a moment the service represents (see LATEST_TIME_MS). */
export const representable = (ms: number): boolean => Number.isFinite(ms) && ms >= EARLIEST_TIME_MS && ms <= LATEST_TIME_MS;

/** ISO-8601 with microseconds and `+00:00`, the form the real API prints (`2014-06-05T00:27:12.890638+00:00`). */
export function isoTimestamp(d: Date): string {
  const ms = d.getTime();
  // A write stamps its row, its audit entry and its events with one moment: it is printed once.
  if (ms === lastMs) return lastText;
  // A last guard: callers bound times first (a 400); text outside the range would not sort as time.
  if (!representable(ms)) throw new RangeError(`time out of range: ${ms}`);
  // In range, toISOString is `YYYY-MM-DDTHH:MM:SS.sssZ`: cut, not matched with a regular expression.
  lastText = d.toISOString().slice(0, 23) + '000+00:00';
  lastMs = ms;
  return lastText;
}
let lastMs = NaN;
let lastText = '';

/** Epoch ms of a stored ISO time (`….890638+00:00`: JavaScript reads milliseconds only). */
export const timeMs = (iso: string): number => Date.parse(iso.replace(/(\.\d{3})\d*/, '$1'));
