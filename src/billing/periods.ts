import { isoTimestamp, LATEST_TIME_MS, representable } from '../core/clock.js';
import { validation } from '../core/errors.js';

/**
 * Subscription periods (reference §16.8). A period is free text — "1 month", "2 months 1 week",
 * "30 days", "1 year" — added to a time as a calendar does (1 Feb + 1 month = 1 Mar; 1 Mar + 1 month =
 * 1 Apr), all in UTC. A subscription's window comes from `start_time`, `end_time` and `period`:
 * start+end ⇒ between them; start+period ⇒ period from start; end+period ⇒ period ending at end; end
 * only ⇒ now→end; period only ⇒ now+period; all three ⇒ "ambiguous"; start only or none ⇒ "not specific
 * enough". The end is rounded up to the next 12:00 UTC; the start is rounded down to the previous noon but
 * never before now (so "now" starts now).
 */
export interface Period {
  years: number;
  months: number;
  weeks: number;
  days: number;
  hours: number;
  minutes: number;
}

const UNITS: Record<string, keyof Period> = {
  year: 'years',
  years: 'years',
  y: 'years',
  month: 'months',
  months: 'months',
  week: 'weeks',
  weeks: 'weeks',
  w: 'weeks',
  day: 'days',
  days: 'days',
  d: 'days',
  hour: 'hours',
  hours: 'hours',
  h: 'hours',
  minute: 'minutes',
  minutes: 'minutes',
};

/** "2 months 1 week" → {months: 2, weeks: 1}; a 400 on `point` for anything else. */
export function parsePeriod(text: unknown, point = 'period'): Period {
  if (typeof text !== 'string' || !text.trim()) throw validation(point, 'A period is text such as "1 month", "30 days" or "1 year 2 months"');
  const p: Period = { years: 0, months: 0, weeks: 0, days: 0, hours: 0, minutes: 0 };
  const parts = text.trim().toLowerCase().replace(/,/g, ' ').split(/\s+/);
  if (parts.length % 2 !== 0) throw validation(point, `Cannot read the period "${text}": give a number and a unit, e.g. "1 month"`);
  for (let i = 0; i < parts.length; i += 2) {
    const n = Number(parts[i]);
    const unit = UNITS[parts[i + 1]!];
    if (!Number.isInteger(n) || n < 0 || n > 100_000 || !unit)
      throw validation(point, `Cannot read the period "${text}": give a number and a unit, e.g. "1 month"`);
    p[unit] += n;
  }
  if (Object.values(p).every((v) => v === 0)) throw validation(point, `The period "${text}" is empty`);
  return p;
}

/** `at` moved by a period, forwards (sign 1) or backwards (-1), calendar-wise (month ends clamp). */
export function addPeriod(at: Date, p: Period, sign: 1 | -1 = 1): Date {
  const d = new Date(at.getTime());
  const months = sign * (p.years * 12 + p.months);
  if (months) {
    const day = d.getUTCDate();
    d.setUTCDate(1);
    d.setUTCMonth(d.getUTCMonth() + months);
    const last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
    d.setUTCDate(Math.min(day, last));
  }
  return new Date(d.getTime() + sign * ((p.weeks * 7 + p.days) * 86_400_000 + p.hours * 3_600_000 + p.minutes * 60_000));
}

/** Python's timedelta text, as the API prints `period`: "365 days, 2:45:57.487493", "366 days, 0:00:00". */
export function timedeltaText(ms: number): string {
  const micros = Math.round(ms * 1000);
  const days = Math.floor(micros / 86_400_000_000);
  let rest = micros - days * 86_400_000_000;
  const h = Math.floor(rest / 3_600_000_000);
  rest -= h * 3_600_000_000;
  const m = Math.floor(rest / 60_000_000);
  rest -= m * 60_000_000;
  const s = Math.floor(rest / 1_000_000);
  const us = rest - s * 1_000_000;
  const clock = `${h}:${String(m).padStart(2, '0')}:${String(s).padStart(2, '0')}${us ? `.${String(us).padStart(6, '0')}` : ''}`;
  return days ? `${days} day${days === 1 ? '' : 's'}, ${clock}` : clock;
}

const NOON_MS = 12 * 3_600_000;
const LAST_DAY = isoTimestamp(new Date(LATEST_TIME_MS)).slice(0, 10);
const DAY_MS = 86_400_000;

