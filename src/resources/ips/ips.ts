import { perObject } from '../../core/metering.js';
import Type from 'typebox';
import type { Ctx, Services } from '../../core/context.js';
import { ApiError, permission, validation } from '../../core/errors.js';
import { f, NO_DEFAULT, SUBSCRIPTION_REF } from '../../core/fields.js';
import type { Obj } from '../../core/input.js';
import { lockAttachable } from '../../core/permissions.js';
import { storedDecl } from '../../core/stored.js';
import type { Tx } from '../../store/db.js';
import { ipsSharedOrLeasedTo, serverOfIp, serversOfIps, setStaticIps, usesOfIps } from '../../store/network.js';
import { ref } from '../../store/repository.js';
import { isIpv4 } from '../../core/ip-pool.js';

/**
 * Public IPs (reference §13.1). The address is the uuid. An IP is a row of `resources` (kind `ips`) only
 * while someone has it: an account it is assigned to (owner = the account; by the operator now, by
 * subscriptions later) or a running server's DHCP lease (owner null; the simulator's network, sim/network.ts). Free pool addresses
 * are computed from the configured pool minus those rows, never stored: the pool can grow or shrink
 * with the configuration, a /16 costs no 65 000 rows, and two processes claiming the same address
 * are kept apart by the unique (uuid, kind) index (INSERT … ON CONFLICT DO NOTHING, then the next one).
 * Which server uses an IP is the `ip_servers` relation, kept by the server service through the helpers
 * below. IPs and VLANs have no name of their own: the `name` filters match the `name` in `meta` (the
 * key the recorded API's clients use), mirrored into the indexed name column.
 */
export const ipFields = {
  gateway: f.string({ readonly: true, required: true, schemaDefault: null, help: 'Gateway IP' }),
  meta: f.dict({ schemaDefault: {}, help: 'User defined meta information' }),
  nameservers: f.list(Type.String(), { readonly: true, schemaDefault: null, help: 'Nameserver IPs' }),
  netmask: f.integer({ readonly: true, required: true, schemaDefault: null, help: 'IP netmask' }),
  // null for a running server's DHCP lease.
  owner: f.related({ readonly: true, nullable: true, schemaDefault: null, help: 'IP owner' }),
  resource_uri: f.string({ readonly: true, required: true }),
  server: f.related({ readonly: true, nullable: true, schemaDefault: NO_DEFAULT, help: 'Reference to server using that IP' }),
  subscription: f.related({ readonly: true, schemaDefault: null, help: 'Subscription, related to this IP', output: SUBSCRIPTION_REF }),
  tags: f.relatedMany(),
  uuid: f.string({ readonly: true, required: true, schemaDefault: null, help: 'IP UUID, in this case, the actual IP' }),
};

/** `meta.name`, mirrored into the body's (hidden) `name` so the indexed name column and filters follow it. */
export function mirrorMetaName(values: Obj): Obj {
  if (values.meta === undefined) return values;
  const name = (values.meta as Obj | null)?.name;
  return { ...values, name: typeof name === 'string' ? name : null };
}

/** `server` refs for a page of IPs, one query; the hidden name mirror goes. */
async function decorate(ctx: Ctx, ips: Obj[]): Promise<void> {
  const byAddress = await serversOfIps(
    ctx.store.db,
    ips.map((o) => o.uuid as string),
  );
  for (const ip of ips) {
    const server = byAddress.get(ip.uuid as string);
    ip.server = server ? ref('servers', server) : null;
    ip.subscription ??= null;
    delete ip.name;
  }
}

export const ips = storedDecl(
  {
    kind: 'ips',
    flavour: 'custom',
    fields: ipFields,
    listMethods: ['get'],
    detailMethods: ['get', 'put'],
    listFields: ['owner', 'resource_uri', 'server', 'uuid'],
    permissions: ['LIST', 'EDIT', 'ATTACH'],
    taggable: true,
    wire: { advertised: { allowed_list_http_methods: 'get' } },
    meter: perObject('ips', 'ip'),
  },
  {
    prepare: (values) => mirrorMetaName(values),
    // Besides owned and ACL-shared IPs, a user sees the DHCP leases of their servers (reference §13.1).
    alsoVisible: (ctx, db) => ipsSharedOrLeasedTo(db, ctx.caller.uuid, ctx.store.resources.ownedUuids(db, 'servers', ctx.caller.uuid)),
    decorate,
  },
);

