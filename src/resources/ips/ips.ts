import Type from 'typebox';
import { isoTimestamp } from '../../core/clock.js';
import type { Ctx, Services } from '../../core/context.js';
import { ApiError, permission, validation } from '../../core/errors.js';
import { f, NO_DEFAULT } from '../../core/fields.js';
import type { Obj } from '../../core/input.js';
import { holds } from '../../core/permissions.js';
import { storedDecl } from '../../core/stored.js';
import type { Db, Tx } from '../../store/db.js';
import { blockOf, isIpv4, poolAddresses, type IpPoolBlock } from './pool.js';

/**
 * Public IPs (reference §13.1). The address is the uuid. An IP is a row of `resources` (kind `ips`) only
 * while someone has it: an account it is assigned to (owner = the account; by the operator now, by
 * subscriptions later) or a running server's DHCP lease (owner null, `_dynamic`). Free pool addresses
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
  owner: f.related({ readonly: true, schemaDefault: null, help: 'IP owner' }),
  resource_uri: f.string({ readonly: true, required: true }),
  server: f.related({ readonly: true, schemaDefault: NO_DEFAULT, help: 'Reference to server using that IP' }),
  subscription: f.related({ readonly: true, schemaDefault: null, help: 'Subscription, related to this IP' }),
  tags: f.relatedMany(),
  uuid: f.string({ readonly: true, required: true, schemaDefault: null, help: 'IP UUID, in this case, the actual IP' }),
};

const ref = (kind: string, uuid: string) => ({ resource_uri: `/api/2.0/${kind}/${uuid}/`, uuid });

/** `meta.name`, mirrored into the body's (hidden) `name` so the indexed name column and filters follow it. */
export function mirrorMetaName(values: Obj): Obj {
  if (values.meta === undefined) return values;
  const name = (values.meta as Obj | null)?.name;
  return { ...values, name: typeof name === 'string' ? name : null };
}

/** `server` refs for a page of IPs, one query; the hidden name mirror goes. */
async function decorate(ctx: Ctx, ips: Obj[]): Promise<void> {
  const rows = await ctx.store.db
    .selectFrom('ip_servers')
    .select(['address', 'server_uuid'])
    .where(
      'address',
      'in',
      ips.map((o) => o.uuid as string),
    )
    .execute();
  const byAddress = new Map(rows.map((r) => [r.address, r.server_uuid]));
  for (const ip of ips) {
    const server = byAddress.get(ip.uuid as string);
    ip.server = server ? ref('servers', server) : null;
    ip.subscription ??= null;
    delete ip.name;
  }
}

export const ips = storedDecl(
  {
    shape: 'collection',
    kind: 'ips',
    flavour: 'custom',
    fields: ipFields,
    defaultLimit: 20,
    listMethods: ['get'],
    detailMethods: ['get', 'put'],
    listFields: ['owner', 'resource_uri', 'server', 'uuid'],
    filtering: { name: 'exact', name__contains: 'exact', tag: 'exact', uuid: 'exact' },
    permissions: ['LIST', 'EDIT', 'ATTACH'],
    taggable: true,
    schemaQuirks: { allowed_list_http_methods: 'get' },
  },
  {
    prepare: (values) => mirrorMetaName(values),
    // Besides owned and ACL-shared IPs, a user sees the DHCP leases of their servers (reference §13.1).
    alsoVisible: (ctx, db) =>
      db
        .selectFrom('acl_grantees as g')
        .innerJoin('acl_rules as r', (j) => j.onRef('r.acl_uuid', '=', 'g.acl_uuid').on('r.permission', '=', 'LIST'))
        .innerJoin('acl_tags as t', 't.acl_uuid', 'g.acl_uuid')
        .innerJoin('tag_members as tm', (j) => j.onRef('tm.tag_uuid', '=', 't.tag_uuid').on('tm.res_type', '=', 'ips'))
        .select('tm.res_uuid as uuid')
        .where('g.grantee_uuid', '=', ctx.caller.uuid)
        .union(
          db
            .selectFrom('ip_servers as l')
            .innerJoin('resources as s', (j) => j.onRef('s.uuid', '=', 'l.server_uuid').on('s.kind', '=', 'servers'))
            .select('l.address as uuid')
            .where('l.dynamic', '=', 1)
            .where('s.owner_uuid', '=', ctx.caller.uuid),
        ),
    decorate,
  },
);

type NetServices = Pick<Services, 'clock' | 'config'>;

