import type { Ctx } from '../../core/context.js';
import { permission, validation } from '../../core/errors.js';
import { record } from '../../core/events.js';
import type { Obj } from '../../core/input.js';
import { storedDecl } from '../../core/stored.js';
import { guestStates, forgetServer } from '../../sim/hypervisor.js';
import type { Tx } from '../../store/db.js';
import { ref } from '../../store/repository.js';
import { drives } from '../drives/drives.js';
import { existingJobs } from '../jobs/jobs.js';
import { resolvePubkeyUuids as resolvePubkeys } from '../keypairs/keypairs.js';
import { normaliseAttachments, type Attachment } from './attachments.js';
import { cloneAction, cloneTimers } from './clone.js';
import { consoleActions } from './consoles.js';
import { serverFields } from './fields.js';
import { checkHardware, defaultSmp } from './hardware.js';
import { attachedDrives, syncMounts } from './mounts.js';
import { forgetNics, normaliseNics, recordNics, type Nic } from './nics.js';
import { powerActions, powerTimers } from './power.js';
import { reconcileTimers } from './reconcile.js';
import { presentRuntime } from './runtime.js';

/**
 * Servers on the simulated hypervisor (spec "Server", reference §5). This module is the declaration, the
 * edit rules and the presentation; power transitions are in power.ts, tunnels in consoles.ts, clones in
 * clone.ts, the reconciler in reconcile.ts.
 */

/** Fields a running server accepts; everything else in a PUT is ignored (spec constraint 1). */
const RUNNING_EDITABLE = new Set(['name', 'meta', 'tags']);
const RUNNING = new Set(['running', 'stopping', 'paused']);

async function presentServers(ctx: Ctx, servers: Obj[]): Promise<void> {
  const live = await existingJobs(
    ctx,
    servers.flatMap((s) => (s.jobs as string[] | undefined) ?? []),
  );
  const guests = await guestStates(
    ctx.store.db,
    servers.filter((s) => RUNNING.has(s.status as string)).map((s) => s.uuid as string),
  );
  const now = ctx.clock.now();
  for (const s of servers) {
    const rt = RUNNING.has(s.status as string) ? presentRuntime(s, guests.get(s.uuid as string) ?? {}, now) : null;
    s.runtime = rt?.server ?? null;
    s.drives = ((s.drives as Attachment[] | undefined) ?? []).map((a) => ({
      boot_order: a.boot_order,
      dev_channel: a.dev_channel,
      device: a.device,
      drive: ref('drives', a.drive),
      runtime: rt ? rt.drive(a.drive) : null,
    }));
    s.nics = ((s.nics as Nic[] | undefined) ?? []).map((n) => ({
      boot_order: n.boot_order,
      firewall_policy: n.firewall_policy ? ref('fwpolicies', n.firewall_policy) : null,
      ip_v4_conf: n.ip_v4_conf ? { conf: n.ip_v4_conf.conf, ip: n.ip_v4_conf.ip ? ref('ips', n.ip_v4_conf.ip) : null } : null,
      ip_v6_conf: n.ip_v6_conf ? { conf: n.ip_v6_conf.conf, ip: n.ip_v6_conf.ip ? ref('ips', n.ip_v6_conf.ip) : null } : null,
      mac: n.mac,
      model: n.model,
      runtime: rt ? rt.nic(n.mac) : null,
      vlan: n.vlan ? ref('vlans', n.vlan) : null,
    }));
    s.pubkeys = ((s.pubkeys as string[] | undefined) ?? []).map((uuid) => ref('pubkeys', uuid));
    s.jobs = ((s.jobs as string[] | undefined) ?? []).filter((j) => live.has(j)).map((uuid) => ref('jobs', uuid));
  }
}

