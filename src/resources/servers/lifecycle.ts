import { randomInt } from 'node:crypto';
import { audit } from '../../core/audit.js';
import type { Ctx, Services } from '../../core/context.js';
import { ApiError, permission } from '../../core/errors.js';
import type { Obj } from '../../core/input.js';
import { assertCanCloneServer } from '../../core/permissions.js';
import type { ActionDecl, ActionResult } from '../../core/resource.js';
import type { Row } from '../../core/stored.js';
import { schedule, cancelTimers, type TimerHandler } from '../../sim/scheduler.js';
import type { Tx } from '../../store/db.js';
import { cloneWithin } from '../drives/drives.js';
import { cloneName, type CloneNaming } from '../drives/naming.js';
import { startJob } from '../jobs/jobs.js';
import type { Attachment, Nic } from './attachments.js';
import { newMac } from './attachments.js';
import { network, recordNics } from './network.js';

/**
 * The simulated hypervisor's side of servers (reference §5.4–5.5, spec "Events"):
 *   stopped --start--> starting --(boot)--> running --stop--> stopping --> stopped
 *   running --shutdown--> stopping --(guest obeys)--> stopped | --(guest ignores)--> running
 * Every API action and every outcome writes its audit entry in the transaction of the change; outcomes
 * are durable timers, so a restart finishes transitions in flight.
 */

/** Internal state names leak into the real service's messages ("started" = running); clients match on 403 only. */
const INTERNAL: Record<string, string> = { running: 'started', stopped: 'stopped', starting: 'starting', stopping: 'stopping', paused: 'paused', unavailable: 'unavailable' };

async function lockServer(tx: Tx, ctx: Pick<Services, 'store'>, uuid: string): Promise<{ row: Row; body: Obj }> {
  let q = tx.selectFrom('resources').selectAll().where('kind', '=', 'servers').where('uuid', '=', uuid);
  if (ctx.store.dialect === 'postgres') q = q.forUpdate();
  const row = (await q.executeTakeFirstOrThrow()) as Row;
  return { row, body: JSON.parse(row.body) as Obj };
}

async function save(tx: Tx, s: Pick<Services, 'clock'>, row: Row, body: Obj): Promise<void> {
  const { servers } = await import('./servers.js');
  await servers.service.patch(tx, s, row.uuid, () => body);
}

const log = (tx: Tx, s: Pick<Services, 'clock'>, row: Row, action: string, actor: string | null, extra: { details?: string; error?: ApiError } = {}) =>
  audit(tx, s, { action, category: 'Servers', uuid: row.uuid, owner: row.owner_uuid ?? '', actor, ...extra });

const accepted = (action: string, uuid: string, extra: Obj = {}): ActionResult => ({ status: 202, body: { action, result: 'success', uuid, ...extra } });

function requireState(body: Obj, verb: string, allowed: string[], expected: string): void {
  if (!allowed.includes(body.status as string))
    throw permission(`Cannot ${verb} guest in state "${INTERNAL[body.status as string] ?? body.status}". Guest should be in state "${expected}"`);
}

async function start(ctx: Ctx, uuid: string): Promise<ActionResult> {
  await ctx.store.transaction(async (tx) => {
    const { row, body } = await lockServer(tx, ctx, uuid);
    requireState(body, 'start', ['stopped'], 'stopped');
    // A failure planned by the operator, or chaos at the configured rate, makes this boot fail.
    const fail = body._fail_next_boot === true || (ctx.config.simFailureRate > 0 && Math.random() < ctx.config.simFailureRate);
    await save(tx, ctx, row, { ...body, status: 'starting', _fail_next_boot: false });
    await log(tx, ctx, row, 'start_send', ctx.caller.uuid);
    await schedule(tx, ctx, { kind: 'server.booted', subject: uuid, inMs: ctx.config.delays['server.boot'], payload: { fail } });
  });
  return accepted('start', uuid);
}

async function stop(ctx: Ctx, uuid: string): Promise<ActionResult> {
  await ctx.store.transaction(async (tx) => {
    const { row, body } = await lockServer(tx, ctx, uuid);
    requireState(body, 'stop', ['running', 'paused', 'stopping'], "['started', 'running_legacy']");
    // A hard stop overrides a pending ACPI shutdown.
    await cancelTimers(tx, uuid, ['server.acpi']);
    await save(tx, ctx, row, { ...body, status: 'stopping' });
    await log(tx, ctx, row, 'stop_send', ctx.caller.uuid);
    await schedule(tx, ctx, { kind: 'server.stopped', subject: uuid, inMs: ctx.config.delays['server.stop'] });
  });
  return accepted('stop', uuid);
}

