import type { Money } from './money.js';

/**
 * Billing cycles are the 5-minute slots of the injected clock (reference §16.4: "Burst entries every 5 min
 * billing cycle"); cycle N is [N·300 s, (N+1)·300 s) since the Unix epoch. A cycle is billed at its end,
 * the poll: each use is charged for the part of the cycle it covered (a server started 137 s before the
 * poll is charged for 137 s, "for 2 minutes").
 */
export const CYCLE_MS = 300_000;

export const cycleOf = (at: Date): number => Math.floor(at.getTime() / CYCLE_MS);

/** The first cycle boundary after `now`. */
export const nextBoundary = (now: Date): Date => new Date((cycleOf(now) + 1) * CYCLE_MS);

/** "5 minutes", "2 minutes", "1 minute", "30 seconds", as the recorded ledger words an interval. */
export function humanInterval(seconds: number): string {
  if (seconds < 60) return `${seconds} second${seconds === 1 ? '' : 's'}`;
  // Spans of a long catch-up (engine.ts) in bigger units.
  if (seconds >= 2 * 86_400) return `${Math.round(seconds / 86_400)} days`;
  if (seconds >= 2 * 3_600) return `${Math.round(seconds / 3_600)} hours`;
  const minutes = Math.round(seconds / 60);
  return `${minutes} minute${minutes === 1 ? '' : 's'}`;
}

/** `2014-06-05 09:06` */
export const minuteText = (at: Date): string => at.toISOString().slice(0, 16).replace('T', ' ');

/**
 * An amount in the unit of its price: MHz in GHz, bytes in GB (2^30), objects as they are — what the
 * recorded reasons show ("12.00 GHz of cpu", "4.50 GB of dssd").
 */
export function displayAmount(unit: string, amount: Money): string {
  if (unit === 'GHz') return amount.div(1000).toFixed(2);
  if (unit === 'GB') return amount.div(2 ** 30).toFixed(2);
  return amount.toFixed(2);
}

/** `Burst: 4.50 GB of dssd for 5 minutes at 2014-06-05 09:06` */
export function burstReason(resource: string, unit: string, amount: Money, seconds: number, poll: Date): string {
  const shown = displayAmount(unit, amount);
  return `Burst: ${shown}${unit ? ` ${unit}` : ''} of ${resource} for ${humanInterval(seconds)} at ${minuteText(poll)}`;
}
