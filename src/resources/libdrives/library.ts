import type { Ctx, Services } from '../../core/context.js';
import { permission } from '../../core/errors.js';
import type { Obj } from '../../core/input.js';
import type { Permission } from '../../core/permissions.js';
import type { Row } from '../../core/stored.js';
import type { Db, Tx } from '../../store/db.js';
import { resourceUri } from '../../store/repository.js';

/**
 * Lookups of the stored library (kind `libdrives`, no owner) for the places outside `/libdrives/` that meet
 * library drives: `/drives/<library uuid>/` (read and clone), and attaching drives to servers.
 */

/** A library drive (no owner), or undefined. */
export async function libraryRow(s: Pick<Services, 'store'>, db: Db | Tx, uuid: string): Promise<Row | undefined> {
  const row = await s.store.resources.get(db, 'libdrives', uuid);
  return row && row.owner_uuid === null ? row : undefined;
}

/** The keys of a library drive that `/drives/<uuid>/` shows (the image description is `/libdrives/`'s). */
const DRIVE_KEYS = ['affinities', 'allow_multimount', 'jobs', 'licenses', 'media', 'meta', 'mounted_on', 'name', 'size', 'status'] as const;

/**
 * `GET /drives/<library uuid>/`: the library drive in the drive shape (golden
 * `response_librdrive_get_through_drives`): `owner: null`, a drive `resource_uri`, the location's storage.
 */
export async function libraryAsDrive(ctx: Ctx, uuid: string, storageType: string): Promise<Obj | undefined> {
  const row = await libraryRow(ctx, ctx.store.db, uuid);
  if (!row) return undefined;
  const body = row.body;
  const drive: Obj = {};
  for (const k of DRIVE_KEYS) drive[k] = body[k];
  return {
    ...drive,
    grantees: [],
    owner: null,
    permissions: [],
    resource_uri: resourceUri('drives', uuid),
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
export async function libraryDriveAccess(
  s: Pick<Services, 'store'>,
  uuid: string,
  perm: Permission,
  row: Row | undefined,
  db: Db | Tx,
): Promise<Row | undefined> {
  if (row) return undefined;
  const lib = await libraryRow(s, db, uuid);
  if (!lib) return undefined;
  if (perm !== 'CLONE') throw permission(`Library drive ${uuid} cannot be changed; clone it into your account`);
  return lib;
}