async function shutdown(ctx: Ctx, uuid: string): Promise<ActionResult> {
  await ctx.store.transaction(async (tx) => {
    const { row, body } = await lockServer(tx, ctx, uuid);
    requireState(body, 'shutdown', ['running'], "['started', 'running_legacy']");
    const obeys = body._acpi_ignore !== true;
    await save(tx, ctx, row, { ...body, status: 'stopping' });
    await log(tx, ctx, row, 'shutdown_ACPI_send', ctx.caller.uuid);
    const wait = obeys ? ctx.config.delays['server.shutdown'] : ctx.config.delays['server.acpi_timeout'];
    await schedule(tx, ctx, { kind: 'server.acpi', subject: uuid, inMs: wait, payload: { obeys } });
  });
  return accepted('shutdown', uuid);
}

async function openVnc(ctx: Ctx, uuid: string): Promise<ActionResult> {
  let url = '';
  await ctx.store.transaction(async (tx) => {
    const { row, body } = await lockServer(tx, ctx, uuid);
    requireState(body, 'open VNC for', ['running'], "['started', 'running_legacy']");
    // A new tunnel port on every open, as the real service does.
    const port = randomInt(40_000, 50_000);
    url = `vnc://${ctx.config.vncHost}:${port}`;
    await save(tx, ctx, row, { ...body, _vnc_port: port });
    await log(tx, ctx, row, 'open_vnc', ctx.caller.uuid);
  });
  return accepted('open_vnc', uuid, { vnc_url: url });
}

/** The serial console tunnel (asks for the VNC password); same rules as VNC, no audit action defined. */
async function openConsole(ctx: Ctx, uuid: string): Promise<ActionResult> {
  let url = '';
  await ctx.store.transaction(async (tx) => {
    const { row, body } = await lockServer(tx, ctx, uuid);
    requireState(body, 'open console for', ['running'], "['started', 'running_legacy']");
    const port = randomInt(40_000, 50_000);
    url = `csconsole://${ctx.config.vncHost}:${port}`;
    await save(tx, ctx, row, { ...body, _console_port: port });
  });
  return accepted('open_console', uuid, { console_url: url });
}

async function closeConsole(ctx: Ctx, uuid: string): Promise<ActionResult> {
  await ctx.store.transaction(async (tx) => {
    const { row, body } = await lockServer(tx, ctx, uuid);
    const { _console_port: _closed, ...rest } = body;
    await save(tx, ctx, row, rest);
  });
  return accepted('close_console', uuid);
}

async function closeVnc(ctx: Ctx, uuid: string): Promise<ActionResult> {
  await ctx.store.transaction(async (tx) => {
    const { row, body } = await lockServer(tx, ctx, uuid);
    const { _vnc_port: _closed, ...rest } = body;
    await save(tx, ctx, row, rest);
    await log(tx, ctx, row, 'close_vnc', ctx.caller.uuid);
  });
  return accepted('close_vnc', uuid);
}

/**
 * Clone a server (reference §5.9): a stopped copy owned by the caller; disks cloned (drive_clone jobs
 * under one server_clone job, the clones attached in place), cdroms attached as they are, NICs with new
 * MACs and DHCP instead of static IPs. Answers the bare new server.
 */
