import { sql } from 'kysely';
import type { Db, Tx } from '../db.js';
import { byCodePoint } from '../../core/order.js';

/**
 * The SQL of drive data (tables `data_blocks`, `data_maps`, `upload_chunks`; the simulated storage,
 * sim/data.ts, is its only user). A drive or a snapshot is a map: block index -> block hash; a block is
 * stored once whatever number of maps (drives, clones, snapshots) refer to it, and `refs` counts the map
 * entries that do, so the last one to go deletes it. An index without an entry reads as zeroes.
 *
 * Concurrency: a map is written by the holder of its drive's row lock (uploads, clones, snapshots and
 * deletes all take it), so a map's entries need no locks of their own. Blocks are shared across drives:
 * their `refs` change by row-locking upserts and updates in hash order (two writers never wait on each
 * other in opposite orders), and a block is deleted only where `refs` reached 0 under that row lock, so a
 * concurrent upsert either sees the row (and keeps it alive) or inserts it afresh with its bytes.
 */
export interface MapEntry {
  idx: number;
  hash: string;
}

/** A block index's new content: a block's hash and bytes, or null for zeroes (no block). */
export interface BlockWrite {
  idx: number;
  block: { hash: string; data: Buffer } | null;
}

/** Statements carry at most this many rows (well under both engines' parameter limits). */
const BATCH = 500;

function slices<T>(list: readonly T[], n = BATCH): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += n) out.push(list.slice(i, i + n));
  return out;
}

export class DataQueries {
  /** Entries of `map` with `from <= idx < to`, by index. */
  async entries(db: Db | Tx, map: string, from: number, to: number): Promise<MapEntry[]> {
    const rows = await db
      .selectFrom('data_maps')
      .select(['idx', 'hash'])
      .where('map', '=', map)
      .where('idx', '>=', from)
      .where('idx', '<', to)
      .orderBy('idx')
      .execute();
    return rows.map((r) => ({ idx: Number(r.idx), hash: r.hash }));
  }

  /** The bytes of the given blocks. */
  async blocks(db: Db | Tx, hashes: readonly string[]): Promise<Map<string, Buffer>> {
    const out = new Map<string, Buffer>();
    for (const part of slices([...new Set(hashes)])) {
      const rows = await db.selectFrom('data_blocks').select(['hash', 'data']).where('hash', 'in', part).execute();
      for (const r of rows) out.set(r.hash, Buffer.from(r.data));
    }
    return out;
  }

  /**
   * Sets block indexes of `map` (the caller holds its drive's row lock): each index refers to its new
   * block (stored if new, its count raised) and lets go of its old one (deleted when no map refers to it).
   */
  async write(tx: Tx, map: string, writes: readonly BlockWrite[]): Promise<void> {
    if (!writes.length) return;
    const old = new Map<number, string>();
    for (const part of slices(writes.map((w) => w.idx))) {
      const rows = await tx.selectFrom('data_maps').select(['idx', 'hash']).where('map', '=', map).where('idx', 'in', part).execute();
      for (const r of rows) old.set(Number(r.idx), r.hash);
    }
    const gained = new Map<string, { data: Buffer; n: number }>();
    const lost = new Map<string, number>();
    const changed: BlockWrite[] = [];
    for (const w of writes) {
      const before = old.get(w.idx);
      if (before === (w.block?.hash ?? undefined)) continue;
      changed.push(w);
      if (w.block) {
        const g = gained.get(w.block.hash);
        gained.set(w.block.hash, { data: w.block.data, n: (g?.n ?? 0) + 1 });
      }
      if (before) lost.set(before, (lost.get(before) ?? 0) + 1);
    }
    if (!changed.length) return;
    await this.gain(tx, gained);
    for (const part of slices(changed.map((w) => w.idx))) await tx.deleteFrom('data_maps').where('map', '=', map).where('idx', 'in', part).execute();
    const rows = changed.filter((w) => w.block).map((w) => ({ map, idx: w.idx, hash: w.block!.hash }));
    for (const part of slices(rows)) await tx.insertInto('data_maps').values(part).execute();
    await this.lose(tx, lost);
  }

  /** `to` becomes a copy of `from` (a clone, a snapshot, a snapshot's clone): the blocks are shared. */
  async copyMap(tx: Tx, from: string, to: string): Promise<void> {
    await this.dropMap(tx, to);
    await sql`insert into data_maps (map, idx, hash) select ${to}, idx, hash from data_maps where map = ${from}`.execute(tx);
    // One statement for the whole map (a clone of a large image): each block gains its entries in `to`.
    await sql`update data_blocks set refs = refs + (select count(*) from data_maps m where m.map = ${to} and m.hash = data_blocks.hash)
      where hash in (select hash from data_maps where map = ${to})`.execute(tx);
  }

