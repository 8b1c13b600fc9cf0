import { createHash } from 'node:crypto';
import type { Services } from '../core/context.js';
import type { DataWrite, DriveDisk } from '../core/sim.js';
import type { Db, Tx } from '../store/db.js';
import type { BlockWrite } from '../store/data/index.js';

/**
 * The bytes on the simulated storage. A drive is a map of fixed-size blocks (store/data/): each block is
 * addressed by its SHA-256, stored once however many drives, clones and snapshots hold it, and a block of
 * zeroes is not stored at all (an index without a block reads as zeroes). So a 100 GiB drive with 10 MiB
 * written holds ~10 MiB; a clone or a snapshot copies the map, not the bytes (copy-on-write: a later write
 * to either replaces that index's block in its own map only); a snapshot's difference is the indexes where
 * the two maps differ.
 *
 * 64 KiB blocks: small enough that a snapshot's difference and a partial write stay fine-grained, large
 * enough that a 1 GiB image is 16,384 map rows. The last block of a drive whose size is no multiple of it
 * is stored padded with zeroes (reads stop at the size).
 */
export const BLOCK = 64 * 1024;
const ZERO = Buffer.alloc(BLOCK);
/** Blocks read per statement while streaming a download. */
const READ_BATCH = 32;

type Data = Pick<Services, 'store'>;

const hashOf = (data: Buffer) => createHash('sha256').update(data).digest('hex');

function blockOf(data: Buffer): BlockWrite['block'] {
  return data.equals(ZERO) ? null : { hash: hashOf(data), data };
}

/**
 * `data` to be written at `offset`, cut into blocks, hashed before any transaction is open (the hashing is
 * the expensive part; the transaction only merges the partial blocks at either edge and writes).
 */
export function prepareWrite(offset: number, data: Buffer): DataWrite {
  const end = offset + data.length;
  const whole: BlockWrite[] = [];
  const partial: { idx: number; at: number; bytes: Buffer }[] = [];
  for (let idx = Math.floor(offset / BLOCK); idx * BLOCK < end; idx++) {
    const start = idx * BLOCK;
    const from = Math.max(offset, start);
    const to = Math.min(end, start + BLOCK);
    const bytes = data.subarray(from - offset, to - offset);
    if (from === start && to === start + BLOCK) whole.push({ idx, block: blockOf(bytes) });
    else partial.push({ idx, at: from - start, bytes });
  }
  return { offset, length: data.length, whole, partial };
}

/**
 * Write prepared data to a drive (the caller holds the drive's row lock and has checked the bounds): whole
 * blocks replace what was there, a partial block is merged with the block it lands on.
 */
export async function writeData(tx: Tx, s: Data, drive: DriveDisk, write: DataWrite): Promise<void> {
  if (write.offset < 0 || write.offset + write.length > drive.size) throw new RangeError(`write past the end of drive ${drive.uuid}`);
  const writes = [...(write.whole as BlockWrite[])];
  const partial = write.partial as { idx: number; at: number; bytes: Buffer }[];
  if (partial.length) {
    const current = new Map<number, string>();
    for (const p of partial) for (const e of await s.store.data.entries(tx, drive.uuid, p.idx, p.idx + 1)) current.set(e.idx, e.hash);
    const blocks = await s.store.data.blocks(tx, [...current.values()]);
    for (const p of partial) {
      const base = Buffer.from(blocks.get(current.get(p.idx) ?? '') ?? ZERO);
      p.bytes.copy(base, p.at);
      writes.push({ idx: p.idx, block: blockOf(base) });
    }
  }
  await s.store.data.write(tx, drive.uuid, writes);
}

/**
 * The bytes of a drive from `start` to `end` (exclusive), a block at a time, read a batch of blocks per
 * statement: memory stays a batch whatever the range. Each batch is read on its own (a long download
 * holds no transaction); bytes no block holds are zeroes.
 */
export async function* readData(db: Db | Tx, s: Data, drive: DriveDisk, start: number, end: number): AsyncGenerator<Buffer> {
  const last = Math.min(end, drive.size);
  for (let idx = Math.floor(start / BLOCK); idx * BLOCK < last; idx += READ_BATCH) {
    const entries = await s.store.data.entries(db, drive.uuid, idx, idx + READ_BATCH);
    const hashes = new Map(entries.map((e) => [e.idx, e.hash]));
    const blocks = await s.store.data.blocks(db, [...hashes.values()]);
    for (let i = idx; i < idx + READ_BATCH && i * BLOCK < last; i++) {
      const block = blocks.get(hashes.get(i) ?? '') ?? ZERO;
      const from = Math.max(start, i * BLOCK) - i * BLOCK;
      const to = Math.min(last, (i + 1) * BLOCK) - i * BLOCK;
      yield block.subarray(from, to);
    }
  }
}

/** Bytes of data a drive's blocks hold (block-granular). */
export const storedBytes = async (db: Db | Tx, s: Data, drive: string): Promise<number> => (await s.store.data.entryCount(db, drive)) * BLOCK;

/** Bytes by which a snapshot and its drive differ now (block-granular). */
export const differingBytes = async (db: Db | Tx, s: Data, drive: string, snapshot: string): Promise<number> =>
  (await s.store.data.differing(db, drive, snapshot)) * BLOCK;
