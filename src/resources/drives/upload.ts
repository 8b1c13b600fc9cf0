import type { Ctx } from '../../core/context.js';
import { ApiError, validation } from '../../core/errors.js';
import { record } from '../../core/events.js';
import type { Obj } from '../../core/input.js';
import { cancelTimers } from '../../core/timers.js';
import { drives } from './drives.js';
import { finishUpload, receive } from './data.js';
import { checkStorage, defaultStorageType } from './storage-rules.js';

/**
 * Drives made by an upload: `POST /initupload/` (the chunked and resumable protocols) and the plain
 * `POST drives/upload/` (the image is the body). The drive is made as any drive is (the caller's limits,
 * its create event), then put in `uploading` at the image's exact size: the clients compare the drive's
 * `size` with the file's and refuse a difference, so neither the 16 KiB rounding nor the storage type's
 * minimum size applies to an uploaded image (the type's maximum does).
 */
export interface UploadDecl {
  name?: unknown;
  size?: unknown;
  media?: unknown;
  storage_type?: unknown;
}

const uploadName = (ctx: Ctx) => `Upload_${ctx.clock.now().toISOString().slice(0, 19).replace('T', ' ')}`;

/** The declared image size, checked against the storage type's maximum and the upload limit (before any work). */
function imageSize(ctx: Ctx, input: UploadDecl): { size: number; type: string } {
  const size = typeof input.size === 'string' && /^\d+$/.test(input.size) ? Number(input.size) : input.size;
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size <= 0) throw validation('size', 'The image size must be a positive integer of bytes');
  const type = typeof input.storage_type === 'string' ? input.storage_type : defaultStorageType(ctx);
  const limits = checkStorage(ctx, type);
  if (size > limits.max) throw validation('size', `Size must be at most ${limits.max} bytes`);
  if (size > ctx.config.uploadLimit) throw new ApiError('toolarge', `The image is larger than the upload limit of ${ctx.config.uploadLimit} bytes`, 'size');
  return { size, type };
}

/** Makes the drive an upload writes to: `uploading`, of the image's exact size; answers its uuid. */
export async function initUpload(ctx: Ctx, input: UploadDecl): Promise<string> {
  const { size, type } = imageSize(ctx, input);
  const limits = checkStorage(ctx, type);
  const name = input.name ?? uploadName(ctx);
  const media = input.media ?? 'disk';
  // Made at a size the storage type accepts; the image's own size is set right after.
  const created = Math.max(limits.min, Math.ceil(size / 16384) * 16384);
  const [made] = await drives.service.create(ctx, [{ name, media, size: created, storage_type: type }]);
  const uuid = String(made.uuid);
  await ctx.store.transaction(async (tx) => {
    const row = await ctx.store.resources.lock(tx, 'drives', uuid);
    if (!row) return;
    await cancelTimers(tx, uuid);
    await ctx.store.resources.write(tx, ctx.clock.now(), row, { ...row.body, size, status: 'uploading', is_snapshotable: true });
    await record(tx, ctx, {
      action: 'init_upload',
      category: 'Drives',
      uuid,
      owner: ctx.caller.uuid,
      actor: ctx.caller.uuid,
      details: JSON.stringify({ name, size, media }),
    });
  });
  return uuid;
}

/**
 * The plain upload: a drive of `length` bytes holding `body`. A body that breaks off takes its drive with it
 * (the client never learnt its uuid).
 */
export async function plainUpload(ctx: Ctx, input: UploadDecl, length: number, body: AsyncIterable<Buffer>): Promise<string> {
  const uuid = await initUpload(ctx, { ...input, size: length });
  try {
    await receive(ctx, uuid, 0, length, body, { last: (tx) => finishUpload(tx, ctx, uuid, length) });
  } catch (e) {
    await drives.service.remove(ctx, uuid).catch(() => undefined);
    throw e;
  }
  return uuid;
}

/** The drive as the API shows it. */
export const shownDrive = (ctx: Ctx, uuid: string): Promise<Obj> => drives.service.get(ctx, uuid);
