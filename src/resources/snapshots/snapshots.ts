import type { Ctx } from '../../core/context.js';
import { ApiError, permission, validation } from '../../core/errors.js';
import { record } from '../../core/events.js';
import { f } from '../../core/fields.js';
import { relatedId, type Obj } from '../../core/input.js';
import { storedDecl, type Row, type StoredFilter } from '../../core/stored.js';
import { cancelTimers, schedule, type TimerHandler } from '../../core/timers.js';
import type { Tx } from '../../store/db.js';
import { ref } from '../../store/repository.js';
import { drives } from '../drives/drives.js';
import { BUSY } from '../drives/storage-rules.js';
import { cloneSnapshot } from './clone.js';
import { snapshotsOf, snapshotUsage } from './of-drive.js';

/**
 * Snapshots of drives (spec "Snapshot", reference §7). A snapshot belongs to its drive's owner and is
 * listed by the drive at once; it is `creating` (size unknown) until the simulated storage has taken it
 * (timer `snapshot.created`), then `available`. Its `allocated_size` is what the drive changed since, as
 * the simulated storage counts it (sim/storage.ts), so it grows while a guest writes. Deleting a drive
 * deletes its snapshots (of-drive.ts). Every change records its event (category Snapshots).
 *
 * Locks: drives before snapshots everywhere (a create locks the drive, a delete locks the drive first,
 * a drive's delete locks its snapshots); the account-wide limit is checked under the owner's count lock.
 */
export const snapshotFields = {
  allocated_size: f.integer({ readonly: true, required: true, nullable: true, help: 'Physical size of the snapshot' }),
  drive: f.related({ required: true, schemaDefault: null, help: 'Drive UUID' }),
  meta: f.dict({ schemaDefault: {}, help: 'User defined meta information' }),
  name: f.string({ maxLength: 1024, schemaDefault: null, help: 'Optional human readable name of the snapshot' }),
  owner: f.related({ readonly: true, schemaDefault: null, help: 'Owner of the snapshot' }),
  resource_uri: f.string({ readonly: true, required: true }),
  status: f.string({ readonly: true, required: true, help: 'Status of the snapshot.' }),
  tags: f.relatedMany(),
  timestamp: f.string({ readonly: true, required: true, schemaDefault: null, help: 'Timestamp of the snapshot creation' }),
  uuid: f.string({ readonly: true, required: true, schemaDefault: null, help: 'UUID of the snapshot' }),
};

const CATEGORY = 'Snapshots';

/** `2014-06-05 09:52:53.896622+00:00`: the recorded form (space, microseconds). */
const timestampOf = (d: Date) =>
  d
    .toISOString()
    .replace('T', ' ')
    .replace(/\.(\d{3})Z$/, '.$1000+00:00');
/** `<drive uuid>__2014-06-05__09_53_28` (UTC): the name a snapshot gets when none is given. */
const defaultName = (drive: string, d: Date) => `${drive}__${d.toISOString().slice(0, 10)}__${d.toISOString().slice(11, 19).replace(/:/g, '_')}`;

interface SnapshotLimits {
  max?: number;
  max_per_drive?: number;
}
/**
 * The limits capabilities state. The recorded capabilities (the default configuration) name only `max`;
 * the real service's later capabilities add `max_per_drive: 90` (reference §12), which applies when unnamed.
 */
const MAX_PER_DRIVE = 90;
const limitsOf = (ctx: Ctx): SnapshotLimits => {
  const caps = (ctx.config.capabilities.snapshots ?? {}) as SnapshotLimits;
  return { max: caps.max, max_per_drive: caps.max_per_drive ?? MAX_PER_DRIVE };
};

/**
 * The drive a snapshot is to be taken of, as the caller may use it: an unknown or invisible drive is a
 * 400 on `drive` (no existence leak), a visible one without EDIT a 403 on `drive`.
 */
async function snapshotDrive(tx: Tx, ctx: Ctx, uuid: string): Promise<Row> {
  try {
    const row = await drives.service.authorize(ctx, uuid, 'EDIT', tx);
    if (row.owner_uuid === null) throw permission('A library drive cannot be snapshotted; clone it first', 'drive');
    return row;
  } catch (e) {
    if (e instanceof ApiError && e.type === 'notexist') throw validation('drive', `Drive ${uuid} does not exist`);
    if (e instanceof ApiError && e.type === 'permission' && e.point === null) throw new ApiError('permission', e.message, 'drive');
    throw e;
  }
}

/** Whether the drive may be snapshotted now, and the limits allow one more. */
async function checkSnapshotable(tx: Tx, ctx: Ctx, drive: Row): Promise<void> {
  const status = drive.body.status as string;
  if (BUSY.has(status)) throw new ApiError('permission', `Cannot snapshot drive in state "${status}"`, 'drive');
  if (drive.body.is_snapshotable !== true) throw new ApiError('permission', `Drive ${drive.uuid} is not snapshotable`, 'drive');
  const limits = limitsOf(ctx);
  if (limits.max_per_drive !== undefined && snapshotsOf(drive.body).length >= limits.max_per_drive)
    throw new ApiError('permission', `Drive ${drive.uuid} has ${limits.max_per_drive} snapshots, the most a drive may have`, 'drive');
  const owner = drive.owner_uuid ?? '';
  if (limits.max !== undefined && (await ctx.store.resources.countForLimit(tx, 'snapshots', owner)) >= limits.max)
    throw new ApiError('permission', `The account has ${limits.max} snapshots, the most it may have`, 'snapshots');
}

