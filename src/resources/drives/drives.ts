import { driveUsage } from './meter.js';
import type { Ctx, Services } from '../../core/context.js';
import { ApiError, notFound, permission, validation } from '../../core/errors.js';
import { record } from '../../core/events.js';
import { validateFields, type Obj } from '../../core/input.js';
import { storedDecl } from '../../core/stored.js';
import { cancelTimers, pendingTimerPayloads, schedule, type TimerHandler } from '../../core/timers.js';
import { availabilityGroups } from '../placement/availability-groups.js';
import type { Tx } from '../../store/db.js';
import { ref } from '../../store/repository.js';
import { existingJobs, finishJob } from '../jobs/jobs.js';
import { dropSnapshotsOf, showSnapshotSizes, snapshotsOf } from '../snapshots/of-drive.js';
import { libraryAsDrive, libraryDriveAccess } from '../libdrives/library.js';
import { cloneDrive } from './clone.js';
import { uploadChunkLink } from './data.js';
import { driveFields } from './fields.js';
import { BUSY, checkSize, checkStorage, defaultStorageType } from './storage-rules.js';

/**
 * Drives on the simulated storage (reference §6). Status moves: creating -> unmounted (timer);
 * unmounted/mounted -> resizing -> back (timer); a clone is born cloning_dst -> unmounted (timer, with a
 * drive_clone job; see clone.ts). Every change records its event (category Drives) in the same transaction.
 */

const mountedOnOf = (body: Obj) => ((body.mounted_on as { uuid: string }[] | undefined) ?? []).map((m) => m.uuid);

/** Whether any server the drive is mounted on is not stopped (such a drive's size and media are fixed). */
async function mountedOnRunning(tx: Tx, s: Pick<Services, 'store'>, body: Obj): Promise<boolean> {
  const servers = mountedOnOf(body);
  return servers.length > 0 && (await s.store.resources.anyInStatus(tx, 'servers', servers, ['starting', 'running', 'stopping', 'paused', 'unavailable']));
}

const restingStatus = (body: Obj) => (((body.mounted_on as unknown[] | undefined) ?? []).length ? 'mounted' : 'unmounted');

/** A drive as stored, with its runtime object, defaults and job references: depends on this version only. */
function presentStatic(stored: Obj): Obj {
  const { is_snapshotable, ...d } = stored;
  return {
    ...d,
    jobs: ((d.jobs as string[] | undefined) ?? []).map((uuid) => ref('jobs', uuid)),
    runtime: { is_snapshotable: is_snapshotable ?? null, snapshots_allocated_size: 0, storage_type: d.storage_type },
    mounted_on: d.mounted_on ?? [],
    snapshots: snapshotsOf(d).map((uuid) => ref('snapshots', uuid)),
    licenses: d.licenses ?? [],
  };
}

/** What changes without the drive changing: its snapshots' sizes, and which jobs are still alive (they expire). */
async function decorate(ctx: Ctx, drives: Obj[]): Promise<void> {
  await showSnapshotSizes(ctx, drives);
  const withJobs = drives.filter((d) => (d.jobs as { uuid: string }[]).length);
  if (!withJobs.length) return;
  const live = await existingJobs(
    ctx,
    withJobs.flatMap((d) => (d.jobs as { uuid: string }[]).map((j) => j.uuid)),
  );
  for (const d of withJobs) d.jobs = (d.jobs as { uuid: string }[]).filter((j) => live.has(j.uuid));
}