async function clone(ctx: Ctx, uuid: string, input: Obj): Promise<ActionResult> {
  const { servers } = await import('./servers.js');
  const newUuid = ctx.ids.uuid();
  await ctx.store.transaction(async (tx) => {
    const { row, body } = await lockServer(tx, ctx, uuid);
    const attachments = (body.drives as Attachment[]) ?? [];
    const driveRows = attachments.length
      ? await tx.selectFrom('resources').select(['uuid', 'kind', 'owner_uuid', 'body']).where('uuid', 'in', attachments.map((a) => a.drive)).where('kind', 'in', ['drives', 'libdrives']).execute()
      : [];
    const info = driveRows.map((d) => ({ uuid: d.uuid, kind: d.kind, owner_uuid: d.owner_uuid, body: JSON.parse(d.body) as Obj }));
    await assertCanCloneServer(tx, ctx.caller.uuid, row, info.filter((d) => d.kind === 'drives').map((d) => ({ ...d, media: d.body.media as string })));

    const job = ctx.ids.uuid();
    const children: string[] = [];
    const newAttachments: Attachment[] = [];
    let longest = 0;
    for (const a of attachments) {
      const d = info.find((x) => x.uuid === a.drive);
      if (!d || d.body.media === 'cdrom') {
        newAttachments.push(a); // cdroms (and library cdroms) are shared, not copied
        continue;
      }
      const made = await cloneWithin(tx, ctx, { uuid: d.uuid, kind: d.kind as 'drives', owner: d.owner_uuid, body: d.body }, {}, { mountedOn: newUuid });
      children.push(made.job);
      longest = Math.max(longest, ctx.config.delays['drive.clone']);
      newAttachments.push({ ...a, drive: made.uuid });
    }
    const nics = ((body.nics as Nic[]) ?? []).map((n) => ({
      ...n,
      mac: newMac(),
      ip_v4_conf: n.ip_v4_conf ? { conf: n.ip_v4_conf.conf === 'manual' ? 'manual' : 'dhcp', ip: null } : null,
      ip_v6_conf: n.ip_v6_conf ? { conf: n.ip_v6_conf.conf === 'manual' ? 'manual' : 'dhcp', ip: null } : null,
    }));
    const name = typeof input.name === 'string' && input.name ? input.name : await serverCloneName(tx, ctx, body.name as string);
    const copy: Obj = Object.fromEntries(Object.entries(body).filter(([k]) => !k.startsWith('_')));
    await servers.service.insert(tx, ctx, newUuid, ctx.caller.uuid, {
      ...copy,
      drives: newAttachments,
      jobs: [job],
      name,
      nics,
      status: 'stopped',
      vnc_password: input.random_vnc_password === true ? randomPassword() : body.vnc_password,
    });
    // The copy's NICs use the same VLANs; cdroms attached as they are now list the new server too.
    await recordNics(tx, newUuid, nics);
    const { syncMounts } = await import('./servers.js');
    const sharedDrives = newAttachments.map((a) => a.drive).filter((d) => info.some((x) => x.uuid === d && x.kind === 'drives' && x.body.media === 'cdrom'));
    await syncMounts(tx, ctx, newUuid, [], sharedDrives);
    await startJob(tx, ctx, ctx.caller.uuid, {
      uuid: job,
      operation: 'server_clone',
      resources: [`/api/2.0/servers/${uuid}/`, `/api/2.0/servers/${newUuid}/`],
      durationMs: longest,
      children,
    });
    await schedule(tx, ctx, { kind: 'server.cloned', subject: newUuid, inMs: longest, payload: { job } });
    await log(tx, ctx, row, 'clone_src', ctx.caller.uuid, { details: JSON.stringify({ clone: newUuid }) });
    await audit(tx, ctx, { action: 'clone_dst', category: 'Servers', uuid: newUuid, owner: ctx.caller.uuid, actor: ctx.caller.uuid, details: JSON.stringify({ source: uuid }) });
  });
  const server = await servers.service.get(ctx, newUuid);
  return { status: 202, body: server };
}

const randomPassword = () => Array.from({ length: 8 }, () => 'abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789'[randomInt(0, 57)]).join('');

async function serverCloneName(tx: Tx, ctx: Ctx, source: string): Promise<string> {
  const profile = await tx.selectFrom('users').select('profile').where('uuid', '=', ctx.caller.uuid).executeTakeFirstOrThrow();
  const strategy = ((JSON.parse(profile.profile) as Obj).clone_naming ?? 'NONE') as CloneNaming;
  if (strategy === 'NONE') return source;
  const names = await tx.selectFrom('resources').select('name').where('kind', '=', 'servers').where('owner_uuid', '=', ctx.caller.uuid).execute();
  const taken = new Set(names.map((n) => n.name));
  return cloneName(source, strategy, ctx.clock.now(), (n) => taken.has(n));
}

