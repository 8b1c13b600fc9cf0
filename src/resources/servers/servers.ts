import { audit } from '../../core/audit.js';
import type { Ctx } from '../../core/context.js';
import { notFound, permission, validation } from '../../core/errors.js';
import type { Obj } from '../../core/input.js';
import { storedDecl, type Row } from '../../core/stored.js';
import type { Tx } from '../../store/db.js';
import { drives } from '../drives/drives.js';
import { existingJobs } from '../jobs/jobs.js';
import { normaliseAttachments, normaliseNics, type Attachment, type Nic } from './attachments.js';
import { forgetNics, nicChecks, recordNics } from './network.js';
import { serverFields } from './fields.js';
import { resolvePubkeyUuids as resolvePubkeys } from '../keypairs/keypairs.js';
import { checkHardware, defaultSmp } from './hardware.js';
import { serverActions } from './lifecycle.js';
import { presentRuntime } from './runtime.js';

/**
 * Servers on the simulated hypervisor (spec "Server", reference §5). This module is the declaration and
 * the edit rules; the lifecycle (start, stop, shutdown, VNC, clone, guest events) is in lifecycle.ts.
 */


/** Keep drives' `mounted_on` and `mounted`/`unmounted` status in step with a server's attachments. */
export async function syncMounts(tx: Tx, ctx: Pick<Ctx, 'clock'>, server: string, before: string[], after: string[]): Promise<void> {
  const ref = { resource_uri: `/api/2.0/servers/${server}/`, uuid: server };
  for (const uuid of before.filter((d) => !after.includes(d)))
    await drives.service.patch(tx, ctx, uuid, (b) => {
      const mounted_on = ((b.mounted_on as { uuid: string }[]) ?? []).filter((m) => m.uuid !== server);
      return { ...b, mounted_on, status: b.status === 'mounted' && !mounted_on.length ? 'unmounted' : b.status };
    });
  for (const uuid of after.filter((d) => !before.includes(d)))
    await drives.service.patch(tx, ctx, uuid, (b) => {
      const mounted_on = [...((b.mounted_on as { uuid: string }[]) ?? []).filter((m) => m.uuid !== server), ref];
      return { ...b, mounted_on, status: b.status === 'unmounted' ? 'mounted' : b.status };
    });
}

const attachedDrives = (body: Obj) => ((body.drives as Attachment[] | undefined) ?? []).map((a) => a.drive);

/** Fields a running server accepts; everything else in a PUT is ignored (spec constraint 1). */
const RUNNING_EDITABLE = new Set(['name', 'meta', 'tags']);

async function presentServers(ctx: Ctx, servers: Obj[]): Promise<void> {
  const live = await existingJobs(ctx, servers.flatMap((s) => (s.jobs as string[] | undefined) ?? []));
  const now = ctx.clock.now();
  for (const s of servers) {
    const running = s.status === 'running' || s.status === 'stopping' || s.status === 'paused';
    const rt = running ? presentRuntime(s, now) : null;
    s.runtime = rt?.server ?? null;
    s.drives = ((s.drives as Attachment[] | undefined) ?? []).map((a) => ({
      boot_order: a.boot_order,
      dev_channel: a.dev_channel,
      device: a.device,
      drive: { resource_uri: `/api/2.0/drives/${a.drive}/`, uuid: a.drive },
      runtime: rt ? rt.drive(a.drive) : null,
    }));
    s.nics = ((s.nics as Nic[] | undefined) ?? []).map((n) => ({
      boot_order: n.boot_order,
      firewall_policy: n.firewall_policy ? { resource_uri: `/api/2.0/fwpolicies/${n.firewall_policy}/`, uuid: n.firewall_policy } : null,
      ip_v4_conf: n.ip_v4_conf ? { conf: n.ip_v4_conf.conf, ip: n.ip_v4_conf.ip ? { resource_uri: `/api/2.0/ips/${n.ip_v4_conf.ip}/`, uuid: n.ip_v4_conf.ip } : null } : null,
      ip_v6_conf: n.ip_v6_conf ? { conf: n.ip_v6_conf.conf, ip: n.ip_v6_conf.ip ? { resource_uri: `/api/2.0/ips/${n.ip_v6_conf.ip}/`, uuid: n.ip_v6_conf.ip } : null } : null,
      mac: n.mac,
      model: n.model,
      runtime: rt ? rt.nic(n.mac) : null,
      vlan: n.vlan ? { resource_uri: `/api/2.0/vlans/${n.vlan}/`, uuid: n.vlan } : null,
    }));
    s.pubkeys = ((s.pubkeys as string[] | undefined) ?? []).map((uuid) => ({ resource_uri: `/api/2.0/pubkeys/${uuid}/`, uuid }));
    s.jobs = ((s.jobs as string[] | undefined) ?? []).filter((j) => live.has(j)).map((uuid) => ({ resource_uri: `/api/2.0/jobs/${uuid}/`, uuid }));
  }
}

