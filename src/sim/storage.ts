import type { Services } from '../core/context.js';
import type { DriveDisk } from '../core/sim.js';
import type { Db, Tx } from '../store/db.js';
import { dropState, readState, readStates, updateState, writeState } from '../store/sim.js';
import { place, unplace } from './placement.js';
import { differingBytes, storedBytes } from './data.js';

/**
 * The simulated storage: how long drive operations take, and the data on each drive. A running server's
 * guest writes to each of its disks at `drive.write_rate` bytes/s; the operator sets a drive's data with
 * `stratus sim drive UUID --written N`; a clone holds its source's data.
 *
 * Per drive it keeps two figures as of its last change, plus who is writing since when, so a read at any
 * moment is exact without ticks:
 *   - `written`: the data the drive holds (never more than its size);
 *   - `changed`: every byte changed since the drive was made (only grows).
 * A snapshot remembers `changed` when it was taken; its size is what changed since, at most the drive's
 * size at that moment (the difference cannot exceed the image it is a difference from).
 *
 * Beside these simulated figures a drive has real bytes (uploads; sim/data.ts): a clone and a snapshot copy
 * its block map, and a snapshot's size adds the blocks in which the drive's map differs from its own.
 */
const GIB = 1024 ** 3;

type Timing = Pick<Services, 'config'>;
type Live = Pick<Services, 'config' | 'clock'>;
/** Calls that read or copy the drive's bytes (sim/data.ts) need the store too. */
type Stored = Live & Pick<Services, 'store'>;

export const createMs = (s: Timing) => s.config.delays['drive.create'];
export const resizeMs = (s: Timing) => s.config.delays['drive.resize'];
export const snapshotMs = (s: Timing) => s.config.delays['snapshot.create'];
/** A clone of `size` bytes: a fixed part plus a part per started GiB. */
export const cloneMs = (s: Timing, size: number) => s.config.delays['drive.clone'] + s.config.delays['drive.clone.per_gib'] * Math.ceil(size / GIB);

interface DriveData {
  written?: number;
  changed?: number;
  /** Server uuid -> ms since which its guest writes to this disk. */
  writers?: Record<string, number>;
}

interface SnapshotData {
  drive: string;
  /** The drive's `changed` when the snapshot was taken. */
  base: number;
  /** The drive's data then (what a clone of the snapshot holds). */
  written: number;
  /** The drive's size then: the most the snapshot can differ by. */
  size: number;
}

export type { DriveDisk };

const DRIVES = 'drives';
const SNAPSHOTS = 'snapshots';

/** Bytes a guest writes to one disk from `since` to `now`. */
const bytesSince = (s: Timing, since: number, now: number) => Math.floor((Math.max(0, now - since) / 1000) * s.config.delays['drive.write_rate']);

/** A drive's figures at `now`, with the writes of running guests folded in. */
function liveData(s: Timing, d: DriveData, size: number, now: number): { written: number; changed: number } {
  let extra = 0;
  for (const since of Object.values(d.writers ?? {})) extra += bytesSince(s, since, now);
  return { written: Math.min(size, (d.written ?? 0) + extra), changed: (d.changed ?? 0) + extra };
}

/** The state to store: figures folded at `now`, writers restarted from `now`, zeros left out. */
function folded(s: Timing, d: DriveData, size: number, now: number, change: Partial<{ written: number; changed: number }> = {}): DriveData {
  const live = { ...liveData(s, d, size, now), ...change };
  const writers = d.writers && Object.fromEntries(Object.keys(d.writers).map((w) => [w, now]));
  return { written: live.written || undefined, changed: live.changed || undefined, writers: writers && Object.keys(writers).length ? writers : undefined };
}

const store = (tx: Tx, uuid: string, d: DriveData) => writeState(tx, DRIVES, uuid, JSON.parse(JSON.stringify(d)) as Record<string, unknown>);

/** Bytes of data on a drive now. */
export async function writtenBytes(db: Db | Tx, s: Stored, drive: DriveDisk): Promise<number> {
  const simulated = liveData(s, await readState<DriveData>(db, DRIVES, drive.uuid), drive.size, s.clock.now().getTime()).written;
  return Math.min(drive.size, simulated + (await storedBytes(db, s, drive.uuid)));
}

/** The operator sets a drive's data: the difference to what it held counts as changed data. */
export async function setWritten(tx: Tx, s: Live, drive: DriveDisk, bytes: number): Promise<number> {
  const now = s.clock.now().getTime();
  const d = await readState<DriveData>(tx, DRIVES, drive.uuid);
  const live = liveData(s, d, drive.size, now);
  const written = Math.max(0, Math.min(bytes, drive.size));
  await store(tx, drive.uuid, folded(s, d, drive.size, now, { written, changed: live.changed + Math.abs(written - live.written) }));
  return written;
}

/** Each disk with its stored figures, one read. */
async function dataOf(tx: Tx, disks: readonly DriveDisk[]): Promise<[DriveDisk, DriveData][]> {
  const states = await readStates<DriveData>(
    tx,
    DRIVES,
    disks.map((d) => d.uuid),
  );
  return disks.map((disk) => [disk, states.get(disk.uuid) ?? {}]);
}

/** A guest powers on: from now it writes to each of its disks. */
export async function startWriting(tx: Tx, s: Live, server: string, disks: readonly DriveDisk[]): Promise<void> {
  const now = s.clock.now().getTime();
  for (const [disk, d] of await dataOf(tx, disks)) {
    await store(tx, disk.uuid, { ...d, writers: { ...d.writers, [server]: now } });
  }
}