/** Normalise drives, NICs and pubkeys of a server definition in the write transaction. */
async function normalise(tx: Tx, ctx: Ctx, owner: string, server: string, values: Obj, current: Obj): Promise<Obj> {
  const out = { ...values };
  if (values.drives !== undefined) out.drives = await normaliseAttachments(tx, ctx, owner, server, (values.drives as unknown[] | null) ?? []);
  if (values.nics !== undefined) {
    out.nics = await normaliseNics(tx, ctx, (current.nics as Nic[] | undefined) ?? [], (values.nics as unknown[] | null) ?? [], owner, server);
    await recordNics(tx, server, out.nics as Nic[]);
  }
  if (values.pubkeys !== undefined) out.pubkeys = await resolvePubkeys(ctx, tx, owner, (values.pubkeys as unknown[] | null) ?? []);
  return out;
}

export const servers = storedDecl(
  {
    kind: 'servers',
    flavour: 'custom',
    fields: serverFields,
    listMethods: ['get', 'post'],
    detailMethods: ['get', 'put', 'delete'],
    listFields: ['name', 'owner', 'resource_uri', 'runtime', 'status', 'uuid'],
    ordering: ['uuid', 'name'],
    permissions: ['LIST', 'EDIT', 'CLONE', 'START', 'STOP', 'OPEN_VNC', 'DELETE'],
    taggable: true,
    actions: { ...powerActions, ...consoleActions, clone: cloneAction((ctx, uuid) => servers.service.get(ctx, uuid)) },
    timers: { ...powerTimers, ...cloneTimers, ...reconcileTimers },
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
      const stored = await ctx.store.resources.patch(tx, ctx.clock.now(), 'servers', uuid, (b) => ({
        ...b,
        drives: body.drives,
        nics: body.nics,
        pubkeys: body.pubkeys,
        smp: body.smp,
      }));
      await syncMounts(tx, ctx, uuid, [], attachedDrives(stored ?? {}));
      // `details` are the call parameters, with smp filled in as the real log shows (reference §18).
      await record(tx, ctx, {
        action: 'create',
        category: 'Servers',
        uuid,
        owner: ctx.caller.uuid,
        actor: ctx.caller.uuid,
        details: JSON.stringify({ ...input, smp: body.smp }),
      });
    },
    async beforeUpdate(tx, ctx, row, values) {
      const current = row.body;
      const owner = row.owner_uuid ?? ctx.caller.uuid;
      let next = values;
      if (current.status !== 'stopped') next = Object.fromEntries(Object.entries(values).filter(([k]) => RUNNING_EDITABLE.has(k)));
      next = await normalise(tx, ctx, owner, row.uuid, next, current);
      checkHardware(ctx, { ...current, ...next });
      if (next.drives !== undefined) await syncMounts(tx, ctx, row.uuid, attachedDrives(current), attachedDrives(next));
      await record(tx, ctx, { action: 'update', category: 'Servers', uuid: row.uuid, owner, actor: ctx.caller.uuid, details: JSON.stringify(values) });
      return next;
    },
    async beforeDelete(tx, ctx, uuid, row, query) {
      const body = row.body;
      if (body.status !== 'stopped') throw permission(`Cannot delete guest in state "${body.status}". Guest should be in state "stopped"`);
      const recurse = [query.recurse].flat().pop() as string | undefined;
      if (recurse !== undefined && !['all_drives', 'disks', 'cdroms'].includes(recurse))
        throw validation('recurse', 'recurse must be all_drives, disks or cdroms');
      const attached = attachedDrives(body);
      await syncMounts(tx, ctx, uuid, attached, []);
      await forgetNics(tx, uuid);
      await forgetServer(tx, ctx, uuid);
      if (recurse) {
        // The server's own drives of the chosen media go with it (library cdroms are never deleted).
        for (const d of await ctx.store.resources.getMany(tx, 'drives', attached)) {
          const media = d.body.media;
          if (recurse === 'all_drives' || (recurse === 'disks' && media === 'disk') || (recurse === 'cdroms' && media === 'cdrom'))
            await drives.service.removeWithin(tx, ctx, d.uuid);
        }
      }
      await record(tx, ctx, { action: 'delete', category: 'Servers', uuid, owner: row.owner_uuid ?? ctx.caller.uuid, actor: ctx.caller.uuid });
    },
    decorate: presentServers,
  },
);