export const serverActions: Record<string, ActionDecl> = {
  start: { permission: 'START', run: (ctx, uuid) => start(ctx, uuid) },
  stop: { permission: 'STOP', run: (ctx, uuid) => stop(ctx, uuid) },
  shutdown: { permission: 'STOP', run: (ctx, uuid) => shutdown(ctx, uuid) },
  open_vnc: { permission: 'OPEN_VNC', run: (ctx, uuid) => openVnc(ctx, uuid) },
  close_vnc: { permission: 'OPEN_VNC', run: (ctx, uuid) => closeVnc(ctx, uuid) },
  open_console: { permission: 'OPEN_VNC', run: (ctx, uuid) => openConsole(ctx, uuid) },
  close_console: { permission: 'OPEN_VNC', run: (ctx, uuid) => closeConsole(ctx, uuid) },
  clone: { permission: 'CLONE', run: (ctx, uuid, body) => clone(ctx, uuid, body) },
};

/** Enter `running`: DHCP leases for public dhcp NICs, the boot clock starts. */
async function boot(tx: Tx, s: Services, row: Row, body: Obj): Promise<void> {
  const leases: Record<string, string> = {};
  for (const n of (body.nics as Nic[]) ?? []) {
    if (n.vlan || n.ip_v4_conf?.conf !== 'dhcp') continue;
    const ip = await network.lease(tx, s, row.uuid);
    if (ip) leases[n.mac] = ip;
  }
  await save(tx, s, row, { ...body, status: 'running', _active_since: s.clock.now().getTime(), _leases: leases });
}

/** Leave `running`: leases go back to the pool, VNC closes, the runtime disappears. */
async function powerOff(tx: Tx, s: Services, row: Row, body: Obj): Promise<void> {
  await network.release(tx, row.uuid);
  await accrueWrites(tx, s, body);
  const { _active_since, _leases, _vnc_port, _console_port, ...rest } = body;
  await save(tx, s, row, { ...rest, status: 'stopped' });
}

/**
 * The simulated storage: while a server ran, it wrote to its disks at the configured rate. The data
 * written (never more than the drive holds) is what later gives snapshots their size.
 */
async function accrueWrites(tx: Tx, s: Services, body: Obj): Promise<void> {
  const secs = Math.max(0, (s.clock.now().getTime() - Number(body._active_since ?? s.clock.now().getTime())) / 1000);
  const bytes = Math.floor(secs * s.config.delays['drive.write_rate']);
  if (!bytes) return;
  const { drives } = await import('../drives/drives.js');
  for (const a of (body.drives as Attachment[]) ?? [])
    await drives.service.patch(tx, s, a.drive, (d) => (d.media === 'disk' ? { ...d, _written: Math.min(Number(d.size), Number(d._written ?? 0) + bytes) } : d));
}

async function withServer(tx: Tx, s: Services, uuid: string, fn: (row: Row, body: Obj) => Promise<void>): Promise<void> {
  const row = (await tx.selectFrom('resources').selectAll().where('kind', '=', 'servers').where('uuid', '=', uuid).executeTakeFirst()) as Row | undefined;
  if (row) await fn(row, JSON.parse(row.body) as Obj);
}

const bootFailure = () => new ApiError('backend', 'The guest failed to boot', null);

export const serverTimers: Record<string, TimerHandler> = {
  'server.booted': {
    async run(s, tx, timer, payload: { fail?: boolean }) {
      await withServer(tx, s, timer.subject, async (row, body) => {
        if (body.status !== 'starting') return;
        if (payload.fail) {
          await save(tx, s, row, { ...body, status: 'stopped' });
          await log(tx, s, row, 'boot', null, { error: bootFailure() });
          return;
        }
        await boot(tx, s, row, body);
        await log(tx, s, row, 'boot', null);
      });
    },
  },
  'server.stopped': {
    async run(s, tx, timer) {
      await withServer(tx, s, timer.subject, async (row, body) => {
        if (body.status !== 'stopping') return;
        await powerOff(tx, s, row, body);
        await log(tx, s, row, 'stop', null);
      });
    },
  },
  'server.acpi': {
    async run(s, tx, timer, payload: { obeys: boolean }) {
      await withServer(tx, s, timer.subject, async (row, body) => {
        if (body.status !== 'stopping') return;
        if (!payload.obeys) {
          await save(tx, s, row, { ...body, status: 'running' }); // the guest ignored every ACPI request
          return;
        }
        await powerOff(tx, s, row, body);
        await log(tx, s, row, 'stop', null);
      });
    },
  },
  'server.cloned': {
    async run(s, tx, _timer, payload: { job: string }) {
      const { finishJob } = await import('../jobs/jobs.js');
      await finishJob(tx, s, payload.job, 'success');
    },
  },
  'server.event': {
    async run(s, tx, timer, payload: { event: SimEvent; on?: boolean }) {
      await withServer(tx, s, timer.subject, (row, body) => guestEvent(tx, s, row, body, payload));
    },
  },
  'server.recovered': {
    async run(s, tx, timer, payload: { resume: string }) {
      await withServer(tx, s, timer.subject, async (row, body) => {
        if (body.status !== 'unavailable') return;
        await save(tx, s, row, { ...body, status: payload.resume });
        await log(tx, s, row, 'heal', null, { details: JSON.stringify({ status: payload.resume }) });
      });
    },
  },
};