/**
 * A guest powers off: what it wrote lands on its disks. `fallbackSince` covers a guest that began writing
 * before writers were kept per disk (its power-on time).
 */
export async function stopWriting(tx: Tx, s: Live, server: string, disks: readonly DriveDisk[], fallbackSince?: number): Promise<void> {
  const now = s.clock.now().getTime();
  for (const [disk, d] of await dataOf(tx, disks)) {
    const since = d.writers?.[server] ?? fallbackSince;
    const { [server]: _gone, ...others } = d.writers ?? {};
    const rest: DriveData = { ...d, writers: Object.keys(others).length ? others : undefined };
    const bytes = since === undefined ? 0 : bytesSince(s, since, now);
    // The other writers keep their start: fold only this guest's part.
    await store(tx, disk.uuid, {
      ...rest,
      written: Math.min(disk.size, (d.written ?? 0) + bytes) || undefined,
      changed: (d.changed ?? 0) + bytes || undefined,
    });
  }
}

/** A new clone holds the source's data now. */
export async function copyData(tx: Tx, s: Stored, from: DriveDisk, to: string, size: number): Promise<void> {
  const now = s.clock.now().getTime();
  const written = Math.min(liveData(s, await readState<DriveData>(tx, DRIVES, from.uuid), from.size, now).written, size);
  if (written) await writeState(tx, DRIVES, to, { written });
  await s.store.data.copyMap(tx, from.uuid, to);
}

/** A new drive (created or cloned) gets a storage node, away from the nodes of `avoid` when one is free. */
export const allocateDrive = (tx: Tx, s: Timing, drive: string, avoid: readonly string[] = []) => place(tx, s, drive, avoid);

export async function forgetDrive(tx: Tx, s: Stored, drive: string): Promise<void> {
  await dropState(tx, DRIVES, drive);
  await s.store.data.dropMap(tx, drive);
  await s.store.data.forgetChunks(tx, drive);
  await unplace(tx, drive);
}

/** Take a snapshot of a drive now: it remembers the drive's data and how much had changed. */
export async function takeSnapshot(tx: Tx, s: Stored, drive: DriveDisk, snapshot: string): Promise<void> {
  const live = liveData(s, await readState<DriveData>(tx, DRIVES, drive.uuid), drive.size, s.clock.now().getTime());
  const data: SnapshotData = { drive: drive.uuid, base: live.changed, written: live.written, size: drive.size };
  await writeState(tx, SNAPSHOTS, snapshot, { ...data });
  await s.store.data.copyMap(tx, drive.uuid, snapshot);
}

/**
 * Each snapshot's allocated size now: the data its drive changed since it was taken, at most the drive's
 * size then. Two reads for any number of snapshots; a snapshot the storage does not know is 0.
 */
export async function snapshotSizes(db: Db | Tx, s: Stored, snapshots: readonly string[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  if (!snapshots.length) return out;
  const taken = await readStates<SnapshotData>(db, SNAPSHOTS, snapshots);
  const drives = await readStates<DriveData>(db, DRIVES, [...new Set([...taken.values()].map((t) => t.drive!))]);
  const now = s.clock.now().getTime();
  for (const uuid of snapshots) {
    const t = taken.get(uuid);
    if (!t?.drive) {
      out.set(uuid, 0);
      continue;
    }
    const size = t.size ?? 0;
    const changed = liveData(s, drives.get(t.drive) ?? {}, size, now).changed - (t.base ?? 0);
    const real = await differingBytes(db, s, t.drive, uuid);
    out.set(uuid, Math.max(0, Math.min(size, changed + real)));
  }
  return out;
}

/** A clone of a snapshot holds the drive's data as it was when the snapshot was taken. */
export async function copySnapshotData(tx: Tx, s: Stored, snapshot: string, to: string, size: number): Promise<void> {
  const written = Math.min(Number((await readState<SnapshotData>(tx, SNAPSHOTS, snapshot)).written ?? 0), size);
  if (written) await writeState(tx, DRIVES, to, { written });
  await s.store.data.copyMap(tx, snapshot, to);
}

export async function forgetSnapshots(tx: Tx, s: Stored, snapshots: readonly string[]): Promise<void> {
  await dropState(tx, SNAPSHOTS, snapshots);
  for (const snapshot of snapshots) await s.store.data.dropMap(tx, snapshot);
}

/** Where the injected clone faults are kept: per source drive, or `*` for the next clone of any drive. */
const FAULTS = 'storage_faults';
const ANY = '*';

/** A fault for tests (the admin plane, `stratus faults clone`): the next clone of `source` (null: of any drive) fails. */
export async function failNextClone(tx: Tx, source: string | null): Promise<void> {
  await updateState(tx, FAULTS, source ?? ANY, { fail_next_clone: true });
}

/** Whether the clone of `source` finishing now fails (spending the fault that says so). */
export async function takeCloneFailure(tx: Tx, source: string): Promise<boolean> {
  for (const key of [source, ANY]) {
    const state = await readState<{ fail_next_clone: boolean }>(tx, FAULTS, key);
    if (state.fail_next_clone) {
      await updateState(tx, FAULTS, key, { fail_next_clone: undefined });
      return true;
    }
  }
  return false;
}
