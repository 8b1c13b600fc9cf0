import { requireFunds } from './funds.js';
import type { Ctx, Services } from '../../core/context.js';
import { ApiError, notFound, permission } from '../../core/errors.js';
import { record } from '../../core/events.js';
import { avoidList, type Obj } from '../../core/input.js';
import type { ActionDecl } from '../../core/resource.js';
import { ACTION_RESULT } from '../../core/contract.js';
import { cancelTimers, schedule, type TimerHandler } from '../../core/timers.js';
import type { Tx } from '../../store/db.js';
import type { Resource } from '../../store/repository.js';
import { attachedDrives } from './mounts.js';
import { dhcpMacs, publicNicCount, publicPolicies, type Nic } from './nics.js';

/**
 * Power state of servers (reference §5.4–5.5, spec "Events"):
 *   stopped --start--> starting --(boot)--> running --stop--> stopping --> stopped
 *   running --shutdown--> stopping --(guest obeys)--> stopped | --(guest ignores)--> running
 * The API side: state checks under the server's row lock, the recorded state, its events, and the
 * durable timers that carry a transition to its end. The simulated hypervisor decides outcomes.
 */

/** Internal state names leak into the real service's messages ("started" = running); clients match on 403 only. */
const INTERNAL: Record<string, string> = {
  running: 'started',
  stopped: 'stopped',
  starting: 'starting',
  stopping: 'stopping',
  paused: 'paused',
  unavailable: 'unavailable',
};

/** The server, locked for a decision; 404 when it is gone (deleted meanwhile). */
export async function lockServer(tx: Tx, s: Pick<Services, 'store'>, uuid: string): Promise<Resource> {
  const row = await s.store.resources.lock(tx, 'servers', uuid);
  if (!row) throw notFound(uuid);
  return row;
}

export const saveServer = (tx: Tx, s: Pick<Services, 'store' | 'clock'>, row: Resource, body: Obj) => s.store.resources.write(tx, s.clock.now(), row, body);

export const logServer = (
  tx: Tx,
  s: Pick<Services, 'clock' | 'events' | 'store'>,
  row: Resource,
  action: string,
  actor: string | null,
  extra: { details?: string; error?: ApiError } = {},
) => record(tx, s, { action, category: 'Servers', uuid: row.uuid, owner: row.owner_uuid ?? '', actor, ...extra });

export const accepted = (action: string, uuid: string, extra: Obj = {}) => ({ action, result: 'success', uuid, ...extra });

export function requireState(body: Obj, verb: string, allowed: string[], expected: string): void {
  if (!allowed.includes(body.status as string))
    throw permission(`Cannot ${verb} guest in state "${INTERNAL[body.status as string] ?? body.status}". Guest should be in state "${expected}"`);
}

async function start(ctx: Ctx, uuid: string, avoid: readonly string[] = []): Promise<Obj> {
  await ctx.store.transaction(async (tx) => {
    const row = await lockServer(tx, ctx, uuid);
    requireState(row.body, 'start', ['stopped'], 'stopped');
    await requireFunds(tx, ctx, row.owner_uuid!, row.body);
    const boot = await ctx.sim.hypervisor.beginBoot(tx, uuid, avoid);
    await saveServer(tx, ctx, row, { ...row.body, status: 'starting' });
    await logServer(tx, ctx, row, 'start_send', ctx.caller.uuid);
    await schedule(tx, ctx, { kind: 'server.booted', subject: uuid, inMs: boot.inMs, payload: { fail: boot.fail } });
  });
  return accepted('start', uuid);
}

async function stop(ctx: Ctx, uuid: string): Promise<Obj> {
  await ctx.store.transaction(async (tx) => {
    const row = await lockServer(tx, ctx, uuid);
    requireState(row.body, 'stop', ['running', 'paused', 'stopping'], "['started', 'running_legacy']");
    // A hard stop overrides a pending ACPI shutdown.
    await cancelTimers(tx, uuid, ['server.acpi']);
    await saveServer(tx, ctx, row, { ...row.body, status: 'stopping' });
    await logServer(tx, ctx, row, 'stop_send', ctx.caller.uuid);
    await schedule(tx, ctx, { kind: 'server.stopped', subject: uuid, inMs: ctx.sim.hypervisor.stopMs() });
  });
  return accepted('stop', uuid);
}

