import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Ctx, Services } from '../../core/context.js';
import { ApiError, notFound, permission, validation } from '../../core/errors.js';
import { record } from '../../core/events.js';
import type { Obj } from '../../core/input.js';
import type { Tx } from '../../store/db.js';
import type { Resource } from '../../store/repository.js';
import { BUSY } from './storage-rules.js';

/**
 * Drive data over HTTP, the service side (the protocols' routes are http/drive-data.ts; the bytes live on
 * the simulated storage, services.sim.storage, as content-addressed blocks):
 * - `receive` writes a stream of bytes to a drive in block-aligned batches of BATCH bytes, each its own
 *   transaction under the drive's row lock: memory stays one batch whatever the image, what was
 *   acknowledged is committed (a chunk is recorded as arrived in the transaction of its last bytes), and
 *   other requests get their turn between batches (a batch's transaction is short: 1 MiB, not the body).
 * - A drive being written by an upload is `uploading` (reference §6.3); it goes back to `unmounted`
 *   (`mounted` when attached) once every byte of its size has arrived, and is busy meanwhile (no clone,
 *   resize or snapshot).
 * - Chunked and resumable uploads record each chunk by where it starts in the image, so both protocols
 *   (chunks numbered from 0 by `upload_chunk`, from 1 by resumable.js) resume from the same record.
 */
const BATCH = 1024 * 1024;

const restingStatus = (body: Obj) => (((body.mounted_on as unknown[] | undefined) ?? []).length ? 'mounted' : 'unmounted');

/** Running server states: a drive mounted on one takes no upload (its guest owns the bytes). */
const RUNNING = ['starting', 'running', 'stopping', 'paused', 'unavailable'];

/**
 * The drive an upload writes to, locked: it must be there (404), not busy with another storage operation
 * (403), and not mounted on a running server (403). Permissions were checked by the route (EDIT).
 */
export async function lockForUpload(tx: Tx, s: Pick<Services, 'store'>, uuid: string): Promise<Resource> {
  const row = await s.store.resources.lock(tx, 'drives', uuid);
  if (!row) throw notFound(uuid);
  const status = row.body.status as string;
  if (status !== 'uploading' && BUSY.has(status)) throw permission(`Cannot upload to drive in state "${status}"`);
  const servers = ((row.body.mounted_on as { uuid: string }[] | undefined) ?? []).map((m) => m.uuid);
  if (servers.length && (await s.store.resources.anyInStatus(tx, 'servers', servers, RUNNING)))
    throw permission('Cannot upload to a drive mounted on a running server');
  return row;
}

/** Puts a drive in `uploading` (its first chunk, or an upload's start). */
async function markUploading(tx: Tx, ctx: Ctx, row: Resource): Promise<void> {
  if (row.body.status !== 'uploading') await ctx.store.resources.write(tx, ctx.clock.now(), row, { ...row.body, status: 'uploading' });
}

/**
 * The upload is whole: the drive rests again (unmounted, or mounted when attached; the chunk record stays, so
 * a client resuming a finished upload finds every chunk there and sends none),
 * and the audit log says how many bytes arrived.
 */
export async function finishUpload(tx: Tx, ctx: Ctx, uuid: string, bytes: number): Promise<void> {
  const row = await ctx.store.resources.get(tx, 'drives', uuid);
  if (!row) return;
  await ctx.store.resources.patch(tx, ctx.clock.now(), 'drives', uuid, (b) => (b.status === 'uploading' ? { ...b, status: restingStatus(b) } : b));
  await record(tx, ctx, {
    action: 'update',
    category: 'Drives',
    uuid,
    owner: row.owner_uuid ?? '',
    actor: ctx.caller.uuid,
    details: JSON.stringify({ upload: 'complete', bytes }),
  });
}

/** What runs in a write's transactions: `each` in every batch's before it writes, `last` in the last batch's. */
export interface ReceiveHooks {
  each?: (tx: Tx) => Promise<void>;
  last?: (tx: Tx) => Promise<void>;
}

/**
 * Writes `length` bytes from `body` at `offset` of a drive, a batch per transaction. `last` runs in the
 * transaction of the last batch (a chunk's record; the end of a plain upload). A body that brings more or
 * fewer bytes than `length` is refused (what arrived before stays written: the drive is resumable). A piece
 * of the body larger than a batch is cut into batches, and the event loop gets a turn after each batch: a
 * large body (a whole resumable chunk) does not hold every other request back.
 */