  /** Forget a map: its blocks lose a reference each (deleted when it was the last). */
  async dropMap(tx: Tx, map: string): Promise<void> {
    await sql`update data_blocks set refs = refs - (select count(*) from data_maps m where m.map = ${map} and m.hash = data_blocks.hash)
      where hash in (select hash from data_maps where map = ${map})`.execute(tx);
    await sql`delete from data_blocks where refs <= 0 and hash in (select hash from data_maps where map = ${map})`.execute(tx);
    await tx.deleteFrom('data_maps').where('map', '=', map).execute();
  }

  /** Entries of a map: its blocks x the block size is the data it holds. */
  async entryCount(db: Db | Tx, map: string): Promise<number> {
    const r = await db.selectFrom('data_maps').select((eb) => eb.fn.countAll<number>().as('n')).where('map', '=', map).executeTakeFirst();
    return Number(r?.n ?? 0);
  }

  /** Block indexes at which two maps differ (one has a block the other has not, or another block). */
  async differing(db: Db | Tx, a: string, b: string): Promise<number> {
    const r = await sql<{ n: number | string }>`select
      (select count(*) from data_maps x where x.map = ${a}
        and not exists (select 1 from data_maps y where y.map = ${b} and y.idx = x.idx and y.hash = x.hash))
      + (select count(*) from data_maps y where y.map = ${b}
        and not exists (select 1 from data_maps x where x.map = ${a} and x.idx = y.idx)) as n`.execute(db);
    return Number(r.rows[0]?.n ?? 0);
  }

  /** Entries from `idx` on are dropped (a resize never shrinks; an upload's declared size is its end). */
  async truncate(tx: Tx, map: string, idx: number): Promise<void> {
    const rows = await tx.selectFrom('data_maps').select(['idx', 'hash']).where('map', '=', map).where('idx', '>=', idx).execute();
    if (!rows.length) return;
    await tx.deleteFrom('data_maps').where('map', '=', map).where('idx', '>=', idx).execute();
    const lost = new Map<string, number>();
    for (const r of rows) lost.set(r.hash, (lost.get(r.hash) ?? 0) + 1);
    await this.lose(tx, lost);
  }

  /** Distinct blocks stored, and their bytes (what the storage really holds). */
  async stored(db: Db | Tx): Promise<{ blocks: number; bytes: number }> {
    const r = await sql<{ n: number | string; b: number | string | null }>`select count(*) as n, sum(length(data)) as b from data_blocks`.execute(db);
    return { blocks: Number(r.rows[0]?.n ?? 0), bytes: Number(r.rows[0]?.b ?? 0) };
  }

  /** Chunks of an upload that arrived: offset -> bytes, by offset. */
  async chunks(db: Db | Tx, drive: string): Promise<Map<number, number>> {
    const rows = await db.selectFrom('upload_chunks').select(['offset', 'size']).where('drive', '=', drive).orderBy('offset').execute();
    return new Map(rows.map((r) => [Number(r.offset), Number(r.size)]));
  }

  /** The size of the chunk that arrived at `offset`, if one did. */
  async chunkAt(db: Db | Tx, drive: string, offset: number): Promise<number | undefined> {
    const r = await db.selectFrom('upload_chunks').select('size').where('drive', '=', drive).where('offset', '=', offset).executeTakeFirst();
    return r ? Number(r.size) : undefined;
  }

  /** A chunk arrived whole (in the transaction of its last bytes: an acknowledged chunk is never lost). */
  async chunkArrived(tx: Tx, drive: string, offset: number, size: number): Promise<void> {
    await tx
      .insertInto('upload_chunks')
      .values({ drive, offset, size })
      .onConflict((oc) => oc.columns(['drive', 'offset']).doUpdateSet({ size }))
      .execute();
  }

  async forgetChunks(tx: Tx, drive: string): Promise<void> {
    await tx.deleteFrom('upload_chunks').where('drive', '=', drive).execute();
  }

  /** New references to blocks given with their bytes: inserted, or their count raised (in hash order). */
  private async gain(tx: Tx, gained: Map<string, { data: Buffer; n: number }>): Promise<void> {
    const rows = [...gained].sort(([a], [b]) => byCodePoint(a, b)).map(([hash, g]) => ({ hash, data: g.data, refs: g.n }));
    // Few rows per statement: each carries a block's bytes.
    for (const part of slices(rows, 16))
      await tx
        .insertInto('data_blocks')
        .values(part)
        .onConflict((oc) => oc.column('hash').doUpdateSet({ refs: sql`data_blocks.refs + excluded.refs` }))
        .execute();
  }

  /** References let go, in hash order; blocks left at 0 go. */
  private async lose(tx: Tx, lost: Map<string, number>): Promise<void> {
    const list = [...lost].sort(([a], [b]) => byCodePoint(a, b));
    for (const [hash, n] of list)
      await tx
        .updateTable('data_blocks')
        .set({ refs: sql`refs - ${n}` })
        .where('hash', '=', hash)
        .execute();
    for (const part of slices(list.map(([h]) => h))) await tx.deleteFrom('data_blocks').where('hash', 'in', part).where('refs', '<=', 0).execute();
  }
}
