import { randomBytes } from 'node:crypto';
import type { Ctx } from '../../core/context.js';
import { ApiError, permission, validation } from '../../core/errors.js';
import { isPlainObject, relatedId, type Obj } from '../../core/input.js';
import { assertCanAttach, grantedUuids } from '../../core/permissions.js';
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
  for (const a of pending) {
    const device = a.device as string;
    let channel = a.dev_channel as string | undefined;
    if (!channel) {
      channel = freeChannel(device, used);
      used.add(`${device}/${channel}`);
    }
    await checkDrive(tx, ctx, serverOwner, serverUuid, a.drive as string);
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

async function checkDrive(tx: Tx, ctx: Ctx, serverOwner: string, serverUuid: string | null, uuid: string): Promise<void> {
  const row = await tx.selectFrom('resources').select(['kind', 'owner_uuid', 'body']).where('uuid', '=', uuid).where('kind', 'in', ['drives', 'libdrives']).executeTakeFirst();
  if (!row) throw validation('drives', `Drive ${uuid} does not exist`);
  const body = JSON.parse(row.body) as Obj;
  if (row.kind === 'libdrives') {
    // Library CD-ROMs attach directly; library disks must be cloned first (reference §5.8).
    if (body.media !== 'cdrom') throw permission('A library disk must be cloned before it can be attached', 'drives');
    return;
  }
  if (row.owner_uuid !== ctx.caller.uuid && row.owner_uuid !== serverOwner) {
    // The caller must at least see the drive; attaching needs the server owner to hold ATTACH on it.
    const visible = await holdsList(tx, ctx.caller.uuid, uuid);
    if (!visible) throw validation('drives', `Drive ${uuid} does not exist`);
  }
  await assertCanAttach(tx, serverOwner, 'drives', uuid, 'drives');
  const mounts = ((body.mounted_on as { uuid: string }[] | undefined) ?? []).filter((m) => m.uuid !== serverUuid);
  if (mounts.length && body.media !== 'cdrom' && !body.allow_multimount)
    throw new ApiError('permission', `Drive ${uuid} is already mounted on another server and does not allow multimount`, 'drives');
}

async function holdsList(tx: Tx, user: string, uuid: string): Promise<boolean> {
  const row = await grantedUuids(tx, user, 'drives', 'LIST').where('tm.res_uuid', '=', uuid).executeTakeFirst();
  return row !== undefined;
}

/** A NIC as stored. */
export interface Nic {
  boot_order: number | null;
  firewall_policy: string | null;
  ip_v4_conf: { conf: string; ip: string | null } | null;
  ip_v6_conf: { conf: string; ip: string | null } | null;
  mac: string;
  model: string;
  vlan: string | null;
}

const NIC_MODELS = ['virtio', 'e1000', 'rtl8139', 'i82551', 'i82557b', 'i82559er', 'ne2k_pci', 'pcnet'];
const CONFS = ['dhcp', 'static', 'manual'];

/** Locally administered MACs starting 22: as the real service's do. */
export const newMac = (): string => ['22', ...[...randomBytes(5)].map((b) => b.toString(16).padStart(2, '0'))].join(':');

export interface NicChecks {
  /** Throws unless the server owner may use this IP statically on this server. */
  staticIp?(tx: Tx, owner: string, address: string, server: string | null): Promise<void>;
  /** Throws unless the server owner may attach this VLAN. */
  vlan?(tx: Tx, owner: string, vlan: string): Promise<void>;
}

/**
 * Validate a `nics` list against the current NICs (reference §5.7): entries are matched by MAC; a MAC
 * the server does not have is an error; an entry without MAC is a new NIC; vlan and IP configs exclude
 * each other; dhcp takes no ip; static needs an IP the owner holds.
 */
export async function normaliseNics(tx: Tx, current: Nic[], items: unknown[], owner: string, server: string | null, checks: NicChecks): Promise<Nic[]> {
  const known = new Map(current.map((n) => [n.mac.toLowerCase(), n]));
  const seen = new Set<string>();
  const out: Nic[] = [];
  for (const item of items) {
    if (!isPlainObject(item)) throw validation('nics', 'Each NIC must be an object');
    let mac = typeof item.mac === 'string' && item.mac ? item.mac.toLowerCase() : undefined;
    if (mac && !known.has(mac)) throw validation('nics', `The server has no NIC with MAC ${mac}`);
    if (mac && seen.has(mac)) throw validation('nics', `MAC ${mac} is listed twice`);
    mac ??= newMac();
    seen.add(mac);
    const vlan = item.vlan === undefined || item.vlan === null ? null : relatedId(item.vlan, 'nics');
    const v4 = conf(item.ip_v4_conf);
    const v6 = conf(item.ip_v6_conf);
    if (vlan && v4 && v6) throw validation('nics', 'A NIC cannot have a VLAN and both IP configurations');
    if (vlan && (v4 || v6)) throw validation('nics', 'A NIC is either private (vlan) or public (ip_v4_conf/ip_v6_conf), not both');
    const model = (item.model as string | null | undefined) ?? 'virtio';
    if (!NIC_MODELS.includes(model)) throw validation('nics', `model must be one of ${NIC_MODELS.join(', ')}`);
    if (v4?.conf === 'static' && v4.ip) await checks.staticIp?.(tx, owner, v4.ip, server);
    if (vlan) await checks.vlan?.(tx, owner, vlan);
    const policy = item.firewall_policy === undefined || item.firewall_policy === null ? null : relatedId(item.firewall_policy, 'nics');
    out.push({ boot_order: (item.boot_order as number | null | undefined) ?? null, firewall_policy: policy, ip_v4_conf: v4, ip_v6_conf: v6, mac, model, vlan });
  }
  return out;
}

function conf(raw: unknown): { conf: string; ip: string | null } | null {
  if (raw === undefined || raw === null) return null;
  if (!isPlainObject(raw)) throw validation('nics', 'ip_v4_conf/ip_v6_conf must be an object');
  const c = (raw.conf as string | undefined) ?? 'dhcp';
  if (!CONFS.includes(c)) throw validation('nics', `conf must be one of ${CONFS.join(', ')}`);
  const ip = raw.ip === undefined || raw.ip === null ? null : relatedId(raw.ip, 'nics');
  if (c === 'dhcp' && ip) throw validation('nics', 'An IP cannot be given with dhcp configuration');
  if (c === 'static' && !ip) throw validation('nics', 'A static configuration needs an ip');
  if (ip && !/^[0-9a-fA-F:.]{2,45}$/.test(ip)) throw validation('nics', `${ip} is not an IP address`);
  return { conf: c, ip };
}