export async function receive(
  ctx: Ctx,
  uuid: string,
  offset: number,
  length: number,
  body: Iterable<Buffer> | AsyncIterable<Buffer | string>,
  { each, last }: ReceiveHooks = {},
): Promise<void> {
  const storage = ctx.sim.storage;
  const block = storage.blockSize();
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let at = offset; // where `pending` starts
  let seen = 0;
  const commit = async (bytes: Buffer, final: boolean) => {
    const write = storage.prepareWrite(at, bytes);
    await ctx.store.transaction(async (tx) => {
      const row = await lockForUpload(tx, ctx, uuid);
      if (at + bytes.length > Number(row.body.size)) throw validation('size', `The upload goes past the drive's size of ${String(row.body.size)} bytes`);
      if (each) await each(tx);
      await markUploading(tx, ctx, row);
      await storage.writeData(tx, { uuid, size: Number(row.body.size) }, write);
      if (final && last) await last(tx);
    });
    at += bytes.length;
    await turn();
  };
  for await (const piece of brokenOffAsError(body, () => seen)) {
    const whole = typeof piece === 'string' ? Buffer.from(piece) : piece;
    seen += whole.length;
    if (seen > length) throw validation('Content-Length', `The body has more than the ${length} bytes declared`);
    for (let from = 0; from < whole.length; from += BATCH) {
      const buf = whole.subarray(from, from + BATCH);
      pending.push(buf);
      pendingBytes += buf.length;
      if (pendingBytes < BATCH) continue;
      // Cut at a block boundary of the drive: the next batch starts a block of its own (no merge needed).
      const all = Buffer.concat(pending);
      const cut = Math.floor((at + all.length) / block) * block - at;
      if (cut <= 0) continue;
      await commit(all.subarray(0, cut), false);
      pending = [all.subarray(cut)];
      pendingBytes = all.length - cut;
    }
  }
  if (seen < length) throw validation('Content-Length', `The body ended after ${seen} of the ${length} bytes declared`);
  await commit(Buffer.concat(pending), true);
}

/** Lets the requests that waited meanwhile (timers, sockets) run before the next batch. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A body whose client went away mid-way ends in a 400 of the API (what arrived stays written), not a 500. */
async function* brokenOffAsError<T>(body: Iterable<T> | AsyncIterable<T>, seen: () => number): AsyncGenerator<T> {
  try {
    yield* body;
  } catch (e) {
    if (e instanceof ApiError) throw e;
    throw validation(null, `The body broke off after ${seen()} bytes (${(e as Error).message})`);
  }
}

/** Chunks of an upload as both protocols number them: the chunk's start and its bytes (the last is bigger). */
export interface ChunkPlace {
  offset: number;
  size: number;
}

/**
 * Chunk `index` (from 0) of an image of `total` bytes in chunks of `chunkSize`: pycloudsigma's clients
 * send floor(total / chunkSize) chunks (one when the image is smaller), the last one taking the rest.
 */
export function chunkPlace(total: number, chunkSize: number, index: number, point = 'chunk_number'): ChunkPlace {
  if (!Number.isSafeInteger(chunkSize) || chunkSize <= 0) throw validation('chunk_size', 'The chunk size must be a positive integer');
  const count = Math.max(1, Math.floor(total / chunkSize));
  if (!Number.isSafeInteger(index) || index < 0 || index >= count)
    throw validation(point, `An image of ${total} bytes in chunks of ${chunkSize} has chunks 0 to ${count - 1} (counted from 0)`);
  const offset = index * chunkSize;
  return { offset, size: index === count - 1 ? total - offset : chunkSize };
}

/**
 * A chunk arrived (in the transaction of its last bytes). When the chunks that arrived cover the whole
 * drive, the upload is finished in the same transaction.
 */
export async function chunkArrived(tx: Tx, ctx: Ctx, uuid: string, place: ChunkPlace): Promise<void> {
  await ctx.store.data.chunkArrived(tx, uuid, place.offset, place.size);
  const row = await ctx.store.resources.get(tx, 'drives', uuid);
  const size = Number(row?.body.size ?? 0);
  let covered = 0;
  for (const [offset, bytes] of await ctx.store.data.chunks(tx, uuid)) {
    if (offset > covered) break;
    covered = Math.max(covered, offset + bytes);
  }
  if (covered >= size) await finishUpload(tx, ctx, uuid, size);
}

/** The refusal of a chunk that has arrived (what `upload_chunk` answers for it, and its link once it is used). */
export const alreadyUploaded = (number: number) => new ApiError('range', `Chunk ${number} is already uploaded`);

