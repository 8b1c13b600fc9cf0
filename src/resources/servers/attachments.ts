import type { Ctx } from '../../core/context.js';
import { ApiError, permission, validation } from '../../core/errors.js';
import { isPlainObject, relatedId, type Obj } from '../../core/input.js';
import { lockAttachable } from '../../core/permissions.js';
import type { Tx } from '../../store/db.js';

/** A drive attachment as stored: the drive by uuid, and where it sits on the virtual bus. */
export interface Attachment {
  boot_order: number | null;
  dev_channel: string;
  device: string;
  drive: string;
}

/** Units per controller and controllers per device type on KVM (reference §5.8). */
const BUS: Record<string, { controllers: number; units: number }> = {
  ide: { controllers: 2, units: 2 },
  virtio: { controllers: 171, units: 6 },
  scsi: { controllers: 4, units: 7 },
};

/**
 * Validate and normalise a server's `drives` list: each drive must exist, be attachable by the server's
 * owner (ACL rule 8), not be a library disk (clone it first), and sit on a free, valid channel.
 * A missing dev_channel gets the next free one of its device type.
 */
export async function normaliseAttachments(tx: Tx, ctx: Ctx, serverOwner: string, serverUuid: string | null, items: unknown[]): Promise<Attachment[]> {
  const out: Attachment[] = [];
  const used = new Set<string>();
  const drivesSeen = new Set<string>();
  const pending: Obj[] = [];
  for (const item of items) {
    const a: Obj = isPlainObject(item) ? item : { drive: item };
    const drive = relatedId(a.drive, 'drives');
    if (drivesSeen.has(drive)) throw validation('drives', `Drive ${drive} is attached twice`);
    drivesSeen.add(drive);
    const device = (a.device as string | undefined) ?? 'virtio';
    if (!BUS[device]) throw validation('drives', `Device must be one of ${Object.keys(BUS).join(', ')}`);
    if (a.dev_channel !== undefined && a.dev_channel !== null) {
      const ch = parseChannel(a.dev_channel as string, device);
      const key = `${device}/${ch}`;
      if (used.has(key)) throw validation('drives', `Channel ${ch} of ${device} is used twice`);
      used.add(key);
      a.dev_channel = ch;
    }
    pending.push({ ...a, drive, device });
  }
  await checkDrives(
    tx,
    ctx,
    serverOwner,
    serverUuid,
    pending.map((a) => a.drive as string),
  );
  for (const a of pending) {
    const device = a.device as string;
    let channel = a.dev_channel as string | undefined;
    if (!channel) {
      channel = freeChannel(device, used);
      used.add(`${device}/${channel}`);
    }
    out.push({ boot_order: (a.boot_order as number | null | undefined) ?? null, dev_channel: channel, device, drive: a.drive as string });
  }
  return out;
}

function parseChannel(raw: string, device: string): string {
  const m = /^(\d{1,4}):(\d{1,2})$/.exec(String(raw));
  const bus = BUS[device];
  if (!m || Number(m[1]) >= bus.controllers || Number(m[2]) >= bus.units)
    throw validation('drives', `dev_channel for ${device} must be C:U with controller < ${bus.controllers} and unit < ${bus.units}`);
  return `${Number(m[1])}:${Number(m[2])}`;
}

function freeChannel(device: string, used: Set<string>): string {
  const bus = BUS[device];
  for (let c = 0; c < bus.controllers; c++) for (let u = 0; u < bus.units; u++) if (!used.has(`${device}/${c}:${u}`)) return `${c}:${u}`;
  throw validation('drives', `No free ${device} channel left`);
}

/**
 * The drives of an attachment list, locked (uuid order, so two servers attaching the same drives never
 * deadlock), then checked: the caller must see each, the server's owner may attach it (rule 8), a library
 * disk must be cloned first, and a drive without multimount may be on no other server.
 */
async function checkDrives(tx: Tx, ctx: Ctx, serverOwner: string, serverUuid: string | null, uuids: string[]): Promise<void> {
  const repo = ctx.store.resources;
  const own = new Map((await repo.lockMany(tx, 'drives', uuids)).map((d) => [d.uuid, d]));
  const library = await repo.existing(
    tx,
    'libdrives',
    uuids.filter((u) => !own.has(u)),
  );
  for (const uuid of uuids) {
    const lib = library.get(uuid);
    if (lib) {
      // Library CD-ROMs attach directly; library disks must be cloned first (reference §5.8).
      if (lib.body.media !== 'cdrom') throw permission('A library disk must be cloned before it can be attached', 'drives');
      continue;
    }
    const row = own.get(uuid);
    if (!row) throw validation('drives', `Drive ${uuid} does not exist`);
    // The caller must at least see the drive (a stranger's drive "does not exist").
    if (
      row.owner_uuid !== ctx.caller.uuid &&
      row.owner_uuid !== serverOwner &&
      !(await ctx.store.resources.acls.isGranted(tx, ctx.caller.uuid, 'drives', 'LIST', uuid))
    )
      throw validation('drives', `Drive ${uuid} does not exist`);
    await lockAttachable(tx, ctx, { caller: ctx.caller.uuid, serverOwner, kind: 'drives', uuid, point: 'drives', label: 'Drive' });
    const mounts = ((row.body.mounted_on as { uuid: string }[] | undefined) ?? []).filter((m) => m.uuid !== serverUuid);
    if (mounts.length && row.body.media !== 'cdrom' && !row.body.allow_multimount)
      throw new ApiError('permission', `Drive ${uuid} is already mounted on another server and does not allow multimount`, 'drives');
  }
}
