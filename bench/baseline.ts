/**
 * Write figures recorded before issue 11's work, per store: the goal is 5x the write rate. They are
 * compared as ratios to the raw replay server of the same run (machine speed cancels out); req/s are
 * kept for reading. Recorded with `npm run bench` on the 2-core development machine, others sharing it.
 */
export const WRITE_GOAL = 5;

export const WRITE_BASELINE: Record<'sqlite' | 'postgres', Record<string, { reqPerSec: number; ratio: number }> | null> = {
  // Commit 5a2bec7 (before issue 11's request-path work), 100k-server database, 3 s runs.
  sqlite: { 'POST /servers/': { reqPerSec: 567, ratio: 0.0116 }, 'PUT /servers/<uuid>/': { reqPerSec: 84.3, ratio: 0.0016 } },
  postgres: { 'POST /servers/': { reqPerSec: 160, ratio: 0.0056 }, 'PUT /servers/<uuid>/': { reqPerSec: 204, ratio: 0.0065 } },
};