/** Normalise drives, NICs and pubkeys of a server definition in the write transaction. */
async function normalise(tx: Tx, ctx: Ctx, owner: string, server: string, values: Obj, current: Obj): Promise<Obj> {
  const out = { ...values };
  if (values.drives !== undefined) out.drives = await normaliseAttachments(tx, ctx, owner, server, (values.drives as unknown[] | null) ?? []);
  if (values.nics !== undefined) {
    out.nics = await normaliseNics(tx, (current.nics as Nic[] | undefined) ?? [], (values.nics as unknown[] | null) ?? [], owner, server, nicChecks);
    await recordNics(tx, server, out.nics as Nic[]);
  }
  if (values.pubkeys !== undefined) out.pubkeys = await resolvePubkeys(tx, owner, (values.pubkeys as unknown[] | null) ?? []);
  return out;
}

export const servers = storedDecl(
  {
    shape: 'collection',
    kind: 'servers',
    flavour: 'custom',
    fields: serverFields,
    defaultLimit: 20,
    listMethods: ['get', 'post'],
    detailMethods: ['get', 'put', 'delete'],
    listFields: ['name', 'owner', 'resource_uri', 'runtime', 'status', 'uuid'],
    filtering: { name: 'exact', name__contains: 'exact', tag: 'exact', uuid: 'exact' },
    ordering: ['uuid', 'name'],
    permissions: ['LIST', 'EDIT', 'CLONE', 'START', 'STOP', 'OPEN_VNC', 'DELETE'],
    taggable: true,
    actions: serverActions,
  },
  {
    prepare(values, mode) {
      if (mode === 'update') return values;
      return { ...values, status: 'stopped', jobs: [], drives: values.drives ?? [], nics: values.nics ?? [], pubkeys: values.pubkeys ?? [] };
    },
    async afterWrite(tx, ctx, uuid, values, mode, input) {
      if (mode !== 'create') return;
      const body = await normalise(tx, ctx, ctx.caller.uuid, uuid, values, {});
      body.smp ??= defaultSmp(ctx, body);
      checkHardware(ctx, body);
      const stored = await servers.service.patch(tx, ctx, uuid, (b) => ({ ...b, drives: body.drives, nics: body.nics, pubkeys: body.pubkeys, smp: body.smp }));
      await syncMounts(tx, ctx, uuid, [], attachedDrives(stored ?? {}));
      // `details` are the call parameters, with smp filled in as the real log shows (reference §18).
      await audit(tx, ctx, { action: 'create', category: 'Servers', uuid, owner: ctx.caller.uuid, actor: ctx.caller.uuid, details: JSON.stringify({ ...input, smp: body.smp }) });
    },
    async beforeUpdate(tx, ctx, row, values) {
      const current = JSON.parse(row.body) as Obj;
      const owner = row.owner_uuid ?? ctx.caller.uuid;
      let next = values;
      if (current.status !== 'stopped') next = Object.fromEntries(Object.entries(values).filter(([k]) => RUNNING_EDITABLE.has(k)));
      next = await normalise(tx, ctx, owner, row.uuid, next, current);
      checkHardware(ctx, { ...current, ...next });
      if (next.drives !== undefined) await syncMounts(tx, ctx, row.uuid, attachedDrives(current), attachedDrives(next));
      await audit(tx, ctx, { action: 'update', category: 'Servers', uuid: row.uuid, owner, actor: ctx.caller.uuid, details: JSON.stringify(values) });
      return next;
    },
    async beforeDelete(tx, ctx, uuid, row, query) {
      const body = JSON.parse(row.body) as Obj;
      if (body.status !== 'stopped') throw permission(`Cannot delete guest in state "${body.status}". Guest should be in state "stopped"`);
      const recurse = [query.recurse].flat().pop() as string | undefined;
      if (recurse !== undefined && !['all_drives', 'disks', 'cdroms'].includes(recurse)) throw validation('recurse', 'recurse must be all_drives, disks or cdroms');
      await syncMounts(tx, ctx, uuid, attachedDrives(body), []);
      await forgetNics(tx, uuid);
      if (recurse) {
        // The server's own drives of the chosen media go with it (library cdroms are never deleted).
        const attached = attachedDrives(body);
        const rows = attached.length ? await tx.selectFrom('resources').select(['uuid', 'body']).where('kind', '=', 'drives').where('uuid', 'in', attached).execute() : [];
        for (const d of rows) {
          const media = (JSON.parse(d.body) as Obj).media;
          if (recurse === 'all_drives' || (recurse === 'disks' && media === 'disk') || (recurse === 'cdroms' && media === 'cdrom')) await drives.service.removeWithin(tx, ctx, d.uuid);
        }
      }
      await audit(tx, ctx, { action: 'delete', category: 'Servers', uuid, owner: row.owner_uuid ?? ctx.caller.uuid, actor: ctx.caller.uuid });
    },
    decorate: presentServers,
  },
);

/** The server row if the caller may see it (used by the lifecycle). */
export async function serverRow(tx: Tx, uuid: string): Promise<Row> {
  const row = (await tx.selectFrom('resources').selectAll().where('kind', '=', 'servers').where('uuid', '=', uuid).executeTakeFirst()) as Row | undefined;
  if (!row) throw notFound(uuid);
  return row;
}