async function shutdown(ctx: Ctx, uuid: string): Promise<Obj> {
  await ctx.store.transaction(async (tx) => {
    const row = await lockServer(tx, ctx, uuid);
    requireState(row.body, 'shutdown', ['running'], "['started', 'running_legacy']");
    const acpi = await ctx.sim.hypervisor.acpiShutdown(tx, uuid);
    await saveServer(tx, ctx, row, { ...row.body, status: 'stopping' });
    await logServer(tx, ctx, row, 'shutdown_ACPI_send', ctx.caller.uuid);
    await schedule(tx, ctx, { kind: 'server.acpi', subject: uuid, inMs: acpi.inMs, payload: { obeys: acpi.obeys } });
  });
  return accepted('shutdown', uuid);
}

export const powerActions: Record<string, ActionDecl> = {
  // `avoid`: servers whose hosts this one should not run on (reference §5.1).
  start: {
    permission: 'START',
    async: true,
    params: ['avoid'],
    answer: { schema: ACTION_RESULT },
    run: (ctx, uuid, _body, params) => start(ctx, uuid, avoidList(params.avoid)),
  },
  stop: { permission: 'STOP', async: true, answer: { schema: ACTION_RESULT }, run: (ctx, uuid) => stop(ctx, uuid) },
  shutdown: { permission: 'STOP', async: true, answer: { schema: ACTION_RESULT }, run: (ctx, uuid) => shutdown(ctx, uuid) },
};

/**
 * The disks a server writes to while it runs, locked (servers before drives): the simulated storage
 * changes their data, and a multi-mounted disk may have another guest powering on or off.
 */
async function disksOf(tx: Tx, s: Pick<Services, 'store'>, body: Obj): Promise<{ uuid: string; size: number }[]> {
  const drives = await s.store.resources.lockMany(tx, 'drives', attachedDrives(body));
  return drives.filter((d) => d.body.media === 'disk').map((d) => ({ uuid: d.uuid, size: Number(d.body.size) }));
}

/** Enter `running`: the hypervisor powers the guest on (DHCP leases through the firewall, the power-on clock). */
async function enterRunning(tx: Tx, s: Services, row: Resource): Promise<void> {
  const nics = (row.body.nics as Nic[] | undefined) ?? [];
  const dhcp = new Set(dhcpMacs(nics));
  await s.sim.hypervisor.powerOn(tx, row.uuid, {
    owner: row.owner_uuid,
    dhcpNics: nics.filter((n) => dhcp.has(n.mac)),
    disks: await disksOf(tx, s, row.body),
    firewallPolicies: publicPolicies(nics),
    publicNics: publicNicCount(nics),
  });
  await saveServer(tx, s, row, { ...row.body, status: 'running' });
}

/** Leave `running`: the hypervisor powers the guest off (its writes land, leases and tunnels go). */
export async function enterStopped(tx: Tx, s: Services, row: Resource): Promise<void> {
  await s.sim.hypervisor.powerOff(tx, row.uuid, await disksOf(tx, s, row.body));
  await saveServer(tx, s, row, { ...row.body, status: 'stopped' });
}

/**
 * The account ran out of money: its started servers stop at once, each with an audit `stop` by the
 * system and no `stop_send` (issue 14, item 7). Returns how many stopped.
 */
export async function stopForBilling(tx: Tx, s: Services, owner: string): Promise<number> {
  const uuids = (await s.store.resources.uuidsInStatus(tx, 'servers', ['starting', 'running', 'paused', 'stopping'], owner)).sort();
  const rows = await s.store.resources.lockMany(tx, 'servers', uuids);
  for (const row of rows) {
    await cancelTimers(tx, row.uuid, ['server.booted', 'server.acpi', 'server.stopped']);
    if (row.body.status === 'starting') await saveServer(tx, s, row, { ...row.body, status: 'stopped' });
    else await enterStopped(tx, s, row);
    await logServer(tx, s, row, 'stop', null, { details: 'out of money' });
  }
  return rows.length;
}

/** Run `fn` on the server under its row lock, if it still exists. */
async function withServer(tx: Tx, s: Services, uuid: string, fn: (row: Resource) => Promise<void>): Promise<void> {
  const row = await s.store.resources.lock(tx, 'servers', uuid);
  if (row) await fn(row);
}

