import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Ctx } from '../../src/core/context.js';
import { ApiError } from '../../src/core/errors.js';
import { receiveChunk } from '../../src/resources/drives/data.js';
import { initUpload } from '../../src/resources/drives/upload.js';
import { registry } from '../../src/registry.js';
import { openServices, type ServiceFixture } from '../helpers/services.js';

/**
 * The bytes behind drives on the simulated storage: content-addressed blocks (each distinct block stored
 * once, zero blocks not at all), clones and snapshots sharing their source's blocks (copy-on-write), a
 * snapshot's size the blocks changed since it was taken, a snapshot's clone giving back its exact bytes,
 * and the last reference to a block freeing it.
 */
let fx: ServiceFixture;
before(async () => {
  fx = await openServices({}, registry);
});
after(() => fx.close());

const GiB = 1024 ** 3;
const storage = () => fx.sim.storage;
const BLOCK = () => storage().blockSize();
const stored = () => storage().storedData(fx.services.store.db);

async function readyDrive(ctx: Ctx, size = GiB): Promise<{ uuid: string; size: number }> {
  const [made] = (await fx.collection('drives').service.create!(ctx, [{ name: 'data', size, media: 'disk' }])) as Record<string, unknown>[];
  await fx.advance(storage().createMs());
  return { uuid: String(made.uuid), size: Number(made.size) };
}

async function write(drive: { uuid: string; size: number }, offset: number, data: Buffer): Promise<void> {
  const prepared = storage().prepareWrite(offset, data);
  await fx.services.store.transaction(async (tx) => {
    await fx.services.store.resources.lock(tx, 'drives', drive.uuid);
    await storage().writeData(tx, drive, prepared);
  });
}

async function read(drive: { uuid: string; size: number }, start: number, end: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of storage().readData(fx.services.store.db, drive, start, end)) parts.push(Buffer.from(p));
  return Buffer.concat(parts);
}

const driveOf = async (ctx: Ctx, uuid: string) => {
  const d = await fx.collection('drives').service.get(ctx, uuid);
  return { uuid, size: Number(d.size) };
};

test('blocks are stored once by content; zeroes are not stored; partial writes merge; unwritten bytes read as zeroes', async () => {
  const alice = await fx.user();
  const a = await readyDrive(alice);
  const b = await readyDrive(alice);
  const before = await stored();
  const block = randomBytes(BLOCK());
  // The same block at two places of two drives: one block stored.
  await write(a, 0, block);
  await write(b, 5 * BLOCK(), block);
  await write(a, 10 * BLOCK(), Buffer.alloc(3 * BLOCK()));
  assert.equal((await stored()).blocks, before.blocks + 1);
  // A write across a block boundary, not aligned, merges with what is there.
  const patch = randomBytes(1000);
  await write(a, BLOCK() - 500, patch);
  const expected = Buffer.concat([block.subarray(0, BLOCK() - 500), patch, Buffer.alloc(BLOCK() - 500)]);
  assert.deepEqual(await read(a, 0, 2 * BLOCK()), expected);
  assert.deepEqual(await read(a, 100 * BLOCK() + 7, 100 * BLOCK() + 7 + 4096), Buffer.alloc(4096));
  // 1 GiB drive with two blocks written holds two blocks (block-granular), not 1 GiB.
  assert.equal(await storage().writtenBytes(fx.services.store.db, a), 2 * BLOCK());
});

test('a clone shares its source blocks; a write to either changes only its own map', async () => {
  const alice = await fx.user();
  const src = await readyDrive(alice);
  const data = randomBytes(4 * BLOCK());
  await write(src, 0, data);
  const before = await stored();
  const answer = (await fx.collection('drives').actions!.clone.run(alice, src.uuid, {}, {})) as { objects: Record<string, unknown>[] };
  const copy = await driveOf(alice, String(answer.objects[0].uuid));
  assert.deepEqual(await stored(), before, 'a clone stores nothing new');
  assert.deepEqual(await read(copy, 0, data.length), data);
  await fx.advance(600_000);
  const change = randomBytes(BLOCK());
  await write(copy, BLOCK(), change);
  assert.equal((await stored()).blocks, before.blocks + 1, 'the changed block only');
  assert.deepEqual(await read(src, 0, data.length), data, 'the source keeps its bytes');
  assert.deepEqual(await read(copy, BLOCK(), 2 * BLOCK()), change);
});