export const drives = storedDecl(
  {
    kind: 'drives',
    flavour: 'custom',
    fields: driveFields,
    listMethods: ['get', 'post', 'delete'],
    detailMethods: ['get', 'put', 'delete'],
    listFields: ['owner', 'resource_uri', 'status', 'uuid'],
    permissions: ['LIST', 'EDIT', 'CLONE', 'ATTACH', 'DELETE'],
    meter: driveUsage,
    taggable: true,
    actions: {
      clone: {
        permission: 'CLONE',
        async: true,
        answer: { objects: 'drives' },
        run: async (ctx, uuid, body) => ({ objects: [await drives.service.get(ctx, await cloneDrive(ctx, uuid, body))] }),
      },
      // The chunked upload protocol (resources/drives/data.ts): where chunk `chunk_number` goes.
      upload_chunk: {
        permission: 'EDIT',
        async: false,
        answer: { schema: { type: 'object', required: ['link'], properties: { link: { type: 'string' } } } },
        run: (ctx, uuid, body) => uploadChunkLink(ctx, uuid, body),
      },
      resize: {
        permission: 'EDIT',
        async: true,
        answer: { objects: 'drives' },
        run: async (ctx, uuid, body) => ({ objects: [await resizeDrive(ctx, uuid, body)] }),
      },
    },
    // Drives sharing a simulated storage node (library drives, ownerless, are on none of the caller's).
    collectionViews: {
      availability_groups: availabilityGroups({
        members: async (ctx) => (await ctx.store.resources.ownedUuids(ctx.store.db, 'drives', ctx.caller.uuid).execute()).map((r) => r.uuid),
        get: (ctx, uuid) => drives.service.get(ctx, uuid),
        placed: (drive) => drive.owner !== null && drive.owner !== undefined,
      }),
    },
    timers: {
      'drive.created': {
        async run(s, tx, timer) {
          await s.store.resources.patch(tx, s.clock.now(), 'drives', timer.subject, (b) =>
            b.status === 'creating' ? { ...b, status: restingStatus(b), is_snapshotable: true } : b,
          );
        },
        async failed(s, tx, timer) {
          await s.store.resources.patch(tx, s.clock.now(), 'drives', timer.subject, (b) => ({ ...b, status: 'unavailable' }));
        },
      },
      'drive.resized': {
        async run(s, tx, timer, payload: { resume?: string; size?: number }) {
          await s.store.resources.patch(tx, s.clock.now(), 'drives', timer.subject, (b) =>
            b.status === 'resizing'
              ? {
                  ...b,
                  // The drive has its new size once resized (timers of older versions carry none: set at once then).
                  ...(payload.size !== undefined ? { size: payload.size } : {}),
                  status: payload.resume && !BUSY.has(payload.resume) ? payload.resume : restingStatus(b),
                }
              : b,
          );
        },
      },
      'drive.cloned': {
        async run(s, tx, timer, payload: { job: string; source?: string }) {
          // A fault injected through the admin plane: the copy fails as a storage failure would.
          if (payload.source && (await s.sim.storage.takeCloneFailure(tx, payload.source))) {
            await s.store.resources.patch(tx, s.clock.now(), 'drives', timer.subject, (b) => ({ ...b, status: 'unavailable' }));
            await finishJob(tx, s, payload.job, 'failed', 'the simulated storage failed to copy the drive (injected fault)');
            return;
          }
          await s.store.resources.patch(tx, s.clock.now(), 'drives', timer.subject, (b) =>
            b.status === 'cloning_dst' ? { ...b, status: restingStatus(b), is_snapshotable: true } : b,
          );
          await finishJob(tx, s, payload.job, 'success');
        },
        async failed(s, tx, timer, payload: { job: string }, error) {
          await s.store.resources.patch(tx, s.clock.now(), 'drives', timer.subject, (b) => ({ ...b, status: 'unavailable' }));
          await finishJob(tx, s, payload.job, 'failed', error.message);
        },
      },
    } satisfies Record<string, TimerHandler>,
  },
  {
    prepare(values, mode) {
      delete values.licenses; // licenses come with library images and cannot be edited
      if (mode === 'update') return values;
      // A new drive: the simulated storage starts creating it.
      return { ...values, status: 'creating', is_snapshotable: null, jobs: [], mounted_on: [], snapshots: [], licenses: [] };
    },
    async afterWrite(tx, ctx, uuid, values, mode, input) {
      if (mode === 'create') {
        const type = (values.storage_type as string | undefined) ?? defaultStorageType(ctx);
        const size = checkSize(checkStorage(ctx, type), values.size as number);
        await ctx.store.resources.patch(tx, ctx.clock.now(), 'drives', uuid, (b) => ({ ...b, storage_type: type, size }));
        await ctx.sim.storage.allocateDrive(tx, uuid);
        await schedule(tx, ctx, { kind: 'drive.created', subject: uuid, inMs: ctx.sim.storage.createMs() });
      }
      const owner = (await ctx.store.resources.get(tx, 'drives', uuid))?.owner_uuid ?? '';
      // `details` of a create is the call's parameters (spec "Events", rule 1).
      await record(tx, ctx, { action: mode, category: 'Drives', uuid, owner, actor: ctx.caller.uuid, details: mode === 'create' ? JSON.stringify(input) : '' });
    },
    async beforeUpdate(tx, ctx, row, values) {
      const next = { ...values };
      delete next.storage_type; // fixed after creation
      if (await mountedOnRunning(tx, ctx, row.body)) {
        // Mounted on a running server only name, meta, tags and allow_multimount change (reference §1.4).
        delete next.size;
        delete next.media;
        return next;
      }
      if (next.size !== undefined) {
        const size = checkSize(checkStorage(ctx, row.body.storage_type as string), next.size as number, row.body.size as number);
        delete next.size; // the same size, or the new one once resized (beginResize)
        if (size !== row.body.size) Object.assign(next, await beginResize(tx, ctx, row.uuid, row.body, size));
      }
      return next;
    },
    // Servers before drives: the servers this drive is mounted on are locked first (see stored.ts).
    async lockBeforeDelete(tx, ctx, uuid) {
      const current = await ctx.store.resources.get(tx, 'drives', uuid);
      if (current) await ctx.store.resources.lockMany(tx, 'servers', mountedOnOf(current.body));
    },
    async beforeDelete(tx, ctx, uuid, row) {
      // "Drives attached to stopped servers may be deleted" (reference §6): they are detached from those
      // servers in the same transaction, so no server is left listing a drive that is gone.
      if (await mountedOnRunning(tx, ctx, row.body)) throw permission('Cannot delete a drive mounted on a running server');
      // A clone target may go mid-clone (its job fails); a clone source may not until the copy is done.
      const target = row.body.status === 'cloning_dst';
      if (!target && (await ctx.store.resources.anyInStatus(tx, 'jobs', (row.body.jobs as string[] | undefined) ?? [], ['started'])))
        throw new ApiError('permission', 'The drive is the source of a clone in progress; delete it when the clone finishes');
      for (const t of await pendingTimerPayloads(tx, uuid, 'drive.cloned'))
        await finishJob(tx, ctx, (t as { job: string }).job, 'failed', 'target drive deleted');
      const now = ctx.clock.now();
      for (const server of await ctx.store.resources.lockMany(tx, 'servers', mountedOnOf(row.body)))
        await ctx.store.resources.write(tx, now, server, {
          ...server.body,
          drives: ((server.body.drives as { drive: string }[]) ?? []).filter((a) => a.drive !== uuid),
        });
      await dropSnapshotsOf(tx, ctx, row);
      await cancelTimers(tx, uuid);
      await ctx.sim.storage.forgetDrive(tx, uuid);
      await record(tx, ctx, { action: 'delete', category: 'Drives', uuid, owner: row.owner_uuid ?? ctx.caller.uuid, actor: ctx.caller.uuid });
    },
    presentStatic,
    decorate,
    // Library drives resolve at /drives/<uuid>/ (never in lists); anyone may clone them from here too.
    fallbackGet: (ctx, uuid) => libraryAsDrive(ctx, uuid, defaultStorageType(ctx)),
    access: (ctx, uuid, perm, row, db) => libraryDriveAccess(ctx, uuid, perm, row, db),
  },
);

