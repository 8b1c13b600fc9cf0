import { audit } from '../../core/audit.js';
import type { Ctx, Services } from '../../core/context.js';
import { ApiError, permission, validation } from '../../core/errors.js';
import { validateFields, type Obj } from '../../core/input.js';
import { storedDecl, type Row } from '../../core/stored.js';
import { cancelTimers, schedule, type TimerHandler } from '../../sim/scheduler.js';
import type { Tx } from '../../store/db.js';
import { existingJobs, finishJob, startJob } from '../jobs/jobs.js';
import { driveFields } from './fields.js';
import { cloneName, type CloneNaming } from './naming.js';
import { libraryAsDrive, libraryDriveAccess, librarySource } from '../libdrives/library.js';

/**
 * Drives on the simulated storage (reference §6). Status moves: creating -> unmounted (timer);
 * unmounted/mounted -> resizing -> back (timer); a clone is born cloning_dst -> unmounted (timer, with a
 * drive_clone job). Every change writes its audit entry (category Drives) in the same transaction.
 */
const BUSY = new Set(['creating', 'cloning_dst', 'resizing']);
const GIB = 1024 ** 3;

/** The backend allocates in 16 KiB units: sizes are rounded up (a recorded clone shows it). */
export const roundSize = (size: number) => Math.ceil(size / 16384) * 16384;

interface SizeLimits {
  min: number;
  max: number;
}

/** Storage types this location offers and their size limits, from the capabilities in config. */
function storageLimits(s: Services, type: string): SizeLimits | undefined {
  const drives = (s.config.capabilities.drives ?? {}) as Record<string, { size?: SizeLimits; min_size?: number; max_size?: number }>;
  const t = drives[type];
  if (!t) return undefined;
  return { min: t.size?.min ?? t.min_size ?? 0, max: t.size?.max ?? t.max_size ?? Number.MAX_SAFE_INTEGER };
}

export function defaultStorageType(s: Services): string {
  const caps = s.config.capabilities as { default_storage_type?: string; drives?: Record<string, unknown> };
  return caps.default_storage_type ?? (caps.drives && 'dssd' in caps.drives ? 'dssd' : Object.keys(caps.drives ?? {})[0] ?? 'dssd');
}

function checkStorage(s: Services, type: string): SizeLimits {
  const limits = storageLimits(s, type);
  if (!limits) throw validation('storage_type', `Storage type ${type} is not offered here; offered: ${Object.keys(s.config.capabilities.drives ?? {}).join(', ')}`);
  return limits;
}

function checkSize(limits: SizeLimits, size: number, atLeast = 0): number {
  const rounded = roundSize(size);
  if (rounded < limits.min || rounded > limits.max)
    throw validation('size', `Size must be between ${limits.min} and ${limits.max} bytes`);
  if (rounded < atLeast) throw validation('size', `Size cannot be smaller than the current ${atLeast} bytes`);
  return rounded;
}

/** Whether any server the drive is mounted on is running (such a drive's size and media are fixed). */
async function mountedOnRunning(tx: Tx, body: Obj): Promise<boolean> {
  const servers = ((body.mounted_on as { uuid: string }[] | undefined) ?? []).map((m) => m.uuid);
  if (!servers.length) return false;
  const running = await tx.selectFrom('resources').select('uuid').where('kind', '=', 'servers').where('uuid', 'in', servers).where('status', '!=', 'stopped').executeTakeFirst();
  return running !== undefined;
}

const restingStatus = (body: Obj) => (((body.mounted_on as unknown[] | undefined) ?? []).length ? 'mounted' : 'unmounted');

/** Reference objects, runtime and live job refs for a page of drives. */
async function decorate(ctx: Ctx, drives: Obj[]): Promise<void> {
  const live = await existingJobs(ctx, drives.flatMap((d) => (d.jobs as string[] | undefined) ?? []));
  for (const d of drives) {
    d.jobs = ((d.jobs as string[] | undefined) ?? []).filter((j) => live.has(j)).map((uuid) => ({ resource_uri: `/api/2.0/jobs/${uuid}/`, uuid }));
    d.runtime = { is_snapshotable: d.is_snapshotable ?? null, snapshots_allocated_size: 0, storage_type: d.storage_type };
    delete d.is_snapshotable;
    d.mounted_on ??= [];
    d.snapshots ??= [];
    d.licenses ??= [];
  }
}

