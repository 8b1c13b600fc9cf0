import type { Ctx, Services } from './context.js';
import { permission as forbidden, validation } from './errors.js';
import type { Db, Tx } from '../store/db.js';
import type { Resource } from '../store/repository.js';
import { grantsOn } from '../store/resources/acls.js';
import { byCodePoint } from './order.js';

/**
 * The ACL permission model (spec "ACL" rules 1–8), in one place. An ACL owned by O grants its rules to
 * its grantees on every resource carrying one of its tags. Tags only ever hold their owner's own
 * resources (tag membership is written by the resource owner only), so a grant reaches only resources
 * of the ACL's owner: permissions cannot be passed on (rule 4).
 */
export const PERMISSIONS = ['LIST', 'EDIT', 'CLONE', 'START', 'STOP', 'OPEN_VNC', 'ATTACH', 'DELETE'] as const;
export type Permission = (typeof PERMISSIONS)[number];
export const isPermission = (p: unknown): p is Permission => typeof p === 'string' && (PERMISSIONS as readonly string[]).includes(p);

/**
 * Permissions that apply to each shareable kind, as its declaration states them (spec table; plus
 * DELETE, which the real ACLs carry and which lets an owner delegate deletion). Others in an ACL are
 * ignored for that kind (rule 2). Filled in when a kind's service is built.
 */
const applicableByKind = new Map<string, readonly Permission[]>();
export const declareApplicable = (kind: string, perms: readonly Permission[]) => applicableByKind.set(kind, perms);
export const applicableTo = (kind: string): readonly Permission[] => applicableByKind.get(kind) ?? [];

/**
 * The caller's effective permissions on each of a set of resources (union over all ACLs and tags,
 * rule 1), restricted to what applies to the kind, sorted. One query for the whole set.
 */
export async function effectivePermissions(
  db: Db | Tx,
  caller: string,
  kind: string,
  uuids: string[],
  applicable: readonly Permission[],
): Promise<Map<string, Permission[]>> {
  const out = new Map<string, Permission[]>();
  if (!uuids.length || !applicable.length) return out;
  const rows = await grantsOn(db, caller, kind, uuids, applicable);
  for (const r of rows) {
    const list = out.get(r.res_uuid) ?? [];
    list.push(r.permission as Permission);
    out.set(r.res_uuid, list);
  }
  for (const list of out.values()) list.sort();
  return out;
}

export interface GranteeEntry {
  permissions: Permission[];
  user: { email: string | null; resource_uri: string; uuid: string };
}

/**
 * One resource's `grantees` from its grants (grantee, e-mail, permission; repeats allowed, one per ACL and
 * tag that gives it): each grantee once, in uuid order, with the applicable permissions it holds, sorted.
 */
export function granteeEntries(
  grants: readonly { grantee_uuid: string; email: string | null; permission: string }[],
  applicable: readonly Permission[],
): GranteeEntry[] {
  const users = new Map<string, GranteeEntry>();
  for (const g of grants) {
    if (!applicable.includes(g.permission as Permission)) continue;
    const entry = users.get(g.grantee_uuid) ?? {
      permissions: [],
      user: { email: g.email, resource_uri: `/api/2.0/user/${g.grantee_uuid}/`, uuid: g.grantee_uuid },
    };
    if (!entry.permissions.includes(g.permission as Permission)) entry.permissions.push(g.permission as Permission);
    users.set(g.grantee_uuid, entry);
  }
  const list = [...users.values()].sort((a, b) => byCodePoint(a.user.uuid, b.user.uuid));
  for (const e of list) e.permissions.sort();
  return list;
}

/** The caller's `permissions` on a resource from the permissions its grants give (repeats allowed). */
export function heldPermissions(held: readonly string[], applicable: readonly Permission[]): Permission[] {
  return [...new Set(held)].filter((p): p is Permission => applicable.includes(p as Permission)).sort();
}

/** Whether `user` may use `perm` on a resource: owners may do everything, others need the grant. */
export async function holds(
  db: Db | Tx,
  user: string,
  kind: string,
  resource: { uuid: string; owner_uuid: string | null },
  perm: Permission,
): Promise<boolean> {
  if (resource.owner_uuid === user) return true;
  const applicable = applicableTo(kind);
  if (!applicable.includes(perm)) return false;
  const perms = await effectivePermissions(db, user, kind, [resource.uuid], applicable);
  return perms.get(resource.uuid)?.includes(perm) ?? false;
}

/** Throw 403 `permission` unless the caller holds `perm` (for a resource already known to be visible). */
export async function requirePermission(
  ctx: Ctx,
  kind: string,
  resource: { uuid: string; owner_uuid: string | null },
  perm: Permission,
  db: Db | Tx = ctx.store.db,
): Promise<void> {
  if (!(await holds(db, ctx.caller.uuid, kind, resource, perm))) throw forbidden(`Permission ${perm} is required on ${kind} ${resource.uuid}`);
}

/**
 * Rule 8, the one check for every reference a server makes (drives, IPs, VLANs, firewall policies): the
 * referenced object must exist (else 400 naming the field) and the server's owner must own it or hold
 * ATTACH on it (else 403) — also when a grantee is the one editing the server. An object the caller may
 * not see (neither its own nor shared with LIST) is refused exactly as a missing one (`missing`, else
 * "<label> <uuid> does not exist"): a 403 would tell a stranger's uuid from an unused one. The row comes
 * back locked, so what is decided about it (free, not mounted elsewhere) holds until the server's change commits.
 */
export async function lockAttachable(
  tx: Tx,
  s: Pick<Services, 'store'>,
  ref: { caller: string; serverOwner: string; kind: string; uuid: string; point: string; label?: string; missing?: string },
): Promise<Resource> {
  const label = ref.label ?? ref.kind;
  const missing = () => validation(ref.point, ref.missing ?? `${label} ${ref.uuid} does not exist`);
  const row = await s.store.resources.lock(tx, ref.kind, ref.uuid);
  if (!row) throw missing();
  if (await holds(tx, ref.serverOwner, ref.kind, row, 'ATTACH')) return row;
  if (row.owner_uuid !== ref.caller && !(await holds(tx, ref.caller, ref.kind, row, 'LIST'))) throw missing();
  throw forbidden(`The server owner may not attach ${label} ${ref.uuid}: it needs to own it or hold ATTACH`, ref.point);
}

/**
 * Rule 5: cloning another user's server needs CLONE on the server and on its attached non-cdrom drives,
 * and ATTACH on its attached cdroms. Throws 403 naming the first missing grant.
 */
export async function assertCanCloneServer(
  db: Db | Tx,
  caller: string,
  server: { uuid: string; owner_uuid: string | null },
  drives: { uuid: string; owner_uuid: string | null; media: string }[],
): Promise<void> {
  if (!(await holds(db, caller, 'servers', server, 'CLONE'))) throw forbidden(`Permission CLONE is required on server ${server.uuid}`);
  for (const d of drives) {
    const perm: Permission = d.media === 'cdrom' ? 'ATTACH' : 'CLONE';
    if (!(await holds(db, caller, 'drives', d, perm))) throw forbidden(`Permission ${perm} is required on drive ${d.uuid}`, 'drives');
  }
}