/** The next 12:00 UTC at or after `at`. */
export function noonAtOrAfter(at: Date): Date {
  const dayStart = Math.floor(at.getTime() / DAY_MS) * DAY_MS;
  const noon = dayStart + NOON_MS;
  return new Date(noon >= at.getTime() ? noon : noon + DAY_MS);
}

/** The last 12:00 UTC at or before `at`. */
export function noonAtOrBefore(at: Date): Date {
  const dayStart = Math.floor(at.getTime() / DAY_MS) * DAY_MS;
  const noon = dayStart + NOON_MS;
  return new Date(noon <= at.getTime() ? noon : noon - DAY_MS);
}

/** An ISO time from a request (`2014-08-26T12:00:00+00:00`, `2014-08-26`); a 400 on `point` otherwise. */
export function parseTime(raw: unknown, point: string): Date {
  if (typeof raw !== 'string' || !/^\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d(\.\d{1,6})?)?)?(Z|[+-]\d\d:?\d\d)?$/.test(raw.trim()))
    throw validation(point, 'A time is an ISO 8601 date and time, e.g. 2014-08-26T12:00:00+00:00');
  const text = raw.trim().replace(' ', 'T');
  const ms = Date.parse(/(Z|[+-]\d\d:?\d\d)$/.test(text) || text.length === 10 ? text : `${text}Z`);
  if (Number.isNaN(ms)) throw validation(point, `${raw} is not a valid time`);
  if (!representable(ms)) throw validation(point, `${raw} is out of range: times end at ${LAST_DAY}`);
  return new Date(ms);
}

export interface Window {
  start: Date;
  end: Date;
  /** The period as asked (kept so an extension re-applies it from its own start); null when given by end_time. */
  period: Period | null;
}

const given = (v: unknown) => v !== undefined && v !== null && v !== '';

/** A subscription's window from the request's `start_time`, `end_time` and `period` (rules above). */
export function windowOf(input: { start_time?: unknown; end_time?: unknown; period?: unknown }, now: Date): Window {
  const hasStart = given(input.start_time);
  const hasEnd = given(input.end_time);
  const hasPeriod = given(input.period);
  if (hasStart && hasEnd && hasPeriod) throw validation('period', 'start_time, end_time and period together are ambiguous: give two of them at most');
  if (!hasEnd && !hasPeriod) throw validation('period', 'Not specific enough: give a period or an end_time');
  const period = hasPeriod ? parsePeriod(input.period) : null;
  // Rounded at the anchor the request gives: a period is counted from a rounded start, or back from a rounded end.
  const startOf = (t: Date) => new Date(Math.max(now.getTime(), noonAtOrBefore(t).getTime()));
  let roundedStart: Date;
  let roundedEnd: Date;
  if (hasStart && hasEnd) {
    roundedStart = startOf(parseTime(input.start_time, 'start_time'));
    roundedEnd = noonAtOrAfter(parseTime(input.end_time, 'end_time'));
  } else if (hasStart) {
    roundedStart = startOf(parseTime(input.start_time, 'start_time'));
    roundedEnd = noonAtOrAfter(addPeriod(roundedStart, period!));
  } else if (hasEnd && hasPeriod) {
    roundedEnd = noonAtOrAfter(parseTime(input.end_time, 'end_time'));
    roundedStart = startOf(addPeriod(roundedEnd, period!, -1));
  } else if (hasEnd) {
    roundedStart = now;
    roundedEnd = noonAtOrAfter(parseTime(input.end_time, 'end_time'));
  } else {
    roundedStart = now;
    roundedEnd = noonAtOrAfter(addPeriod(now, period!));
  }
  const span = roundedEnd.getTime() - roundedStart.getTime();
  // A period of thousands of years leaves the calendar (an invalid date): as too long, a 400.
  if (Number.isNaN(span) || span > 10 * 366 * DAY_MS) throw validation('period', 'A subscription lasts at most 10 years');
  // Rounded up to noon, a time late on the last day would leave the calendar the service represents.
  if (!representable(roundedEnd.getTime())) throw validation(hasEnd ? 'end_time' : 'period', `A subscription ends by ${LAST_DAY} at the latest`);
  if (roundedEnd.getTime() <= roundedStart.getTime()) throw validation('end_time', 'The subscription would end before it starts');
  return { start: roundedStart, end: roundedEnd, period: hasStart && hasEnd ? null : period };
}
