import { AdjustableClock, isoTimestamp } from '../core/clock.js';
import type { Services } from '../core/context.js';
import { validation } from '../core/errors.js';
import { WAKE_CLOCK } from '../store/wakes.js';

/**
 * The clock every process of a deployment shares: real time plus an offset kept in `settings`
 * (`clock_offset_ms`). Moving it (`POST /_stratus/admin/clock`, `stratus clock advance|set`) writes the
 * offset; each serving process copies it into its AdjustableClock before a scheduler pass once it moved (and at
 * start; clockSyncer), so `clock.now()` stays a synchronous addition on the request path, and the other processes see the
 * moved time and run the work that fell due at their next tick (within the scheduler's poll, 250 ms).
 * Time only moves forward: durable timers, login windows and (later) billing periods assume it.
 */
export const CLOCK_SETTING = 'clock_offset_ms';

/** At most ten years per move: a typo (ms for s) should not put the service in another century. */
const MAX_MOVE_MS = 10 * 365 * 86_400_000;

export async function storedOffset(s: Pick<Services, 'store' | 'clockStore'>): Promise<number | null> {
  const store = s.clockStore ?? s.store;
  const value = await store.settings.get(store.db, CLOCK_SETTING);
  const n = value !== undefined ? Number(value) : NaN;
  return Number.isFinite(n) ? n : null;
}

/**
 * Copy the shared offset into this process's clock (a no-op on a fixed clock). When none was ever set the
 * process keeps its own, unless `unset` says what that means (after an import: the state's clock is real time).
 */
export async function syncClock(s: Services, unset?: number): Promise<void> {
  if (!(s.clock instanceof AdjustableClock)) return;
  const stored = (await storedOffset(s)) ?? unset;
  if (stored !== undefined) s.clock.setOffset(stored);
}

/**
 * syncClock before each scheduler pass, read only when it may have moved: where the clock's store hears
 * wake-ups (store/wakes.ts), at the first pass and after each move (WAKE_CLOCK, migration 0130), so the
 * passes of an idle process and those a write runs before it answers read no setting; elsewhere every pass.
 */
export function clockSyncer(s: Services): () => Promise<void> {
  const wakes = (s.clockStore ?? s.store).wakes;
  let moved = true;
  wakes?.on([WAKE_CLOCK], () => (moved = true));
  return async () => {
    if (wakes?.listening && !moved) return;
    moved = false;
    await syncClock(s);
  };
}

export interface ClockState {
  now: string;
  offset_ms: number;
}

export function clockState(s: Services): ClockState {
  // The offset itself where the clock has one (two readings of real time may straddle a millisecond).
  const offset = s.clock instanceof AdjustableClock ? s.clock.offset : s.clock.now().getTime() - Date.now();
  return { now: isoTimestamp(new Date(Date.now() + offset)), offset_ms: offset };
}

export type ClockMove = { advanceMs: number } | { to: Date };

/**
 * Move the shared clock forward (never back: a 400 `validation`, exit code 2 on the command line). The base
 * is the later of the stored offset and this process's (a test's clock may have been moved in-process only).
 */
export async function moveClock(s: Services, move: ClockMove): Promise<ClockState> {
  if ('advanceMs' in move && (!Number.isInteger(move.advanceMs) || move.advanceMs < 0 || move.advanceMs > MAX_MOVE_MS))
    throw validation('advance_ms', 'advance must be a whole number of milliseconds from 0 to ten years (the clock only moves forward)');
  if ('to' in move && Number.isNaN(move.to.getTime())) throw validation('set', 'set must be an ISO-8601 time, e.g. 2030-01-01T00:00:00Z');
  const store = s.clockStore ?? s.store;
  const offset = await store.transaction(async (tx) => {
    // One row, locked, so two operators moving the clock at once both count.
    await store.settings.insertIfAbsent(tx, CLOCK_SETTING, '0');
    const stored = await store.settings.lock(tx, CLOCK_SETTING);
    const local = s.clock instanceof AdjustableClock ? s.clock.offset : 0;
    const base = Math.max(Number(stored) || 0, local);
    const realNow = Date.now();
    const current = realNow + base;
    const target = 'advanceMs' in move ? current + move.advanceMs : move.to.getTime();
    if (target < current)
      throw validation('set', `the clock only moves forward: it is ${isoTimestamp(new Date(current))}, ${isoTimestamp(new Date(target))} is earlier`);
    if (target - current > MAX_MOVE_MS) throw validation('set', 'a move of more than ten years is refused (check the unit)');
    const next = target - realNow;
    await store.settings.put(tx, CLOCK_SETTING, String(next));
    return { next, target };
  });
  if (s.clock instanceof AdjustableClock) s.clock.setOffset(offset.next);
  // The time moved to, exactly (a fresh reading would be a few ms later).
  return { now: isoTimestamp(new Date(offset.target)), offset_ms: offset.next };
}

/** `1h`, `30m`, `90s`, `2d`, `500ms` (or a sum like `1h30m`) as milliseconds; null when it is none of those. */
export function parseDuration(raw: string): number | null {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  if (!/^(\d+(ms|s|m|h|d))+$/.test(raw)) return null;
  let total = 0;
  for (const m of raw.matchAll(/(\d+)(ms|s|m|h|d)/g)) total += Number(m[1]) * units[m[2]];
  return total;
}
