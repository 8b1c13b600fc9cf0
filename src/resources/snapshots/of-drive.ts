import type { Ctx, Services } from '../../core/context.js';
import type { Meter, Usage } from '../../core/metering.js';
import { record } from '../../core/events.js';
import type { Obj } from '../../core/input.js';
import { cancelTimers } from '../../core/timers.js';
import type { Tx } from '../../store/db.js';
import type { Resource } from '../../store/repository.js';

/**
 * What a drive knows of its snapshots. The drive keeps their uuids (`snapshots`, written under the drive's
 * row lock by every snapshot create and delete), so a drive lists them at once and the `drive=` filter is
 * an index lookup; their sizes come from the simulated storage. Kept apart from snapshots.ts, which needs
 * the drive's declaration: drives import this, never the other way round.
 */
export const snapshotsOf = (drive: Obj): string[] => (drive.snapshots as string[] | undefined) ?? [];

/** `runtime.snapshots_allocated_size` of a page of presented drives: one storage read for all. */
export async function showSnapshotSizes(ctx: Pick<Services, 'store' | 'sim'>, drives: Obj[]): Promise<void> {
  const withSnapshots = drives.filter((d) => (d.snapshots as unknown[]).length);
  if (!withSnapshots.length) return;
  const sizes = await ctx.sim.storage.snapshotSizes(
    ctx.store.db,
    withSnapshots.flatMap((d) => (d.snapshots as { uuid: string }[]).map((s) => s.uuid)),
  );
  for (const d of withSnapshots) {
    const total = (d.snapshots as { uuid: string }[]).reduce((sum, s) => sum + (sizes.get(s.uuid) ?? 0), 0);
    d.runtime = { ...(d.runtime as Obj), snapshots_allocated_size: total };
  }
}

/**
 * A drive's snapshots go with it (reference §7.2), in its delete transaction, each with its audit entry.
 * The drive is locked by the caller (drives before snapshots, as a snapshot's delete takes them).
 */
export async function dropSnapshotsOf(tx: Tx, ctx: Ctx, drive: Resource): Promise<void> {
  const uuids = snapshotsOf(drive.body);
  if (!uuids.length) return;
  const rows = await ctx.store.resources.lockMany(tx, 'snapshots', uuids);
  for (const row of rows) {
    await cancelTimers(tx, row.uuid);
    await record(tx, ctx, { action: 'delete', category: 'Snapshots', uuid: row.uuid, owner: row.owner_uuid ?? '', actor: ctx.caller.uuid });
  }
  await ctx.store.resources.remove(
    tx,
    'snapshots',
    rows.map((r) => r.uuid),
  );
  await ctx.sim.storage.forgetSnapshots(tx, uuids);
}

/**
 * What snapshots use (spec "Snapshot"): the storage each occupies at the poll, billed as drive storage of
 * its drive's type. Sizes come from the simulated storage as of the poll, so a cycle billed late (after
 * downtime) is billed as it was.
 */
export const snapshotUsage: Meter = async (s, db, at, owner) => {
  const snapshots = [];
  for await (const r of s.store.resources.ownedFields(db, 'snapshots', ['drive'], { owner })) snapshots.push(r);
  if (!snapshots.length) return [];
  const drives = new Map(
    (
      await s.store.resources.getMany(
        db,
        'drives',
        snapshots.map((r) => r.fields.drive as string),
      )
    ).map((d) => [d.uuid, String(d.body.storage_type)]),
  );
  const sizes = await s.sim.storage.snapshotSizes(
    db,
    snapshots.map((r) => r.uuid),
    at,
  );
  const out: Usage[] = [];
  for (const snap of snapshots) {
    const type = drives.get(snap.fields.drive as string);
    const size = sizes.get(snap.uuid) ?? 0;
    if (type && size > 0) out.push({ owner: snap.owner_uuid, keys: [type], amount: size, since: Date.parse(snap.created_at), uuid: snap.uuid });
  }
  return out;
};
