/**
 * Write figures recorded before issue 11's work, per store: the goal is 5x the write rate. They are
 * compared as ratios to the raw replay server of the same run (machine speed cancels out); req/s are
 * kept for reading. Recorded with `npm run bench` on the 2-core development machine, others sharing it.
 */
export const WRITE_GOAL = 5;

export const WRITE_BASELINE: Record<'sqlite' | 'postgres', Record<string, { reqPerSec: number; ratio: number }> | null> = {
  sqlite: null,
  postgres: null,
};