/**
 * Start a resize: status resizing until the timer restores the previous status and sets the new size. Until
 * then the drive shows the size it has (the recorded PUT and do=resize answers show `resizing` with the size
 * before: drive_resize, drive_resize_action).
 */
async function beginResize(tx: Tx, ctx: Ctx, uuid: string, body: Obj, size: number): Promise<Obj> {
  if (BUSY.has(body.status as string)) throw permission(`Cannot resize drive in state "${body.status}"`);
  await schedule(tx, ctx, { kind: 'drive.resized', subject: uuid, inMs: ctx.sim.storage.resizeMs(), payload: { resume: body.status, size } });
  return { status: 'resizing' };
}

/**
 * `action/?do=resize`: a full definition is expected; unlike PUT it is an error (403) to resize a drive
 * mounted on a running server instead of a silent no-op. Answers the drive in `resizing`.
 */
async function resizeDrive(ctx: Ctx, uuid: string, input: Obj): Promise<Obj> {
  const values = validateFields(driveFields, input, 'update');
  if (values.size === undefined) throw validation('size', 'This field is required');
  await ctx.store.transaction(async (tx) => {
    const row = await ctx.store.resources.lock(tx, 'drives', uuid);
    if (!row) throw notFound(uuid);
    if (await mountedOnRunning(tx, ctx, row.body)) throw permission('Cannot resize a drive mounted on a running server');
    const size = checkSize(checkStorage(ctx, row.body.storage_type as string), values.size as number, row.body.size as number);
    const change = size === row.body.size ? {} : await beginResize(tx, ctx, uuid, row.body, size);
    const { name, meta, media, allow_multimount, affinities } = values;
    const edits = Object.fromEntries(Object.entries({ name, meta, media, allow_multimount, affinities }).filter(([, v]) => v !== undefined));
    await ctx.store.resources.write(tx, ctx.clock.now(), row, { ...row.body, ...edits, ...change });
    await record(tx, ctx, {
      action: 'update',
      category: 'Drives',
      uuid,
      owner: row.owner_uuid ?? '',
      actor: ctx.caller.uuid,
      details: JSON.stringify({ size }),
    });
  });
  return drives.service.get(ctx, uuid);
}