export const drives = storedDecl(
  {
    shape: 'collection',
    kind: 'drives',
    flavour: 'custom',
    fields: driveFields,
    defaultLimit: 20,
    listMethods: ['get', 'post', 'delete'],
    detailMethods: ['get', 'put', 'delete'],
    listFields: ['owner', 'resource_uri', 'status', 'uuid'],
    filtering: { name: 'exact', name__contains: 'exact', tag: 'exact', uuid: 'exact' },
    permissions: ['LIST', 'EDIT', 'CLONE', 'ATTACH', 'DELETE'],
    taggable: true,
    actions: {
      clone: { permission: 'CLONE', run: async (ctx, uuid, body) => ({ status: 202, body: { objects: [await cloneDrive(ctx, uuid, body)] } }) },
      resize: { permission: 'EDIT', run: async (ctx, uuid, body) => ({ status: 202, body: { objects: [await resizeDrive(ctx, uuid, body)] } }) },
    },
  },
  {
    prepare(values, mode) {
      delete values.licenses; // licenses come with library images and cannot be edited
      if (mode === 'update') return values;
      // A new drive: the simulator starts creating it.
      return { ...values, status: 'creating', is_snapshotable: null, jobs: [], mounted_on: [], snapshots: [], licenses: [], _written: 0 };
    },
    async afterWrite(tx, ctx, uuid, values, mode, input) {
      if (mode === 'create') {
        const type = (values.storage_type as string | undefined) ?? defaultStorageType(ctx);
        const size = checkSize(checkStorage(ctx, type), values.size as number);
        await drives.service.patch(tx, ctx, uuid, (b) => ({ ...b, storage_type: type, size }));
        await schedule(tx, ctx, { kind: 'drive.created', subject: uuid, inMs: ctx.config.delays['drive.create'] });
      }
      // `details` of a create is the call's parameters (spec "Events", rule 1).
      const details = mode === 'create' ? JSON.stringify(input) : '';
      await audit(tx, ctx, { action: mode, category: 'Drives', uuid, owner: await ownerOf(tx, uuid), actor: ctx.caller.uuid, details });
    },
    async beforeUpdate(tx, ctx, row, values) {
      const body = JSON.parse(row.body) as Obj;
      const next = { ...values };
      delete next.storage_type; // fixed after creation
      if (await mountedOnRunning(tx, body)) {
        // Mounted on a running server only name, meta, tags and allow_multimount change (reference §1.4).
        delete next.size;
        delete next.media;
        return next;
      }
      if (next.size !== undefined) {
        const size = checkSize(checkStorage(ctx, body.storage_type as string), next.size as number, body.size as number);
        if (size === body.size) delete next.size;
        else Object.assign(next, await beginResize(tx, ctx, row.uuid, body, size));
      }
      return next;
    },
    async beforeDelete(tx, ctx, uuid, row) {
      const body = JSON.parse(row.body) as Obj;
      if (await mountedOnRunning(tx, body)) throw permission('Cannot delete a drive mounted on a running server');
      const cloning = await tx
        .selectFrom('timers')
        .select('id')
        .where('kind', '=', 'drive.cloned')
        .where('payload', 'like', `%"source":"${uuid}"%`)
        .executeTakeFirst();
      if (cloning) throw new ApiError('permission', 'The drive is the source of a clone in progress; delete it when the clone finishes');
      // A clone target deleted mid-clone: its job fails instead of hanging.
      const timers = await tx.selectFrom('timers').select(['kind', 'payload']).where('subject', '=', uuid).execute();
      for (const t of timers) if (t.kind === 'drive.cloned') await finishJob(tx, ctx, JSON.parse(t.payload).job, 'failed', 'target drive deleted');
      await cancelTimers(tx, uuid);
      await audit(tx, ctx, { action: 'delete', category: 'Drives', uuid, owner: row.owner_uuid ?? ctx.caller.uuid, actor: ctx.caller.uuid });
    },
    decorate,
    // Library drives resolve at /drives/<uuid>/ (never in lists); anyone may clone them from here too.
    fallbackGet: (ctx, uuid) => libraryAsDrive(ctx, uuid, defaultStorageType(ctx)),
    access: (_ctx, uuid, perm, row, db) => libraryDriveAccess(uuid, perm, row, db),
  },
);