test('a snapshot is the difference since it was taken; its clone gives back its bytes; the last reference frees a block', async () => {
  const alice = await fx.user();
  const drive = await readyDrive(alice);
  const data = randomBytes(3 * BLOCK());
  await write(drive, 0, data);
  const [snap] = (await fx.collection('snapshots').service.create!(alice, [{ drive: drive.uuid, name: 's' }])) as Record<string, unknown>[];
  await fx.advance(storage().snapshotMs());
  const size = async () => (await fx.collection('snapshots').service.get(alice, String(snap.uuid))).allocated_size;
  assert.equal(await size(), 0);
  const base = await stored();
  // One block overwritten, one new: two blocks of difference, two new blocks stored (the old ones are the snapshot's).
  await write(drive, BLOCK(), randomBytes(BLOCK()));
  await write(drive, 7 * BLOCK(), randomBytes(BLOCK()));
  assert.equal(await size(), 2 * BLOCK());
  assert.equal((await stored()).blocks, base.blocks + 2);
  const runtime = (await fx.collection('drives').service.get(alice, drive.uuid)).runtime as { snapshots_allocated_size: number };
  assert.equal(runtime.snapshots_allocated_size, 2 * BLOCK());

  const restored = await fx.collection('snapshots').actions!.clone.run(alice, String(snap.uuid), {}, {});
  const copy = await driveOf(alice, String((restored as Record<string, unknown>).uuid));
  assert.deepEqual(await read(copy, 0, 8 * BLOCK()), Buffer.concat([data, Buffer.alloc(5 * BLOCK())]));

  // A resize keeps the data.
  await fx.collection('drives').service.update!(alice, drive.uuid, { size: 2 * GiB });
  await fx.advance(storage().resizeMs());
  const grown = await driveOf(alice, drive.uuid);
  assert.equal(grown.size, 2 * GiB);
  assert.deepEqual(await read(grown, 0, BLOCK()), data.subarray(0, BLOCK()));

  // The snapshot, the drive and the clone go: every block they held is freed.
  await fx.collection('snapshots').service.remove!(alice, String(snap.uuid));
  await fx.collection('drives').service.remove!(alice, drive.uuid);
  await fx.advance(600_000);
  await fx.collection('drives').service.remove!(alice, copy.uuid);
  const left = await fx.services.store.db
    .selectFrom('data_maps')
    .select('map')
    .where('map', 'in', [drive.uuid, copy.uuid, String(snap.uuid)])
    .execute();
  assert.deepEqual(left, []);
  assert.equal((await stored()).blocks, base.blocks - 3);
});

test('a chunk written once refuses a second writer in its own transaction (416), even one that passed the first check', async () => {
  const alice = await fx.user();
  const uuid = await initUpload(alice, { name: 'once', size: 2 * BLOCK(), media: 'disk' });
  const place = { offset: 0, size: BLOCK() };
  const first = randomBytes(BLOCK());
  await receiveChunk(
    alice,
    uuid,
    place,
    (async function* () {
      yield first;
    })(),
    { number: 0 },
  );
  await assert.rejects(
    receiveChunk(
      alice,
      uuid,
      place,
      (async function* () {
        yield randomBytes(BLOCK());
      })(),
      { number: 0 },
    ),
    (e: unknown) => e instanceof ApiError && e.type === 'range' && /Chunk 0 is already uploaded/.test(e.message),
  );
  assert.deepEqual(await read({ uuid, size: 2 * BLOCK() }, 0, BLOCK()), first);
  // Without `once` (resumable.js) the chunk is written again.
  const second = randomBytes(BLOCK());
  await receiveChunk(
    alice,
    uuid,
    place,
    (async function* () {
      yield second;
    })(),
  );
  assert.deepEqual(await read({ uuid, size: 2 * BLOCK() }, 0, BLOCK()), second);
});
