import { serverUsage } from './meter.js';
import type { Ctx } from '../../core/context.js';
import { permission, validation } from '../../core/errors.js';
import { record } from '../../core/events.js';
import type { Obj } from '../../core/input.js';
import { storedDecl } from '../../core/stored.js';
import { availabilityGroups } from '../placement/availability-groups.js';
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
import { forgetNics, normaliseNics, publicPolicies, recordNics, type Nic } from './nics.js';
import { powerActions, powerTimers, stopForBilling } from './power.js';
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

/** A server as stored, with its references as objects: what depends on this version of the row only. */
function presentStatic(s: Obj): Obj {
  return {
    ...s,
    runtime: null,
    drives: ((s.drives as Attachment[] | undefined) ?? []).map((a) => ({
      boot_order: a.boot_order,
      dev_channel: a.dev_channel,
      device: a.device,
      drive: ref('drives', a.drive),
      runtime: null,
    })),
    nics: ((s.nics as Nic[] | undefined) ?? []).map((n) => ({
      boot_order: n.boot_order,
      firewall_policy: n.firewall_policy ? ref('fwpolicies', n.firewall_policy) : null,
      ip_v4_conf: n.ip_v4_conf ? { conf: n.ip_v4_conf.conf, ip: n.ip_v4_conf.ip ? ref('ips', n.ip_v4_conf.ip) : null } : null,
      ip_v6_conf: n.ip_v6_conf ? { conf: n.ip_v6_conf.conf, ip: n.ip_v6_conf.ip ? ref('ips', n.ip_v6_conf.ip) : null } : null,
      mac: n.mac,
      model: n.model,
      runtime: null,
      vlan: n.vlan ? ref('vlans', n.vlan) : null,
    })),
    pubkeys: ((s.pubkeys as string[] | undefined) ?? []).map((uuid) => ref('pubkeys', uuid)),
    jobs: ((s.jobs as string[] | undefined) ?? []).map((uuid) => ref('jobs', uuid)),
  };
}

type Ref = { uuid: string };

/** What changes without the row changing: the runtime of running servers (time, the hypervisor) and live jobs. */
async function presentServers(ctx: Ctx, servers: Obj[], rows: { body: Obj }[]): Promise<void> {
  const withJobs = servers.filter((s) => (s.jobs as Ref[]).length);
  const live = await existingJobs(
    ctx,
    withJobs.flatMap((s) => (s.jobs as Ref[]).map((j) => j.uuid)),
  );
  for (const s of withJobs) s.jobs = (s.jobs as Ref[]).filter((j) => live.has(j.uuid));
  const running = servers.flatMap((s, i) => (RUNNING.has(s.status as string) ? [i] : []));
  if (!running.length) return;
  const guests = await ctx.sim.hypervisor.guestStates(
    ctx.store.db,
    running.map((i) => servers[i].uuid as string),
  );
  const versions = await ctx.sim.firewall.policyVersions(
    ctx.store.db,
    running.flatMap((i) => publicPolicies((rows[i].body.nics as Nic[] | undefined) ?? [])),
  );
  const now = ctx.clock.now();
  for (const i of running) {
    const s = servers[i];
    const rt = presentRuntime(ctx.sim.hypervisor, rows[i].body, guests.get(s.uuid as string) ?? {}, now, versions);
    s.runtime = rt.server;
    s.drives = (s.drives as (Obj & { drive: Ref })[]).map((d) => ({ ...d, runtime: rt.drive(d.drive.uuid) }));
    s.nics = (s.nics as Obj[]).map((n) => ({ ...n, runtime: rt.nic(n.mac as string) }));
  }
}