type NetServices = Pick<Services, 'sim'>;

/**
 * Assign `count` free pool addresses to an account (the operator's `stratus ips assign`; subscriptions
 * later, with their `subscription` reference). All or nothing: too few free addresses is an error.
 */
export async function assignIps(tx: Tx, s: NetServices, ownerUuid: string, count: number, opts: { subscription?: number } = {}): Promise<string[]> {
  const subscription = opts.subscription === undefined ? null : { id: opts.subscription, resource_uri: `/api/2.0/subscriptions/${opts.subscription}/` };
  const got = await s.sim.network.claimAddresses(tx, count, ownerUuid, { subscription });
  if (got.length < count) throw new ApiError('concurrency', `The public IP pool has only ${got.length} free address(es), ${count} asked`, 'count');
  return got;
}

/** Take an assigned IP back into the pool (operator). Refused while a server uses it. */
export async function releaseIp(tx: Tx, s: Pick<Services, 'store'>, address: string): Promise<{ owner: string }> {
  const row = await s.store.resources.lock(tx, 'ips', address);
  if (!row || row.owner_uuid === null) throw new ApiError('notexist', `IP ${address} is not assigned to any account`, 'address');
  const user = await serverOfIp(tx, address);
  if (user) throw permission(`IP ${address} is in use by server ${user}; remove it from the server first`, 'address');
  await s.store.resources.remove(tx, 'ips', address);
  return { owner: row.owner_uuid };
}

/**
 * Whether the server owner may configure `address` statically on a server (spec ACL rule 8): it is an IP
 * some account holds (a lease or an unknown address is a 400), the owner owns it or holds ATTACH (else
 * 403, or the same 400 when the caller may not see it; see `lockAttachable`, which also locks it), and no
 * other server uses it (else 403). `point` is the request field at fault; `server` the server being
 * configured (its own use is fine), null for a new one; `caller` who asks (the owner unless said).
 */
export async function assertUsableStaticIp(
  tx: Tx,
  s: Pick<Services, 'store'>,
  ownerUuid: string,
  address: string,
  opts: { point?: string; server?: string | null; caller?: string } = {},
): Promise<void> {
  const point = opts.point ?? 'ip_v4_conf';
  if (!isIpv4(address)) throw validation(point, `${address} is not an IPv4 address`);
  // A lease (no owner) or an address nobody holds is no IP to configure: 400 before any permission question,
  // and a stranger's IP the caller may not see is the same 400 (lockAttachable).
  const missing = `IP ${address} is not an IP of this account; a static configuration needs an IP you hold`;
  const held = await s.store.resources.lock(tx, 'ips', address);
  if (!held || held.owner_uuid === null) throw validation(point, missing);
  await lockAttachable(tx, s, { caller: opts.caller ?? ownerUuid, serverOwner: ownerUuid, kind: 'ips', uuid: address, point, label: 'IP', missing });
  const user = await serverOfIp(tx, address);
  if (user && user !== opts.server) throw permission(`IP ${address} is in use by another server`, point);
}

/** Replace the set of statically configured IPs of a server (its NICs changed). */
export const setServerStaticIps = (tx: Tx, serverUuid: string, addresses: string[], opts: { created?: boolean } = {}): Promise<void> =>
  setStaticIps(tx, serverUuid, addresses, opts);

/** Every IP row (assigned or leased) with its owner's e-mail and server, for `stratus ips list`. */
export async function listIpRows(s: Pick<Services, 'store'>, ownerUuid?: string) {
  const rows = await s.store.resources.listWithOwnerEmail(s.store.db, 'ips', ownerUuid);
  const uses = await usesOfIps(
    s.store.db,
    rows.map((r) => r.uuid),
  );
  const byAddress = new Map(uses.map((u) => [u.address, u]));
  return rows.map((r) => ({
    address: r.uuid,
    email: r.email,
    owner_uuid: r.owner_uuid,
    server_uuid: byAddress.get(r.uuid)?.server_uuid ?? null,
    dynamic: byAddress.get(r.uuid)?.dynamic ?? null,
  }));
}
