import type { Services } from '../core/context.js';
import type { Db, Tx } from '../store/db.js';
import { dropState, readState, readStates, updateState, writeState } from './state.js';

/**
 * The simulated storage: how long drive operations take, and the data written on each drive. A running
 * server writes to its disks at `drive.write_rate` bytes/s (never more than a drive holds); the operator
 * sets it with `stratus sim drive UUID --written N`; a clone holds its source's data. Snapshots size
 * themselves from it.
 */
const GIB = 1024 ** 3;

type Timing = Pick<Services, 'config'>;

export const createMs = (s: Timing) => s.config.delays['drive.create'];
export const resizeMs = (s: Timing) => s.config.delays['drive.resize'];
/** A clone of `size` bytes: a fixed part plus a part per started GiB. */
export const cloneMs = (s: Timing, size: number) => s.config.delays['drive.clone'] + s.config.delays['drive.clone.per_gib'] * Math.ceil(size / GIB);

interface DriveData {
  written: number;
}

/** Bytes of data written on a drive. */
export async function writtenBytes(db: Db | Tx, drive: string): Promise<number> {
  return Number((await readState<DriveData>(db, 'drives', drive)).written ?? 0);
}

export async function writtenOf(db: Db | Tx, drives: readonly string[]): Promise<Map<string, number>> {
  const states = await readStates<DriveData>(db, 'drives', drives);
  return new Map(drives.map((d) => [d, Number(states.get(d)?.written ?? 0)]));
}

export async function setWritten(tx: Tx, drive: string, bytes: number, size: number): Promise<number> {
  const written = Math.max(0, Math.min(bytes, size));
  await updateState(tx, 'drives', drive, { written: written || undefined });
  return written;
}

/** A guest wrote for `ms` of simulated time to each of these disks. */
export async function accrueWrites(tx: Tx, s: Timing, disks: readonly { uuid: string; size: number }[], ms: number): Promise<void> {
  const bytes = Math.floor((Math.max(0, ms) / 1000) * s.config.delays['drive.write_rate']);
  if (!bytes || !disks.length) return;
  const current = await writtenOf(
    tx,
    disks.map((d) => d.uuid),
  );
  for (const d of disks) await setWritten(tx, d.uuid, (current.get(d.uuid) ?? 0) + bytes, d.size);
}

/** A new clone holds the source's data. */
export async function copyData(tx: Tx, from: string, to: string, size: number): Promise<void> {
  const written = Math.min(await writtenBytes(tx, from), size);
  if (written) await writeState(tx, 'drives', to, { written });
}

export const forgetDrive = (tx: Tx, drive: string) => dropState(tx, 'drives', drive);