export const SIM_EVENTS = ['poweroff', 'crash', 'fail_next_boot', 'acpi_ignore', 'acpi_obey', 'host_failure'] as const;
export type SimEvent = (typeof SIM_EVENTS)[number];

/**
 * What the simulated guest or host does on its own (operator- or chaos-triggered): a power-off from
 * inside (only `stop` is logged, no `stop_send`), a crash (the host restarts it), a boot that will fail,
 * a guest that ignores ACPI, a host failure (`unavailable` until it recovers, then `heal`).
 */
async function guestEvent(tx: Tx, s: Services, row: Row, body: Obj, e: { event: SimEvent }): Promise<void> {
  switch (e.event) {
    case 'poweroff':
      if (body.status !== 'running') return;
      await cancelTimers(tx, row.uuid, ['server.acpi', 'server.stopped']);
      await powerOff(tx, s, row, body);
      await log(tx, s, row, 'stop', null);
      return;
    case 'crash':
      if (body.status !== 'running') return;
      await powerOff(tx, s, row, body);
      await log(tx, s, row, 'stop', null, { error: new ApiError('backend', 'The guest crashed', null) });
      await withServer(tx, s, row.uuid, (r, b) => save(tx, s, r, { ...b, status: 'starting' }));
      await schedule(tx, s, { kind: 'server.booted', subject: row.uuid, inMs: s.config.delays['server.boot'], payload: {} });
      return;
    case 'fail_next_boot':
      await save(tx, s, row, { ...body, _fail_next_boot: true });
      return;
    case 'acpi_ignore':
    case 'acpi_obey':
      await save(tx, s, row, { ...body, _acpi_ignore: e.event === 'acpi_ignore' });
      return;
    case 'host_failure':
      if (body.status !== 'running' && body.status !== 'starting') return;
      await save(tx, s, row, { ...body, status: 'unavailable' });
      await schedule(tx, s, { kind: 'server.recovered', subject: row.uuid, inMs: s.config.delays['server.host_recovery'], payload: { resume: body.status } });
      return;
  }
}

/** Which pending timers carry each transitional state to its end. */
const TRANSITIONS: Record<string, string[]> = {
  starting: ['server.booted'],
  stopping: ['server.stopped', 'server.acpi'],
  unavailable: ['server.recovered'],
};

/**
 * The reconciler: a server whose recorded state is in transition but whose infrastructure has nothing
 * under way (its timer failed for good, or was lost) is corrected to `stopped` — what the simulated
 * hypervisor holds for it — and the correction is logged as `heal`. Reads only servers in transitional
 * states (an indexed status lookup), never the whole table.
 */
export async function reconcileServers(s: Services): Promise<number> {
  const stuck = await s.store.db
    .selectFrom('resources')
    .select('uuid')
    .where('kind', '=', 'servers')
    .where('status', 'in', Object.keys(TRANSITIONS))
    .where(({ not, exists, selectFrom, ref }) =>
      not(exists(selectFrom('timers').select('timers.id').whereRef('timers.subject', '=', ref('resources.uuid')).where('timers.state', '=', 'pending'))),
    )
    .execute();
  let healed = 0;
  for (const { uuid } of stuck) {
    await s.store.transaction(async (tx) => {
      await withServer(tx, s, uuid, async (row, body) => {
        const pending = await tx.selectFrom('timers').select('kind').where('subject', '=', uuid).where('state', '=', 'pending').execute();
        const from = body.status as string;
        if (!TRANSITIONS[from] || pending.some((t) => TRANSITIONS[from].includes(t.kind))) return; // moved on meanwhile
        await powerOff(tx, s, row, body);
        await log(tx, s, row, 'heal', null, { details: JSON.stringify({ from, to: 'stopped' }) });
        healed++;
      });
    });
  }
  return healed;
}
