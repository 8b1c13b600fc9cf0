import type { Ctx } from '../../core/context.js';
import { notFound, permission } from '../../core/errors.js';
import type { Obj } from '../../core/input.js';
import type { Permission } from '../../core/permissions.js';
import type { Row } from '../../core/stored.js';
import type { Db, Tx } from '../../store/db.js';
import type { CloneSource } from '../drives/drives.js';

/**
 * Lookups of the stored library (kind `libdrives`, no owner) for the places outside `/libdrives/` that meet
 * library drives: `/drives/<library uuid>/` (read and clone), and attaching drives to servers.
 */

export async function libraryRow(db: Db | Tx, uuid: string): Promise<Row | undefined> {
  return (await db.selectFrom('resources').selectAll().where('kind', '=', 'libdrives').where('uuid', '=', uuid).where('owner_uuid', 'is', null).executeTakeFirst()) as
    | Row
    | undefined;
}

/** Whether `uuid` is a library drive. */
export async function isLibraryDrive(db: Db | Tx, uuid: string): Promise<boolean> {
  return (await libraryRow(db, uuid)) !== undefined;
}

/** The media (`cdrom` or `disk`) of those of `uuids` that are library drives, in one query. */
export async function libraryMedia(db: Db | Tx, uuids: readonly string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  if (!uuids.length) return out;
  const rows = await db.selectFrom('resources').select(['uuid', 'body']).where('kind', '=', 'libdrives').where('owner_uuid', 'is', null).where('uuid', 'in', [...uuids]).execute();
  for (const r of rows) out.set(r.uuid, (JSON.parse(r.body) as Obj).media as string);
  return out;
}

/**
 * Attaching drives to a server: a library CD-ROM attaches as it is, a preinstalled library disk must be
 * cloned first (403, reference §2.3). Other uuids are left to the drive checks.
 */
export async function assertAttachableLibrary(db: Db | Tx, uuids: readonly string[], point = 'drives'): Promise<void> {
  for (const [uuid, media] of await libraryMedia(db, uuids))
    if (media !== 'cdrom') throw permission(`Library drive ${uuid} is a preinstalled disk: clone it and attach the clone`, point);
}

/** A library drive as the source of a clone (404 when there is no such library drive). */
export async function librarySource(db: Db | Tx, uuid: string): Promise<CloneSource> {
  const row = await libraryRow(db, uuid);
  if (!row) throw notFound(uuid);
  return { uuid, kind: 'libdrives', owner: null, body: JSON.parse(row.body) as Obj };
}

/** The keys of a library drive that `/drives/<uuid>/` shows (the image description is `/libdrives/`'s). */
const DRIVE_KEYS = ['affinities', 'allow_multimount', 'jobs', 'licenses', 'media', 'meta', 'mounted_on', 'name', 'size', 'status'] as const;

/**
 * `GET /drives/<library uuid>/`: the library drive in the drive shape (golden
 * `response_librdrive_get_through_drives`): `owner: null`, a drive `resource_uri`, the location's storage.
 */
export async function libraryAsDrive(ctx: Ctx, uuid: string, storageType: string): Promise<Obj | undefined> {
  const row = await libraryRow(ctx.store.db, uuid);
  if (!row) return undefined;
  const body = JSON.parse(row.body) as Obj;
  const drive: Obj = {};
  for (const k of DRIVE_KEYS) drive[k] = body[k];
  return {
    ...drive,
    grantees: [],
    owner: null,
    permissions: [],
    resource_uri: `/api/2.0/drives/${uuid}/`,
    runtime: { is_snapshotable: true, snapshots_allocated_size: 0, storage_type: storageType },
    snapshots: [],
    storage_type: storageType,
    tags: [],
    uuid,
  };
}

/**
 * Access to a library drive through `/drives/<uuid>/`: anyone may clone it; any other use (edit, resize,
 * delete, attach rights) is refused with 403. Only asked for uuids that are no drive the caller can see.
 */
export async function libraryDriveAccess(uuid: string, perm: Permission, row: Row | undefined, db: Db | Tx): Promise<Row | undefined> {
  if (row) return undefined;
  const lib = await libraryRow(db, uuid);
  if (!lib) return undefined;
  if (perm !== 'CLONE') throw permission(`Library drive ${uuid} cannot be changed; clone it into your account`);
  return lib;
}
