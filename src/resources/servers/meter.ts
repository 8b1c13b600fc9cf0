import type { Meter, Usage } from '../../core/metering.js';
import { licencesOf } from '../drives/meter.js';
import { attachedDrives } from './mounts.js';

/** States in which a server uses its cpu and memory: from the moment it is started until it has stopped. */
export const USING = ['starting', 'running', 'stopping'] as const;

/**
 * What servers use (reference §16.6): cpu (MHz) and mem (bytes) of every started server, under its cpu
 * type's keys (`intel_cpu`, `amd_mem`, ...) and the generic `cpu` / `mem`. A guest's use began when it
 * powered on (the simulator's power-on time); a server still booting has used nothing billable yet.
 * It is charged under the first of those keys the catalogue prices: the recorded zrh catalogue prices no
 * `amd_*` (its `/currentusage/` counts `amd_cpu` all the same) and no `intel_*`, so an AMD server there pays
 * the `cpu`/`mem` prices, and so does an Intel one (`--cpu-type intel`) — the generic keys are what a cpu
 * type without a price of its own is billed at. A catalogue pricing `intel_cpu` (prices-intel.json) charges that.
 *
 * Licences billed per running instance (§16.5 `instance`): one per started server that has a drive
 * holding it attached, times the drive entry's `amount`, times the server's `smp` when the licence counts
 * cores (`user_metric: smp`), while the guest runs. A server with two drives holding one licence needs it
 * once (the larger count).
 *
 * Traffic (tx): the bytes each server sent in the cycle measured (`from`..`at`, the simulator's counters),
 * a volume — a server that stopped mid-cycle still pays what it sent before.
 *
 * Set-wise: one read of the servers, one of the started ones' guests, one of the drives they have
 * attached, one of the traffic counters — for every account at once.
 */
export const serverUsage: Meter = async (s, db, at, owner, from) => {
  // The started servers' bodies only (a poll reads every account's servers): chosen by the status their
  // body has (the indexed mirror of a row stored before that column existed is empty until its next write).
  const started: string[] = [];
  for await (const r of s.store.resources.ownedFields(db, 'servers', [], { owner, bodyIn: { key: 'status', values: USING } })) started.push(r.uuid);
  const rows = await s.store.resources.getMany(db, 'servers', started);
  const out: Usage[] = [];
  if (rows.length) {
    // Every account's poll reads every guest's state in one statement; one account's, by uuid.
    const guests = await s.sim.hypervisor.guestStates(db, owner === undefined ? undefined : rows.map((r) => r.uuid));
    const attached = [...new Set(rows.flatMap((r) => attachedDrives(r.body)))];
    const drives = new Map((await s.store.resources.getMany(db, 'drives', attached)).map((d) => [d.uuid, d.body]));
    for (const r of rows) {
      const type = String(r.body.cpu_type ?? 'amd');
      const since = guests.get(r.uuid)?.active_since ?? at.getTime();
      const own = r.owner_uuid!;
      out.push({ owner: own, keys: [`${type}_cpu`, 'cpu'], amount: Number(r.body.cpu), since, uuid: r.uuid });
      out.push({ owner: own, keys: [`${type}_mem`, 'mem'], amount: Number(r.body.mem), since, uuid: r.uuid });
      const instances = new Map<string, number>();
      for (const d of attachedDrives(r.body)) {
        const body = drives.get(d);
        if (!body || !(body.licenses as unknown[] | undefined)?.length) continue;
        for (const l of licencesOf(s, body)) {
          if (l.type !== 'instance') continue;
          const per = l.metric === 'smp' ? Math.max(1, Number(r.body.smp) || 1) : 1;
          instances.set(l.name, Math.max(instances.get(l.name) ?? 0, l.amount * per));
        }
      }
      for (const [name, amount] of instances) out.push({ owner: own, keys: [name], amount, since, uuid: r.uuid });
    }
  }
  // What every server sent in the cycle (a stopped one may have sent before it stopped): of every server
  // with traffic counters in a poll of every account, else of the account's servers.
  const since = (from ?? new Date(at.getTime() - 300_000)).getTime();
  let theirs: string[] | undefined;
  if (owner !== undefined) {
    theirs = [];
    for await (const r of s.store.resources.ownedFields(db, 'servers', [], { owner })) theirs.push(r.uuid);
  }
  const sent = await s.sim.traffic.sentBetween(db, since, at.getTime(), theirs);
  if (sent.size) {
    const senders = await s.store.resources.existing(db, 'servers', [...sent.keys()]);
    for (const r of [...senders.values()].sort((a, b) => a.seq - b.seq)) {
      const bytes = sent.get(r.uuid);
      if (bytes && r.owner_uuid !== null) out.push({ owner: r.owner_uuid, keys: ['tx'], amount: bytes, uuid: r.uuid, volume: true });
    }
  }
  return out;
};
