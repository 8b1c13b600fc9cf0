import type { Services } from '../../core/context.js';
import type { Tx } from '../../store/db.js';
import { pendingTimers, type TimerHandler } from '../../core/timers.js';
import { enterStopped, logServer } from './power.js';

/** Which pending timers carry each transitional state to its end. */
const TRANSITIONS: Record<string, string[]> = {
  starting: ['server.booted'],
  stopping: ['server.stopped', 'server.acpi'],
  unavailable: ['server.recovered'],
};

/**
 * The reconciler: a server whose recorded state is in transition but whose infrastructure has nothing
 * under way (its timer failed for good, or was lost) is corrected to `stopped` — what the simulated
 * hypervisor holds for it — and the correction is logged as `heal`. Reads only servers in transitional
 * states (an indexed status lookup), never the whole table. Each server is judged under its row lock.
 */
export async function reconcileServers(s: Services, tx: Tx): Promise<number> {
  const stuck = await s.store.resources.uuidsInStatus(tx, 'servers', Object.keys(TRANSITIONS));
  let healed = 0;
  for (const uuid of stuck) {
    const row = await s.store.resources.lock(tx, 'servers', uuid);
    const from = row?.body.status as string | undefined;
    if (!row || !from || !TRANSITIONS[from]) continue;
    const pending = await pendingTimers(tx, uuid);
    if (pending.some((k) => TRANSITIONS[from].includes(k))) continue; // under way
    await enterStopped(tx, s, row);
    await logServer(tx, s, row, 'heal', null, { details: JSON.stringify({ from, to: 'stopped' }) });
    healed++;
  }
  return healed;
}

/** The reconciler as recurring durable work: once a minute of the injected clock, in one process at a time. */
export const reconcileTimers: Record<string, TimerHandler> = {
  'servers.reconcile': {
    everyMs: () => 60_000,
    async run(s, tx) {
      await reconcileServers(s, tx);
    },
  },
};