/**
 * A chunk's bytes written in its place, a batch per transaction, recorded as arrived in the last one. With
 * `once` (the chunk's number, as its protocol counts), a chunk that has arrived is not written again (416),
 * checked in every batch's transaction: of two writers of one chunk, the one that finishes second stops there.
 */
export async function receiveChunk(ctx: Ctx, uuid: string, place: ChunkPlace, body: AsyncIterable<Buffer>, once?: { number: number }): Promise<void> {
  const each = once
    ? async (tx: Tx) => {
        if ((await ctx.store.data.chunkAt(tx, uuid, place.offset)) === place.size) throw alreadyUploaded(once.number);
      }
    : undefined;
  await receive(ctx, uuid, place.offset, place.size, body, { each, last: (tx) => chunkArrived(tx, ctx, uuid, place) });
}

/** Whether the chunk at `place` has arrived (the resume check of both protocols). */
export async function hasChunk(ctx: Ctx, uuid: string, place: ChunkPlace): Promise<boolean> {
  return (await ctx.store.data.chunkAt(ctx.store.db, uuid, place.offset)) === place.size;
}

/**
 * A count as a client sends it: a JSON integer or a string of decimal digits. Anything else (`[0]`, `"0x1"`,
 * `"1e0"`, `" 1"`, `1.5`), which a plain Number() would turn into some number, is a 400.
 */
export function wholeNumber(value: unknown, point: string): number {
  if (value === undefined || value === null || value === '') throw validation(point, 'This field is required');
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,16}$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < 0) throw validation(point, `${point} must be a non-negative integer in decimal digits`);
  return n;
}

/** Upload links stay valid this long (reference §6.1: "link valid 5 min"). */
const LINK_MS = 5 * 60_000;
const SECRET_KEY = 'upload_link_secret';

async function linkSecret(s: Pick<Services, 'store'>): Promise<Buffer> {
  let value = await s.store.settings.get(s.store.db, SECRET_KEY);
  if (value === undefined) {
    await s.store.settings.insertIfAbsent(s.store.db, SECRET_KEY, randomBytes(32).toString('hex'));
    value = (await s.store.settings.get(s.store.db, SECRET_KEY))!;
  }
  return Buffer.from(value, 'hex');
}

const signed = (secret: Buffer, text: string) => createHmac('sha256', secret).update(text).digest('hex');

/**
 * `drives/<uuid>/action/?do=upload_chunk` `{chunk_number, chunk_size}`: the link the chunk goes to, or
 * 416 when that chunk has already arrived (the chunked client skips it). The link is relative (the client
 * puts it on the API's host), valid 5 minutes and signed: it needs no credentials.
 */
export async function uploadChunkLink(ctx: Ctx, uuid: string, body: Obj): Promise<{ link: string }> {
  const number = wholeNumber(body.chunk_number, 'chunk_number');
  const chunkSize = wholeNumber(body.chunk_size, 'chunk_size');
  const row = await ctx.store.transaction((tx) => lockForUpload(tx, ctx, uuid));
  const place = chunkPlace(Number(row.body.size), chunkSize, number);
  if (await hasChunk(ctx, uuid, place)) throw alreadyUploaded(number);
  const expires = ctx.clock.now().getTime() + LINK_MS;
  const text = `${uuid}/${number}/${chunkSize}/${expires}`;
  const signature = signed(await linkSecret(ctx), text);
  return { link: `/api/2.0/drives/${uuid}/upload_chunk/?chunk_number=${number}&chunk_size=${chunkSize}&expires=${expires}&signature=${signature}` };
}

/** The link's chunk if its signature holds and it has not expired (403 otherwise). */
export async function checkChunkLink(
  s: Pick<Services, 'store' | 'clock'>,
  uuid: string,
  q: { chunk_number?: string; chunk_size?: string; expires?: string; signature?: string },
): Promise<{ number: number; chunkSize: number }> {
  const text = `${uuid}/${q.chunk_number}/${q.chunk_size}/${q.expires}`;
  const want = Buffer.from(signed(await linkSecret(s), text), 'hex');
  const got = Buffer.from(String(q.signature ?? ''), 'hex');
  if (got.length !== want.length || !timingSafeEqual(got, want)) throw permission('This upload link is not valid');
  if (Number(q.expires) < s.clock.now().getTime()) throw permission('This upload link has expired; ask for a new one');
  return { number: Number(q.chunk_number), chunkSize: Number(q.chunk_size) };
}