async function ownerOf(tx: Tx, uuid: string): Promise<string> {
  const row = await tx.selectFrom('resources').select('owner_uuid').where('kind', '=', 'drives').where('uuid', '=', uuid).executeTakeFirstOrThrow();
  return row.owner_uuid ?? '';
}

/** Start a resize: status resizing until the timer restores the previous status. */
async function beginResize(tx: Tx, ctx: Ctx, uuid: string, body: Obj, size: number): Promise<Obj> {
  if (BUSY.has(body.status as string)) throw permission(`Cannot resize drive in state "${body.status}"`);
  await schedule(tx, ctx, { kind: 'drive.resized', subject: uuid, inMs: ctx.config.delays['drive.resize'], payload: { resume: body.status } });
  return { size, status: 'resizing' };
}

/**
 * `action/?do=resize`: a full definition is expected; unlike PUT it is an error (403) to resize a drive
 * mounted on a running server instead of a silent no-op. Answers the drive in `resizing`.
 */
async function resizeDrive(ctx: Ctx, uuid: string, input: Obj): Promise<Obj> {
  const values = validateFields(driveFields, input, 'update');
  if (values.size === undefined) throw validation('size', 'This field is required');
  await ctx.store.transaction(async (tx) => {
    const row = (await tx.selectFrom('resources').selectAll().where('kind', '=', 'drives').where('uuid', '=', uuid).executeTakeFirstOrThrow()) as Row;
    const body = JSON.parse(row.body) as Obj;
    if (await mountedOnRunning(tx, body)) throw permission('Cannot resize a drive mounted on a running server');
    const size = checkSize(checkStorage(ctx, body.storage_type as string), values.size as number, body.size as number);
    const change = size === body.size ? {} : await beginResize(tx, ctx, uuid, body, size);
    const { name, meta, media, allow_multimount, affinities } = values;
    const edits = Object.fromEntries(Object.entries({ name, meta, media, allow_multimount, affinities }).filter(([, v]) => v !== undefined));
    await drives.service.patch(tx, ctx, uuid, (b) => ({ ...b, ...edits, ...change }));
    await audit(tx, ctx, { action: 'update', category: 'Drives', uuid, owner: row.owner_uuid ?? '', actor: ctx.caller.uuid, details: JSON.stringify({ size }) });
  });
  return drives.service.get(ctx, uuid);
}

/** Milliseconds a clone of `size` bytes takes in the simulator. */
const cloneDuration = (s: Services, size: number) => s.config.delays['drive.clone'] + s.config.delays['drive.clone.per_gib'] * Math.ceil(size / GIB);

export interface CloneSource {
  uuid: string;
  kind: 'drives' | 'libdrives';
  owner: string | null;
  body: Obj;
}

/**
 * Clone a drive (or a library drive) into the caller's account: a new drive in cloning_dst with a
 * drive_clone job, finished by a durable timer. Body: optional name, media, affinities, size (never below
 * the source), storage_type. Without a name the caller's clone naming strategy names it.
 */
export async function cloneFrom(ctx: Ctx, source: CloneSource, input: Obj): Promise<Obj> {
  const { uuid } = await ctx.store.transaction((tx) => cloneWithin(tx, ctx, source, input));
  return drives.service.get(ctx, uuid);
}

/** The clone itself, inside the caller's transaction (a server clone clones several drives in one). */
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
  await drives.service.insert(tx, ctx, uuid, ctx.caller.uuid, {
    affinities: values.affinities ?? source.body.affinities ?? [],
    allow_multimount: source.body.allow_multimount ?? false,
    is_snapshotable: true,
    jobs: [job],
    licenses: source.kind === 'libdrives' ? ((source.body.licenses as unknown[]) ?? []) : [],
    media: values.media ?? source.body.media,
    meta: source.kind === 'libdrives' ? libraryMeta(source.body) : (source.body.meta ?? {}),
    mounted_on: extra.mountedOn ? [{ resource_uri: `/api/2.0/servers/${extra.mountedOn}/`, uuid: extra.mountedOn }] : [],
    name,
    size,
    snapshots: [],
    status: 'cloning_dst',
    storage_type: type,
    _written: source.body._written ?? 0,
  });
  if (source.kind === 'drives') await drives.service.patch(tx, ctx, source.uuid, (b) => ({ ...b, jobs: [...((b.jobs as string[]) ?? []), job] }));
  const duration = cloneDuration(ctx, size);
  await startJob(tx, ctx, ctx.caller.uuid, {
    uuid: job,
    operation: 'drive_clone',
    resources: [`/api/2.0/${source.kind}/${source.uuid}/`, `/api/2.0/drives/${uuid}/`],
    durationMs: duration,
  });
  await schedule(tx, ctx, { kind: 'drive.cloned', subject: uuid, inMs: duration, payload: { job, source: source.uuid } });
  if (source.owner) await audit(tx, ctx, { action: 'clone_src', category: 'Drives', uuid: source.uuid, owner: source.owner, actor: ctx.caller.uuid, details: JSON.stringify({ clone: uuid }) });
  await audit(tx, ctx, { action: 'clone_dst', category: 'Drives', uuid, owner: ctx.caller.uuid, actor: ctx.caller.uuid, details: JSON.stringify({ source: source.uuid }) });
  return { uuid, job };
}

