import type { Ctx } from '../../core/context.js';
import { notFound, permission } from '../../core/errors.js';
import { record } from '../../core/events.js';
import { validateFields, type Obj } from '../../core/input.js';
import { schedule } from '../../core/timers.js';
import type { Tx } from '../../store/db.js';
import { ref, resourceUri } from '../../store/repository.js';
import { startJob } from '../jobs/jobs.js';
import { driveFields } from './fields.js';
import { cloneName, type CloneNaming } from './naming.js';
import { BUSY, checkSize, checkStorage, defaultStorageType } from './storage-rules.js';

/**
 * The one drive-clone workflow, used by `drives/<uuid>/action/?do=clone`, `libdrives/<uuid>/action/?do=clone`,
 * `snapshots/<uuid>/action/?do=clone` and server clones: a new drive of the caller's in `cloning_dst` with a
 * `drive_clone` job, finished by a durable timer when the simulated storage has copied the data (the clone
 * holds the source's data; a snapshot's clone, the drive's data when the snapshot was taken).
 */
export interface CloneSource {
  uuid: string;
  kind: 'drives' | 'libdrives' | 'snapshots';
  owner: string | null;
  /** A drive's body: for a snapshot, its drive's, with the snapshot's name. */
  body: Obj;
}

const CATEGORY: Record<CloneSource['kind'], string> = { drives: 'Drives', libdrives: 'Drives', snapshots: 'Snapshots' };

/**
 * The source of a clone, locked: a clone and a delete of the same drive are decided one after the other
 * (the delete then sees the clone's job and refuses). A library drive's uuid gives the library image.
 */
export async function lockCloneSource(tx: Tx, ctx: Ctx, uuid: string): Promise<CloneSource> {
  const row = await ctx.store.resources.lock(tx, 'drives', uuid);
  if (row) return { uuid, kind: 'drives', owner: row.owner_uuid, body: row.body };
  const lib = await ctx.store.resources.get(tx, 'libdrives', uuid);
  if (lib && lib.owner_uuid === null) return { uuid, kind: 'libdrives', owner: null, body: lib.body };
  throw notFound(uuid);
}

/**
 * Clone inside the caller's transaction. Body: optional name, media, affinities, size (never below the
 * source), storage_type. Without a name the caller's clone naming strategy names it.
 */
