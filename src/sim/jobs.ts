import type { JobTiming } from '../core/sim.js';
import type { Db, Tx } from '../store/db.js';
import { dropState, readStates, writeState } from '../store/sim.js';

/**
 * When a long operation (a clone) planned as a job started and will end, as the simulator planned it:
 * kept in its own table (kind `jobs`), never in the job's body, so a job's progress moves with the clock.
 */
const KIND = 'jobs';

export async function beginJob(tx: Tx, job: string, at: Date, durationMs: number): Promise<void> {
  const now = at.getTime();
  await writeState(tx, KIND, job, { started_at: now, ends_at: now + durationMs });
}

export const jobTimings = (db: Db | Tx, jobs: readonly string[]) => readStates<JobTiming>(db, KIND, jobs);

export const forgetJob = (tx: Tx, job: string) => dropState(tx, KIND, job);
