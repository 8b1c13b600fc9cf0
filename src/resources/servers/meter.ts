import type { Meter, Usage } from '../../core/metering.js';
import { allGuestStates, guestStates } from '../../sim/hypervisor.js';

/** States in which a server uses its cpu and memory: from the moment it is started until it has stopped. */
export const USING = ['starting', 'running', 'stopping'] as const;

/**
 * What servers use (reference §16.6): cpu (MHz) and mem (bytes) of every started server, under its cpu
 * type's keys (`intel_cpu`, `amd_mem`, ...) and the generic `cpu` / `mem`. A guest's use began when it
 * powered on (the simulator's power-on time); a server still booting has used nothing billable yet.
 */
export const serverUsage: Meter = async (s, db, at, owner) => {
  const rows = await s.store.resources.owned(db, 'servers', { owner, statuses: USING });
  if (!rows.length) return [];
  // Every account's poll reads every guest's state in one statement; one account's, by uuid.
  const guests =
    owner === undefined
      ? await allGuestStates(db)
      : await guestStates(
          db,
          rows.map((r) => r.uuid),
        );
  const out: Usage[] = [];
  for (const r of rows) {
    const type = String(r.body.cpu_type ?? 'amd');
    const since = guests.get(r.uuid)?.active_since ?? at.getTime();
    const own = r.owner_uuid!;
    out.push({ owner: own, keys: [`${type}_cpu`, 'cpu'], amount: Number(r.body.cpu), since, uuid: r.uuid });
    out.push({ owner: own, keys: [`${type}_mem`, 'mem'], amount: Number(r.body.mem), since, uuid: r.uuid });
  }
  return out;
};
