import type { Ctx } from '../../core/context.js';
import { ApiError, notFound } from '../../core/errors.js';
import { avoidList, type Obj } from '../../core/input.js';
import type { Row } from '../../core/stored.js';
import type { Tx } from '../../store/db.js';
import { cloneWithin } from '../drives/clone.js';

/**
 * `snapshots/<uuid>/action/?do=clone`: a new drive of the caller's holding the drive's data as it was
 * when the snapshot was taken, through the one drive-clone workflow (drives/clone.ts). The body may give
 * `name`, `media` and `affinities`; size and storage type are the drive's. Without a name the clone is
 * named from the snapshot's name by the caller's clone naming (with `NONE`, the snapshot's name).
 * `avoid` is a placement hint: checked, and met trivially by the simulated storage.
 */
export async function cloneSnapshot(
  ctx: Ctx,
  uuid: string,
  body: Obj,
  avoid: string | undefined,
  /** The snapshot, locked, if the caller may clone it (404/403 otherwise). */
  lockSnapshot: (tx: Tx) => Promise<Row>,
): Promise<string> {
  avoidList(avoid);
  const { name, media, affinities } = body;
  const input = Object.fromEntries(Object.entries({ name, media, affinities }).filter(([, v]) => v !== undefined && v !== null));
  return ctx.store.transaction(async (tx) => {
    const snap = await lockSnapshot(tx);
    if (snap.body.status !== 'available') throw new ApiError('permission', `Cannot clone snapshot in state "${String(snap.body.status)}"`);
    const drive = await ctx.store.resources.get(tx, 'drives', snap.body.drive as string);
    if (!drive) throw notFound(uuid);
    const source = { uuid, kind: 'snapshots' as const, owner: snap.owner_uuid, body: { ...drive.body, name: snap.body.name } };
    return (await cloneWithin(tx, ctx, source, input)).uuid;
  });
}