function ipBody(s: NetServices, block: IpPoolBlock, extra: Obj = {}): Obj {
  return { gateway: block.gateway, meta: {}, name: null, nameservers: [...s.config.nameservers], netmask: block.prefix, subscription: null, ...extra };
}

/** Insert an IP row unless the address is taken (also by a concurrent transaction); whether it was inserted. */
async function claim(tx: Tx, s: NetServices, address: string, owner: string | null, body: Obj): Promise<boolean> {
  const now = isoTimestamp(s.clock.now());
  const res = await tx
    .insertInto('resources')
    .values({ kind: 'ips', uuid: address, owner_uuid: owner, name: null, status: null, body: JSON.stringify(body), created_at: now, updated_at: now })
    .onConflict((oc) => oc.columns(['uuid', 'kind']).doNothing())
    .executeTakeFirst();
  return Number(res.numInsertedOrUpdatedRows ?? 0) > 0;
}

/** Claim up to `count` free pool addresses, in pool order; fewer when the pool runs out. */
async function claimFree(tx: Tx, s: NetServices, count: number, owner: string | null, extra: Obj = {}): Promise<string[]> {
  const taken = new Set((await tx.selectFrom('resources').select('uuid').where('kind', '=', 'ips').execute()).map((r) => r.uuid));
  const out: string[] = [];
  if (count <= 0) return out;
  for (const address of poolAddresses(s.config.ipPool)) {
    if (taken.has(address)) continue;
    if (await claim(tx, s, address, owner, ipBody(s, blockOf(s.config.ipPool, address)!, extra))) out.push(address);
    if (out.length >= count) break;
  }
  return out;
}

const exhausted = () => new ApiError('concurrency', 'The public IP pool of this location has no free address; try again later');

/**
 * Assign `count` free pool addresses to an account (the operator's `stratus ips assign`; subscriptions
 * later, with their `subscription` reference). All or nothing: too few free addresses is an error.
 */
export async function assignIps(tx: Tx, s: NetServices, ownerUuid: string, count: number, opts: { subscription?: number } = {}): Promise<string[]> {
  const subscription = opts.subscription === undefined ? null : { id: opts.subscription, resource_uri: `/api/2.0/subscriptions/${opts.subscription}/` };
  const got = await claimFree(tx, s, count, ownerUuid, { subscription });
  if (got.length < count) throw new ApiError('concurrency', `The public IP pool has only ${got.length} free address(es), ${count} asked`, 'count');
  return got;
}

/** Take an assigned IP back into the pool (operator). Refused while a server uses it. */
export async function releaseIp(tx: Tx, address: string): Promise<{ owner: string }> {
  const row = await tx.selectFrom('resources').select(['owner_uuid']).where('kind', '=', 'ips').where('uuid', '=', address).executeTakeFirst();
  if (!row || row.owner_uuid === null) throw new ApiError('notexist', `IP ${address} is not assigned to any account`, 'address');
  const use = await tx.selectFrom('ip_servers').select('server_uuid').where('address', '=', address).executeTakeFirst();
  if (use) throw permission(`IP ${address} is in use by server ${use.server_uuid}; remove it from the server first`, 'address');
  await tx.deleteFrom('tag_members').where('res_type', '=', 'ips').where('res_uuid', '=', address).execute();
  await tx.deleteFrom('resources').where('kind', '=', 'ips').where('uuid', '=', address).execute();
  return { owner: row.owner_uuid };
}

/**
 * Whether the server owner may configure `address` statically on a server (spec ACL rule 8): it is an IP
 * the owner holds or holds ATTACH on (else 403), and no other server uses it (else 403). An address that
 * is no account's IP is a 400. `point` is the request field at fault (e.g. `nics`); `server` is the
 * server being configured (its own current use of the address is fine), null for a new server.
 */
export async function assertUsableStaticIp(
  tx: Db | Tx,
  ownerUuid: string,
  address: string,
  opts: { point?: string; server?: string | null } = {},
): Promise<void> {
  const point = opts.point ?? 'ip_v4_conf';
  if (!isIpv4(address)) throw validation(point, `${address} is not an IPv4 address`);
  const row = await tx.selectFrom('resources').select(['uuid', 'owner_uuid']).where('kind', '=', 'ips').where('uuid', '=', address).executeTakeFirst();
  if (!row || row.owner_uuid === null) throw validation(point, `IP ${address} is not an IP of this account; a static configuration needs an IP you hold`);
  if (!(await holds(tx, ownerUuid, 'ips', row, 'ATTACH')))
    throw permission(`The server owner may not use IP ${address}: it needs to own it or hold ATTACH`, point);
  const use = await tx.selectFrom('ip_servers').select('server_uuid').where('address', '=', address).executeTakeFirst();
  if (use && use.server_uuid !== opts.server) throw permission(`IP ${address} is in use by another server`, point);
}