/** Library clones carry the image description in meta (reference §1.11). */
function libraryMeta(body: Obj): Obj {
  const keys = ['arch', 'category', 'description', 'distribution', 'image_type', 'install_notes', 'os', 'paid', 'url', 'version'];
  const meta: Obj = {};
  for (const k of keys) if (body[k] !== undefined && body[k] !== null) meta[k === 'install_notes' ? 'install notes' : k] = Array.isArray(body[k]) ? (body[k] as string[]).join(',') : String(body[k]);
  return meta;
}

async function nameFor(tx: Tx, ctx: Ctx, source: string): Promise<string> {
  const profile = await tx.selectFrom('users').select('profile').where('uuid', '=', ctx.caller.uuid).executeTakeFirstOrThrow();
  const strategy = ((JSON.parse(profile.profile) as Obj).clone_naming ?? 'NONE') as CloneNaming;
  if (strategy === 'NONE') return source;
  const stem = source.replace(/(_\d+|-\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2})?)+$/, '');
  const names = await tx
    .selectFrom('resources')
    .select('name')
    .where('kind', '=', 'drives')
    .where('owner_uuid', '=', ctx.caller.uuid)
    .where(ctx.store.like('name', stem, { prefix: true }))
    .execute();
  const taken = new Set(names.map((n) => n.name));
  return cloneName(source, strategy, ctx.clock.now(), (n) => taken.has(n));
}

async function cloneDrive(ctx: Ctx, uuid: string, input: Obj): Promise<Obj> {
  const row = (await ctx.store.db.selectFrom('resources').selectAll().where('kind', '=', 'drives').where('uuid', '=', uuid).executeTakeFirst()) as Row | undefined;
  if (!row) return cloneFrom(ctx, await librarySource(ctx.store.db, uuid), input); // a library drive's uuid
  return cloneFrom(ctx, { uuid, kind: 'drives', owner: row.owner_uuid, body: JSON.parse(row.body) }, input);
}

/** The simulator's side of drives: operations completing when their timers fall due. */
export const driveTimers: Record<string, TimerHandler> = {
  'drive.created': {
    async run(s, tx, timer) {
      await drives.service.patch(tx, s, timer.subject, (b) => (b.status === 'creating' ? { ...b, status: restingStatus(b), is_snapshotable: true } : b));
    },
    async failed(s, tx, timer) {
      await drives.service.patch(tx, s, timer.subject, (b) => ({ ...b, status: 'unavailable' }));
    },
  },
  'drive.resized': {
    async run(s, tx, timer, payload: { resume?: string }) {
      await drives.service.patch(tx, s, timer.subject, (b) => (b.status === 'resizing' ? { ...b, status: payload.resume && !BUSY.has(payload.resume) ? payload.resume : restingStatus(b) } : b));
    },
  },
  'drive.cloned': {
    async run(s, tx, timer, payload: { job: string }) {
      await drives.service.patch(tx, s, timer.subject, (b) => (b.status === 'cloning_dst' ? { ...b, status: restingStatus(b) } : b));
      await finishJob(tx, s, payload.job, 'success');
    },
    async failed(s, tx, timer, payload: { job: string }, error) {
      await drives.service.patch(tx, s, timer.subject, (b) => ({ ...b, status: 'unavailable' }));
      await finishJob(tx, s, payload.job, 'failed', error.message);
    },
  },
};