export async function cloneWithin(
  tx: Tx,
  ctx: Ctx,
  source: CloneSource,
  input: Obj,
  extra: { mountedOn?: string } = {},
): Promise<{ uuid: string; job: string }> {
  const values = validateFields(driveFields, input, 'update');
  const status = source.body.status as string;
  if (source.kind === 'drives' && BUSY.has(status)) throw permission(`Cannot clone drive in state "${status}"`);
  const type = (values.storage_type as string | undefined) ?? (source.body.storage_type as string | null) ?? defaultStorageType(ctx);
  const limits = checkStorage(ctx, type);
  const size = values.size !== undefined ? checkSize(limits, values.size as number, source.body.size as number) : (source.body.size as number);

  const uuid = ctx.ids.uuid();
  const job = ctx.ids.uuid();
  const name = (values.name as string | undefined) ?? (await nameFor(tx, ctx, source.body.name as string));
  const now = ctx.clock.now();
  await ctx.store.resources.insert(tx, now, {
    kind: 'drives',
    uuid,
    owner: ctx.caller.uuid,
    body: {
      affinities: values.affinities ?? source.body.affinities ?? [],
      allow_multimount: source.body.allow_multimount ?? false,
      // Unknown until the copy is made (7 of the 8 recorded clones in cloning_dst answer null; reference §6):
      // true once the clone is ready, as a new drive's once created.
      is_snapshotable: null,
      jobs: [job],
      // Licences stay bound to every copy (reference §6.2): a clone of a licensed drive is licensed too.
      licenses: source.kind === 'libdrives' || source.kind === 'drives' ? ((source.body.licenses as unknown[]) ?? []) : [],
      media: values.media ?? source.body.media,
      meta: source.kind === 'libdrives' ? libraryMeta(source.body) : (source.body.meta ?? {}),
      mounted_on: extra.mountedOn ? [ref('servers', extra.mountedOn)] : [],
      name,
      size,
      snapshots: [],
      status: 'cloning_dst',
      storage_type: type,
    },
  });
  if (source.kind === 'drives') {
    await ctx.sim.storage.copyData(tx, { uuid: source.uuid, size: source.body.size as number }, uuid, size);
    await ctx.store.resources.patch(tx, now, 'drives', source.uuid, (b) => ({ ...b, jobs: [...((b.jobs as string[]) ?? []), job] }));
  }
  // The snapshot's data is copied now: deleting the snapshot (or its drive) mid-clone leaves the clone whole.
  if (source.kind === 'snapshots') await ctx.sim.storage.copySnapshotData(tx, source.uuid, uuid, size);
  await ctx.sim.storage.allocateDrive(tx, uuid);
  const duration = ctx.sim.storage.cloneMs(size);
  await startJob(tx, ctx, ctx.caller.uuid, {
    uuid: job,
    operation: 'drive_clone',
    resources: [resourceUri(source.kind, source.uuid), resourceUri('drives', uuid)],
    durationMs: duration,
  });
  await schedule(tx, ctx, { kind: 'drive.cloned', subject: uuid, inMs: duration, payload: { job, source: source.uuid } });
  if (source.owner)
    await record(tx, ctx, {
      action: 'clone_src',
      category: CATEGORY[source.kind],
      uuid: source.uuid,
      owner: source.owner,
      actor: ctx.caller.uuid,
      details: JSON.stringify({ clone: uuid }),
    });
  await record(tx, ctx, {
    action: 'clone_dst',
    category: 'Drives',
    uuid,
    owner: ctx.caller.uuid,
    actor: ctx.caller.uuid,
    details: JSON.stringify({ source: source.uuid }),
  });
  return { uuid, job };
}

/** Clone in a transaction of its own; answers the new drive's uuid. */
export async function cloneDrive(ctx: Ctx, sourceUuid: string, input: Obj): Promise<string> {
  const { uuid } = await ctx.store.transaction(async (tx) => cloneWithin(tx, ctx, await lockCloneSource(tx, ctx, sourceUuid), input));
  return uuid;
}

/** Library clones carry the image description in meta (reference §1.11). */
function libraryMeta(body: Obj): Obj {
  const keys = ['arch', 'category', 'description', 'distribution', 'image_type', 'install_notes', 'os', 'paid', 'url', 'version'];
  const meta: Obj = {};
  for (const k of keys)
    if (body[k] !== undefined && body[k] !== null)
      meta[k === 'install_notes' ? 'install notes' : k] = Array.isArray(body[k]) ? (body[k] as string[]).join(',') : String(body[k]);
  return meta;
}

/** The caller's clone naming strategy (profile `clone_naming`). */
export async function cloneNaming(tx: Tx, ctx: Ctx): Promise<CloneNaming> {
  const row = await ctx.store.accounts.users.profileOf(tx, ctx.caller.uuid);
  if (!row) throw new Error(`no user ${ctx.caller.uuid}`);
  return ((JSON.parse(row.profile) as Obj).clone_naming ?? 'NONE') as CloneNaming;
}

async function nameFor(tx: Tx, ctx: Ctx, source: string): Promise<string> {
  const strategy = await cloneNaming(tx, ctx);
  if (strategy === 'NONE') return source;
  const stem = source.replace(/(_\d+|-\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2})?)+$/, '');
  const taken = await ctx.store.resources.namesOf(tx, 'drives', ctx.caller.uuid, stem);
  return cloneName(source, strategy, ctx.clock.now(), (n) => taken.has(n));
}