const bootFailure = () => new ApiError('backend', 'The guest failed to boot', null);

export const SIM_EVENTS = ['poweroff', 'crash', 'fail_next_boot', 'acpi_ignore', 'acpi_obey', 'host_failure'] as const;
export type SimEvent = (typeof SIM_EVENTS)[number];

/**
 * What the simulated guest or host does on its own (operator- or chaos-triggered): a power-off from
 * inside (only `stop` is logged, no `stop_send`), a crash (the host restarts it), a boot that will fail,
 * a guest that ignores ACPI, a host failure (`unavailable` until it recovers, then `heal`).
 */
async function guestEvent(tx: Tx, s: Services, row: Resource, event: SimEvent): Promise<void> {
  const status = row.body.status;
  switch (event) {
    case 'poweroff':
      if (status !== 'running') return;
      await cancelTimers(tx, row.uuid, ['server.acpi', 'server.stopped']);
      await enterStopped(tx, s, row);
      await logServer(tx, s, row, 'stop', null);
      return;
    case 'crash': {
      if (status !== 'running') return;
      await s.sim.hypervisor.powerOff(tx, row.uuid, await disksOf(tx, s, row.body));
      await logServer(tx, s, row, 'stop', null, { error: new ApiError('backend', 'The guest crashed', null) });
      await saveServer(tx, s, row, { ...row.body, status: 'starting' });
      await schedule(tx, s, { kind: 'server.booted', subject: row.uuid, inMs: s.sim.hypervisor.bootMs(), payload: {} });
      return;
    }
    case 'fail_next_boot':
      await s.sim.hypervisor.setGuestBehaviour(tx, row.uuid, { fail_next_boot: true });
      return;
    case 'acpi_ignore':
    case 'acpi_obey':
      await s.sim.hypervisor.setGuestBehaviour(tx, row.uuid, { acpi_ignore: event === 'acpi_ignore' });
      return;
    case 'host_failure':
      if (status !== 'running' && status !== 'starting') return;
      await saveServer(tx, s, row, { ...row.body, status: 'unavailable' });
      await schedule(tx, s, { kind: 'server.recovered', subject: row.uuid, inMs: s.sim.hypervisor.hostRecoveryMs(), payload: { resume: status } });
      return;
  }
}

/** Durable follow-ups of power transitions: each changes only the server's status, under its row lock. */
export const powerTimers: Record<string, TimerHandler> = {
  'server.booted': {
    async run(s, tx, timer, payload: { fail?: boolean }) {
      await withServer(tx, s, timer.subject, async (row) => {
        if (row.body.status !== 'starting') return;
        if (payload.fail) {
          await saveServer(tx, s, row, { ...row.body, status: 'stopped' });
          await logServer(tx, s, row, 'boot', null, { error: bootFailure() });
          return;
        }
        await enterRunning(tx, s, row);
        await logServer(tx, s, row, 'boot', null);
      });
    },
  },
  'server.stopped': {
    async run(s, tx, timer) {
      await withServer(tx, s, timer.subject, async (row) => {
        if (row.body.status !== 'stopping') return;
        await enterStopped(tx, s, row);
        await logServer(tx, s, row, 'stop', null);
      });
    },
  },
  'server.acpi': {
    async run(s, tx, timer, payload: { obeys: boolean }) {
      await withServer(tx, s, timer.subject, async (row) => {
        if (row.body.status !== 'stopping') return;
        if (!payload.obeys) {
          await saveServer(tx, s, row, { ...row.body, status: 'running' }); // the guest ignored every ACPI request
          return;
        }
        await enterStopped(tx, s, row);
        await logServer(tx, s, row, 'stop', null);
      });
    },
  },
  'server.event': {
    async run(s, tx, timer, payload: { event: SimEvent }) {
      await withServer(tx, s, timer.subject, (row) => guestEvent(tx, s, row, payload.event));
    },
  },
  'server.recovered': {
    async run(s, tx, timer, payload: { resume: string }) {
      await withServer(tx, s, timer.subject, async (row) => {
        if (row.body.status !== 'unavailable') return;
        await saveServer(tx, s, row, { ...row.body, status: payload.resume });
        await logServer(tx, s, row, 'heal', null, { details: JSON.stringify({ status: payload.resume }) });
      });
    },
  },
};
