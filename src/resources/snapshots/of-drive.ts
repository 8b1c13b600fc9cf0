import type { Ctx, Services } from '../../core/context.js';
import { record } from '../../core/events.js';
import type { Obj } from '../../core/input.js';
import { cancelTimers } from '../../core/timers.js';
import { forgetSnapshots, snapshotSizes } from '../../sim/storage.js';
import type { Db, Tx } from '../../store/db.js';
import type { Resource } from '../../store/repository.js';

/**
 * What a drive knows of its snapshots. The drive keeps their uuids (`snapshots`, written under the drive's
 * row lock by every snapshot create and delete), so a drive lists them at once and the `drive=` filter is
 * an index lookup; their sizes come from the simulated storage. Kept apart from snapshots.ts, which needs
 * the drive's declaration: drives import this, never the other way round.
 */
export const snapshotsOf = (drive: Obj): string[] => (drive.snapshots as string[] | undefined) ?? [];

/** `runtime.snapshots_allocated_size` of a page of presented drives: one storage read for all. */
export async function showSnapshotSizes(ctx: Pick<Services, 'store' | 'clock' | 'config'>, drives: Obj[]): Promise<void> {
  const withSnapshots = drives.filter((d) => (d.snapshots as unknown[]).length);
  if (!withSnapshots.length) return;
  const sizes = await snapshotSizes(
    ctx.store.db,
    ctx,
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
  await forgetSnapshots(tx, uuids);
}

/**
 * Snapshot storage an account occupies now, per storage type of the drives they were taken of: billed as
 * drive storage of that type (spec "Snapshot"). What the billing engine reads.
 */
export async function snapshotStorage(s: Pick<Services, 'store' | 'clock' | 'config'>, db: Db | Tx, owner: string): Promise<Map<string, number>> {
  const uuids = (await s.store.resources.ownedUuids(db, 'snapshots', owner).execute()).map((r) => r.uuid);
  const out = new Map<string, number>();
  if (!uuids.length) return out;
  const snapshots = await s.store.resources.getMany(db, 'snapshots', uuids);
  const drives = new Map(
    (
      await s.store.resources.getMany(
        db,
        'drives',
        snapshots.map((r) => r.body.drive as string),
      )
    ).map((d) => [d.uuid, d.body.storage_type as string]),
  );
  const sizes = await snapshotSizes(db, s, uuids);
  for (const snap of snapshots) {
    const type = drives.get(snap.body.drive as string);
    if (type) out.set(type, (out.get(type) ?? 0) + (sizes.get(snap.uuid) ?? 0));
  }
  return out;
}