/** Record (or with null, clear) the server a statically configured IP is used by. */
export async function setIpServer(tx: Tx, address: string, serverUuid: string | null): Promise<void> {
  await tx.deleteFrom('ip_servers').where('address', '=', address).where('dynamic', '=', 0).execute();
  if (serverUuid) await tx.insertInto('ip_servers').values({ address, server_uuid: serverUuid, dynamic: 0 }).execute();
}

/** Replace the set of statically configured IPs of a server (its NICs changed). */
export async function setServerStaticIps(tx: Tx, serverUuid: string, addresses: string[]): Promise<void> {
  await tx.deleteFrom('ip_servers').where('server_uuid', '=', serverUuid).where('dynamic', '=', 0).execute();
  const unique = [...new Set(addresses)];
  if (unique.length) {
    await tx.deleteFrom('ip_servers').where('address', 'in', unique).where('dynamic', '=', 0).execute();
    await tx.insertInto('ip_servers').values(unique.map((address) => ({ address, server_uuid: serverUuid, dynamic: 0 }))).execute();
  }
}

/**
 * Lease a free pool address to a starting server's DHCP NIC (one call per NIC). The lease is an
 * ownerless IP row the server owner sees in `/ips/` (no subscription) until `releaseDhcp`.
 * A pool with no free address is a 503.
 */
export async function leaseDhcpIp(tx: Tx, s: NetServices, serverUuid: string): Promise<string> {
  const [address] = await claimFree(tx, s, 1, null, { _dynamic: true });
  if (!address) throw exhausted();
  await tx.insertInto('ip_servers').values({ address, server_uuid: serverUuid, dynamic: 1 }).execute();
  return address;
}

/** Give a stopped server's DHCP leases back to the pool; returns the addresses released. */
export async function releaseDhcp(tx: Tx, serverUuid: string): Promise<string[]> {
  const rows = await tx.selectFrom('ip_servers').select('address').where('server_uuid', '=', serverUuid).where('dynamic', '=', 1).execute();
  const addresses = rows.map((r) => r.address);
  if (!addresses.length) return addresses;
  await tx.deleteFrom('ip_servers').where('server_uuid', '=', serverUuid).where('dynamic', '=', 1).execute();
  await tx.deleteFrom('tag_members').where('res_type', '=', 'ips').where('res_uuid', 'in', addresses).execute();
  await tx.deleteFrom('resources').where('kind', '=', 'ips').where('uuid', 'in', addresses).where('owner_uuid', 'is', null).execute();
  return addresses;
}

/** A deleted server: its leases go back to the pool and its static IPs become free to use. */
export async function detachServerIps(tx: Tx, serverUuid: string): Promise<void> {
  await releaseDhcp(tx, serverUuid);
  await tx.deleteFrom('ip_servers').where('server_uuid', '=', serverUuid).execute();
}

/** The IPs each of a page of servers uses (for `runtime.nics`), one query. */
export async function ipsOfServers(db: Db | Tx, serverUuids: string[]): Promise<Map<string, { address: string; dynamic: boolean }[]>> {
  const out = new Map<string, { address: string; dynamic: boolean }[]>();
  if (!serverUuids.length) return out;
  const rows = await db.selectFrom('ip_servers').select(['address', 'server_uuid', 'dynamic']).where('server_uuid', 'in', serverUuids).orderBy('address').execute();
  for (const r of rows) {
    const list = out.get(r.server_uuid) ?? [];
    list.push({ address: r.address, dynamic: r.dynamic === 1 });
    out.set(r.server_uuid, list);
  }
  return out;
}

/** Every IP row (assigned or leased) with its owner's e-mail and server, for `stratus ips list`. */
export async function listIpRows(db: Db | Tx, ownerUuid?: string) {
  let q = db
    .selectFrom('resources as r')
    .leftJoin('users as u', 'u.uuid', 'r.owner_uuid')
    .leftJoin('ip_servers as l', 'l.address', 'r.uuid')
    .select(['r.uuid as address', 'u.email', 'r.owner_uuid', 'l.server_uuid', 'l.dynamic'])
    .where('r.kind', '=', 'ips');
  if (ownerUuid) q = q.where('r.owner_uuid', '=', ownerUuid);
  return q.orderBy('r.seq').execute();
}
