import { perObject } from '../../core/metering.js';
import Type from 'typebox';
import type { Ctx, Services } from '../../core/context.js';
import { ApiError, permission } from '../../core/errors.js';
import { f, SUBSCRIPTION_REF } from '../../core/fields.js';
import type { Obj } from '../../core/input.js';
import { storedDecl } from '../../core/stored.js';
import type { Tx } from '../../store/db.js';
import { aServerInVlan, serversOfVlans, setVlansOf } from '../../store/network.js';
import { mirrorMetaName } from '../ips/ips.js';

/**
 * Private VLANs (reference §13.2): rows of `resources` (kind `vlans`) owned by the account they were
 * assigned to (by the operator now, by subscriptions later). A VLAN holds many servers; which servers
 * have a NIC in it is the `vlan_servers` relation, kept by the server service through the helpers below.
 * As with IPs, the `name` filters match `meta.name`.
 */
export const vlanFields = {
  bottom_vlan_tag: f.integer({ readonly: true, nullable: true, schemaDefault: null }),
  meta: f.dict({ schemaDefault: {}, help: 'User defined meta information' }),
  owner: f.related({ readonly: true, schemaDefault: null, help: 'VLAN owner' }),
  resource_uri: f.string({ readonly: true, required: true }),
  servers: f.relatedItems(Type.Unknown(), { readonly: true, schemaDefault: [], help: 'Servers in this VLAN' }),
  subscription: f.related({ readonly: true, schemaDefault: null, help: 'Subscription related to this VLAN', output: SUBSCRIPTION_REF }),
  tags: f.relatedMany(),
  uuid: f.string({ readonly: true, required: true, schemaDefault: null, help: 'VLAN UUID' }),
};

/** `servers` refs for a page of VLANs, one query; the hidden name mirror goes. */
async function decorate(ctx: Ctx, vlans: Obj[]): Promise<void> {
  const byVlan = await serversOfVlans(
    ctx.store.db,
    vlans.map((v) => v.uuid as string),
  );
  for (const v of vlans) {
    v.servers = (byVlan.get(v.uuid as string) ?? []).map((server) => ({ resource_uri: `/api/2.0/servers/${server}/`, uuid: server }));
    v.subscription ??= null;
    v.bottom_vlan_tag ??= null;
    delete v.name;
  }
}

export const vlans = storedDecl(
  {
    kind: 'vlans',
    flavour: 'custom',
    fields: vlanFields,
    listMethods: ['get'],
    detailMethods: ['get', 'put'],
    listFields: ['owner', 'resource_uri', 'uuid'],
    permissions: ['LIST', 'EDIT', 'ATTACH'],
    taggable: true,
    wire: { advertised: { allowed_list_http_methods: 'get' } },
    meter: perObject('vlans', 'vlan'),
  },
  { prepare: (values) => mirrorMetaName(values), decorate },
);

/** Create `count` private VLANs for an account (the operator's `stratus vlans assign`; subscriptions later). */
export async function assignVlans(
  tx: Tx,
  s: Pick<Services, 'clock' | 'ids' | 'store' | 'config'>,
  ownerUuid: string,
  count: number,
  opts: { subscription?: number } = {},
): Promise<string[]> {
  const subscription = opts.subscription === undefined ? null : { id: opts.subscription, resource_uri: `/api/2.0/subscriptions/${opts.subscription}/` };
  const tags = await freeVlanTags(tx, s, count);
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const uuid = s.ids.uuid();
    await vlans.service.insert(tx, s, uuid, ownerUuid, { bottom_vlan_tag: tags?.[i] ?? null, meta: {}, name: null, subscription });
    out.push(uuid);
  }
  return out;
}

/**
 * The lowest `count` tags of the location's VLAN pool (`--vlan-pool`, a range per location with several) no
 * VLAN holds; null without a pool (VLANs show no tag, as the recorded answers do). An exhausted pool refuses
 * the assignment (403 `permission`, naming the pool) rather than handing out a tag twice.
 */
async function freeVlanTags(tx: Tx, s: Pick<Services, 'store' | 'config'>, count: number): Promise<number[] | null> {
  const pool = s.config.vlanPool;
  if (!pool || count <= 0) return null;
  // Another request or process may be taking tags at the same time: take turns until commit.
  await s.store.claim(tx, 'vlan-pool');
  const used = new Set<number>();
  for await (const row of s.store.resources.ownedFields(tx, 'vlans', ['bottom_vlan_tag'])) {
    const tag = Number(row.fields.bottom_vlan_tag);
    if (Number.isInteger(tag)) used.add(tag);
  }
  const out: number[] = [];
  for (let tag = pool.from; tag <= pool.to && out.length < count; tag++) if (!used.has(tag)) out.push(tag);
  if (out.length < count) throw permission(`The VLAN pool ${pool.from}-${pool.to} of this location has ${out.length} free tags, ${count} asked`, 'vlans');
  return out;
}

/** Remove a VLAN from its account (operator). Refused while servers are in it. */
export async function releaseVlan(tx: Tx, s: Pick<Services, 'store'>, uuid: string): Promise<{ owner: string | null }> {
  const row = await s.store.resources.lock(tx, 'vlans', uuid);
  if (!row) throw new ApiError('notexist', `No VLAN ${uuid}`, 'uuid');
  const member = await aServerInVlan(tx, uuid);
  if (member) throw permission(`VLAN ${uuid} still has server ${member} in it; remove the NIC first`, 'uuid');
  await s.store.resources.remove(tx, 'vlans', uuid);
  return { owner: row.owner_uuid };
}

/** Replace the set of VLANs a server has NICs in (its NICs changed); an empty list takes it out of all. */
export const setServerVlans = (tx: Tx, serverUuid: string, vlanUuids: string[], opts: { created?: boolean } = {}): Promise<void> =>
  setVlansOf(tx, serverUuid, vlanUuids, opts);

/** Every VLAN with its owner's e-mail and server count, for `stratus vlans list`. */
export async function listVlanRows(s: Pick<Services, 'store'>, ownerUuid?: string) {
  const rows = await s.store.resources.listWithOwnerEmail(s.store.db, 'vlans', ownerUuid);
  const members = await serversOfVlans(
    s.store.db,
    rows.map((r) => r.uuid),
  );
  return rows.map((r) => ({ uuid: r.uuid, email: r.email, servers: members.get(r.uuid)?.length ?? 0 }));
}