/** `allocated_size`: null while creating, then what the drive changed since, from the simulated storage. */
async function showSizes(ctx: Ctx, snapshots: Obj[]): Promise<void> {
  const ready = snapshots.filter((s) => s.status !== 'creating');
  const sizes = await ctx.sim.storage.snapshotSizes(
    ctx.store.db,
    ready.map((s) => s.uuid as string),
  );
  for (const s of snapshots) s.allocated_size = s.status === 'creating' ? null : (sizes.get(s.uuid as string) ?? 0);
}

const filters: Record<string, StoredFilter> = {
  // The drive lists its snapshots: an index lookup of the drive, then of each snapshot.
  drive: (_eb, values, ctx) => ctx.store.resources.listedIn('drives', 'snapshots', values),
};

export const snapshots = storedDecl(
  {
    kind: 'snapshots',
    flavour: 'custom',
    fields: snapshotFields,
    // The recorded schema lists PUT on the list; the list PUT itself answers 405 (see the closing note of issue 12).
    listMethods: ['get', 'put', 'delete', 'post'],
    detailMethods: ['get', 'put', 'delete'],
    meter: snapshotUsage,
    unlistedFilters: ['drive'],
    permissions: ['LIST', 'EDIT', 'CLONE', 'DELETE'],
    taggable: true,
    actions: {
      clone: {
        permission: 'CLONE',
        async: true,
        params: ['avoid'],
        answer: { object: 'drives' },
        run: async (ctx, uuid, body, params) =>
          drives.service.get(ctx, await cloneSnapshot(ctx, uuid, body, params.avoid, (tx) => snapshots.service.authorize(ctx, uuid, 'CLONE', tx))),
      },
    },
    timers: {
      'snapshot.created': {
        async run(s, tx, timer) {
          await s.store.resources.patch(tx, s.clock.now(), 'snapshots', timer.subject, (b) => (b.status === 'creating' ? { ...b, status: 'available' } : b));
        },
        async failed(s, tx, timer) {
          await s.store.resources.patch(tx, s.clock.now(), 'snapshots', timer.subject, (b) => ({ ...b, status: 'unavailable' }));
        },
      },
    } satisfies Record<string, TimerHandler>,
  },
  {
    prepare(values, mode) {
      if (values.drive !== undefined) values.drive = relatedId(values.drive, 'drive');
      return mode === 'create' ? { ...values, status: 'creating' } : values;
    },
    // Every drive of the request, locked in one order after the owners' count locks (never the reverse).
    async beforeCreate(tx, ctx, all) {
      const uuids = [...new Set(all.map((v) => v.drive as string))].sort();
      const owners = new Set((await ctx.store.resources.getMany(tx, 'drives', uuids)).map((d) => d.owner_uuid ?? ''));
      for (const owner of [...owners].sort()) await ctx.store.resources.countForLimit(tx, 'snapshots', owner);
      await ctx.store.resources.lockMany(tx, 'drives', uuids);
    },
    async ownerOf(tx, ctx, values) {
      return (await snapshotDrive(tx, ctx, values.drive as string)).owner_uuid ?? '';
    },
    async beforeInsert(tx, ctx, uuid, values) {
      const drive = await snapshotDrive(tx, ctx, values.drive as string);
      await checkSnapshotable(tx, ctx, drive);
      const now = ctx.clock.now();
      return { ...values, name: values.name ?? defaultName(drive.uuid, now), timestamp: timestampOf(now) };
    },
    async afterWrite(tx, ctx, uuid, values, mode, input) {
      const row = (await ctx.store.resources.get(tx, 'snapshots', uuid))!;
      if (mode === 'create') {
        const drive = row.body.drive as string;
        const body = await ctx.store.resources.patch(tx, ctx.clock.now(), 'drives', drive, (b) => ({ ...b, snapshots: [...snapshotsOf(b), uuid] }));
        await ctx.sim.storage.takeSnapshot(tx, { uuid: drive, size: Number(body?.size ?? 0) }, uuid);
        await schedule(tx, ctx, { kind: 'snapshot.created', subject: uuid, inMs: ctx.sim.storage.snapshotMs() });
      }
      const details = mode === 'create' ? JSON.stringify(input) : '';
      await record(tx, ctx, { action: mode, category: CATEGORY, uuid, owner: row.owner_uuid ?? '', actor: ctx.caller.uuid, details });
    },
    async beforeUpdate(_tx, _ctx, row, values) {
      const { drive, ...rest } = values;
      if (drive !== undefined && drive !== row.body.drive) throw validation('drive', 'A snapshot cannot move to another drive');
      return rest;
    },
    // Drives before snapshots: the snapshot's drive is locked first (its `snapshots` list changes).
    async lockBeforeDelete(tx, ctx, uuid) {
      const current = await ctx.store.resources.get(tx, 'snapshots', uuid);
      if (current) await ctx.store.resources.lock(tx, 'drives', current.body.drive as string);
    },
    async beforeDelete(tx, ctx, uuid, row) {
      const drive = row.body.drive as string;
      await ctx.store.resources.patch(tx, ctx.clock.now(), 'drives', drive, (b) => ({ ...b, snapshots: snapshotsOf(b).filter((s) => s !== uuid) }));
      await cancelTimers(tx, uuid);
      await ctx.sim.storage.forgetSnapshots(tx, [uuid]);
      await record(tx, ctx, { action: 'delete', category: CATEGORY, uuid, owner: row.owner_uuid ?? '', actor: ctx.caller.uuid });
    },
    presentStatic: (s) => ({ ...s, allocated_size: null, drive: ref('drives', s.drive as string) }),
    decorate: showSizes,
    filters,
  },
);