/** Normalise drives, NICs and pubkeys of a server definition in the write transaction. */
async function normalise(tx: Tx, ctx: Ctx, owner: string, server: string, values: Obj, current: Obj | undefined): Promise<Obj> {
  const out = { ...values };
  if (values.drives !== undefined) out.drives = await normaliseAttachments(tx, ctx, owner, server, (values.drives as unknown[] | null) ?? []);
  if (values.nics !== undefined) {
    out.nics = await normaliseNics(tx, ctx, (current?.nics as Nic[] | undefined) ?? [], (values.nics as unknown[] | null) ?? [], owner, server);
    await recordNics(tx, server, out.nics as Nic[], { created: current === undefined });
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
    deleteParams: ['recurse'],
    listFields: ['name', 'owner', 'resource_uri', 'runtime', 'status', 'uuid'],
    ordering: ['uuid', 'name'],
    permissions: ['LIST', 'EDIT', 'CLONE', 'START', 'STOP', 'OPEN_VNC', 'DELETE'],
    meter: serverUsage,
    outOfMoney: stopForBilling,
    taggable: true,
    // Drives, NICs and pubkeys are references; jobs are rows of `o:`; the hypervisor's state and the
    // firewall are read only for running servers, whose answers read the clock and are never kept.
    answersFromVisibleOwners: true,
    actions: { ...powerActions, ...consoleActions, clone: cloneAction((ctx, uuid) => servers.service.get(ctx, uuid)) },
    timers: { ...powerTimers, ...cloneTimers, ...reconcileTimers },
    // pycloudsigma's Server.runtime(): the runtime alone (null while the server is not running).
    views: { runtime: async (ctx, uuid) => (await servers.service.get(ctx, uuid)).runtime },
    // Running servers sharing a simulated host.
    collectionViews: {
      availability_groups: availabilityGroups({
        members: (ctx) => ctx.store.resources.uuidsInStatus(ctx.store.db, 'servers', ['running'], ctx.caller.uuid),
        get: (ctx, uuid) => servers.service.get(ctx, uuid),
        placed: (server) => server.status === 'running',
      }),
    },
    wire: { views: { runtime: serverFields.runtime.output! } },
  },
  {
    prepare(values, mode) {
      if (mode === 'update') return values;
      return { ...values, status: 'stopped', jobs: [], drives: values.drives ?? [], nics: values.nics ?? [], pubkeys: values.pubkeys ?? [] };
    },
    // Drives, NICs and pubkeys are resolved before the row is written, so a create is one insert.
    async beforeInsert(tx, ctx, uuid, values) {
      const body = await normalise(tx, ctx, ctx.caller.uuid, uuid, values, undefined);
      body.cpu_type ??= ctx.config.cpuType;
      body.smp ??= defaultSmp(ctx, body);
      checkHardware(ctx, body);
      return body;
    },
    async afterWrite(tx, ctx, uuid, values, mode, input) {
      if (mode !== 'create') return;
      await syncMounts(tx, ctx, uuid, [], attachedDrives(values));
      // `details` are the call parameters, with smp filled in as the real log shows (reference §18).
      await record(tx, ctx, {
        action: 'create',
        category: 'Servers',
        uuid,
        owner: ctx.caller.uuid,
        actor: ctx.caller.uuid,
        details: JSON.stringify({ ...input, smp: values.smp }),
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
    async beforeDelete(tx, ctx, uuid, row, params) {
      const body = row.body;
      if (body.status !== 'stopped') throw permission(`Cannot delete guest in state "${body.status}". Guest should be in state "stopped"`);
      const recurse = params.recurse;
      if (recurse !== undefined && !['all_drives', 'disks', 'cdroms'].includes(recurse))
        throw validation('recurse', 'recurse must be all_drives, disks or cdroms');
      const attached = attachedDrives(body);
      await syncMounts(tx, ctx, uuid, attached, []);
      await forgetNics(tx, uuid);
      await ctx.sim.hypervisor.forgetServer(tx, uuid);
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
    presentStatic,
    decorate: presentServers,
    // What presentServers changes: jobs (they expire) and the runtime of a running server.
    varies: (row) => ((row.body.jobs as unknown[] | undefined) ?? []).length > 0 || RUNNING.has(row.body.status as string),
  },
);
