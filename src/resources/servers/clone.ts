import { randomInt } from 'node:crypto';
import type { Ctx } from '../../core/context.js';
import { record } from '../../core/events.js';
import type { Obj } from '../../core/input.js';
import { assertCanCloneServer } from '../../core/permissions.js';
import type { ActionDecl } from '../../core/resource.js';
import { schedule, type TimerHandler } from '../../core/timers.js';
import type { Tx } from '../../store/db.js';
import { resourceUri } from '../../store/repository.js';
import { cloneNaming, cloneWithin } from '../drives/clone.js';
import { cloneName } from '../drives/naming.js';
import { finishJob, startJob } from '../jobs/jobs.js';
import type { Attachment } from './attachments.js';
import { syncMounts } from './mounts.js';
import { recordNics, type Nic } from './nics.js';
import { lockServer, logServer } from './power.js';

/**
 * Clone a server (reference §5.9): a stopped copy owned by the caller; disks cloned (drive_clone jobs
 * under one server_clone job, the clones attached in place), cdroms attached as they are, NICs with new
 * MACs and DHCP instead of static IPs. Answers the new server's uuid (the action answers the bare server).
 * Locks: the source server, then its drives (servers before drives, as everywhere).
 */
export async function cloneServer(ctx: Ctx, uuid: string, input: Obj): Promise<string> {
  const newUuid = ctx.ids.uuid();
  await ctx.store.transaction(async (tx) => {
    const row = await lockServer(tx, ctx, uuid);
    const body = row.body;
    const attachments = (body.drives as Attachment[]) ?? [];
    const uuids = attachments.map((a) => a.drive);
    const own = await ctx.store.resources.lockMany(tx, 'drives', uuids);
    await assertCanCloneServer(
      tx,
      ctx.caller.uuid,
      row,
      own.map((d) => ({ uuid: d.uuid, owner_uuid: d.owner_uuid, media: d.body.media as string })),
    );

    const job = ctx.ids.uuid();
    const children: string[] = [];
    const newAttachments: Attachment[] = [];
    const sharedCdroms: string[] = [];
    let longest = 0;
    for (const a of attachments) {
      const d = own.find((x) => x.uuid === a.drive);
      if (!d || d.body.media === 'cdrom') {
        newAttachments.push(a); // cdroms (and library cdroms) are shared, not copied
        if (d) sharedCdroms.push(d.uuid);
        continue;
      }
      const made = await cloneWithin(tx, ctx, { uuid: d.uuid, kind: 'drives', owner: d.owner_uuid, body: d.body }, {}, { mountedOn: newUuid });
      children.push(made.job);
      longest = Math.max(longest, ctx.sim.storage.cloneMs(Number(d.body.size)));
      newAttachments.push({ ...a, drive: made.uuid });
    }
    const nics = ((body.nics as Nic[]) ?? []).map((n) => ({
      ...n,
      mac: ctx.sim.network.newMac(),
      ip_v4_conf: n.ip_v4_conf ? { conf: n.ip_v4_conf.conf === 'manual' ? 'manual' : 'dhcp', ip: null } : null,
      ip_v6_conf: n.ip_v6_conf ? { conf: n.ip_v6_conf.conf === 'manual' ? 'manual' : 'dhcp', ip: null } : null,
    }));
    const name = typeof input.name === 'string' && input.name ? input.name : await serverCloneName(tx, ctx, body.name as string);
    await ctx.store.resources.insert(tx, ctx.clock.now(), {
      kind: 'servers',
      uuid: newUuid,
      owner: ctx.caller.uuid,
      body: {
        ...body,
        drives: newAttachments,
        jobs: [job],
        name,
        nics,
        status: 'stopped',
        vnc_password: input.random_vnc_password === true ? randomPassword() : body.vnc_password,
      },
    });
    // The copy's NICs use the same VLANs; cdroms attached as they are now list the new server too.
    await recordNics(tx, newUuid, nics);
    await syncMounts(tx, ctx, newUuid, [], sharedCdroms);
    await startJob(tx, ctx, ctx.caller.uuid, {
      uuid: job,
      operation: 'server_clone',
      resources: [resourceUri('servers', uuid), resourceUri('servers', newUuid)],
      durationMs: longest,
      children,
    });
    await schedule(tx, ctx, { kind: 'server.cloned', subject: newUuid, inMs: longest, payload: { job } });
    await logServer(tx, ctx, row, 'clone_src', ctx.caller.uuid, { details: JSON.stringify({ clone: newUuid }) });
    await record(tx, ctx, {
      action: 'clone_dst',
      category: 'Servers',
      uuid: newUuid,
      owner: ctx.caller.uuid,
      actor: ctx.caller.uuid,
      details: JSON.stringify({ source: uuid }),
    });
  });
  return newUuid;
}

const randomPassword = () => Array.from({ length: 8 }, () => 'abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789'[randomInt(0, 57)]).join('');

async function serverCloneName(tx: Tx, ctx: Ctx, source: string): Promise<string> {
  const strategy = await cloneNaming(tx, ctx);
  if (strategy === 'NONE') return source;
  const taken = await ctx.store.resources.namesOf(tx, 'servers', ctx.caller.uuid);
  return cloneName(source, strategy, ctx.clock.now(), (n) => taken.has(n));
}

export const cloneTimers: Record<string, TimerHandler> = {
  'server.cloned': {
    async run(s, tx, _timer, payload: { job: string }) {
      await finishJob(tx, s, payload.job, 'success');
    },
  },
};

/** `do=clone` with the decl's presenter injected (servers.ts owns the presentation of servers). */
export const cloneAction = (present: (ctx: Ctx, uuid: string) => Promise<Obj>): ActionDecl => ({
  permission: 'CLONE',
  async: true,
  answer: { object: 'servers' },
  run: async (ctx, uuid, body) => present(ctx, await cloneServer(ctx, uuid, body)),
});
