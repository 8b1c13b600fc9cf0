import { AdjustableClock } from '../../src/core/clock.js';

/**
 * A year safely ahead of today, for times a test sets (the admin clock only moves forward, and a date that
 * has passed means something else to the code): computed, so the suite does not expire.
 */
export const FUTURE_YEAR = new Date().getUTCFullYear() + 5;

/** `FUTURE_YEAR-MM-DDThh:mm:ss.sssZ` from the parts after the year (month 1-based), as an ISO string. */
export const futureIso = (rest = '01-01T12:00:00.000Z') => `${FUTURE_YEAR}-${rest}`;

/**
 * A clock that stands still: it moves only when the test moves it (advance, set). The injected clock of a
 * test whose counts or bounds must not depend on how fast the machine runs (the AdjustableClock follows
 * real time). An admin-clock offset copied in (setOffset) moves it once, to real time plus that offset.
 */
export class FrozenClock extends AdjustableClock {
  private at: number;
  constructor(start: Date = new Date(Date.UTC(FUTURE_YEAR, 0, 1, 12))) {
    super();
    this.at = start.getTime();
  }
  override get offset(): number {
    return this.at - Date.now();
  }
  override setOffset(ms: number): void {
    this.at = Date.now() + ms;
  }
  override now(): Date {
    return new Date(this.at);
  }
  override advance(ms: number): void {
    this.at += ms;
  }
  override set(to: Date): void {
    this.at = to.getTime();
  }
}
