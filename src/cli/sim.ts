import { ConfigError } from '../config.js';
import type { Services } from '../core/context.js';
import { ApiError } from '../core/errors.js';
import { schedule } from '../core/timers.js';
import { SIM_EVENTS, type SimEvent } from '../resources/servers/power.js';

/**
 * The operator's handle on the simulated infrastructure:
 *   stratus sim server UUID EVENT        poweroff | crash | fail_next_boot | acpi_ignore | acpi_obey | host_failure
 *   stratus sim drive UUID [--written N] show or set the bytes of data on a drive (a change its snapshots count)
 *   stratus sim traffic UUID [--send N]  show a server's tx counter, or make it send N bytes now (billed as tx)
 * Server events are durable timers due now: the running service's scheduler carries them out.
 */
export async function simCommand(s: Services, args: string[], opts: { written?: string; send?: string }, usage: string): Promise<string> {
  const [what, uuid, event] = args;
  if (what === 'server' && uuid && event) {
    if (!(SIM_EVENTS as readonly string[]).includes(event)) throw new ConfigError(`event must be one of ${SIM_EVENTS.join(', ')}`);
    if (!(await s.store.resources.get(s.store.db, 'servers', uuid))) throw new ApiError('notexist', `No server ${uuid}`);
    await s.store.transaction((tx) => schedule(tx, s, { kind: 'server.event', subject: uuid, inMs: 0, payload: { event: event as SimEvent } }));
    return `${event} scheduled for server ${uuid}\n`;
  }
  if (what === 'drive' && uuid) {
    const drive = await s.store.resources.get(s.store.db, 'drives', uuid);
    if (!drive) throw new ApiError('notexist', `No drive ${uuid}`);
    const size = Number(drive.body.size);
    if (opts.written === undefined) return `drive ${uuid}: ${await s.sim.storage.writtenBytes(s.store.db, { uuid, size })} of ${size} bytes written\n`;
    if (!/^\d{1,16}$/.test(opts.written)) throw new ConfigError('--written must be a whole number of bytes');
    const written = await s.store.transaction(async (tx) => {
      // Under the drive's row lock, as every other change of the drive's simulated data.
      const locked = await s.store.resources.lock(tx, 'drives', uuid);
      return s.sim.storage.setWritten(tx, { uuid, size: Number(locked?.body.size ?? size) }, Number(opts.written));
    });
    return `drive ${uuid}: ${written} of ${size} bytes written\n`;
  }
  if (what === 'traffic' && uuid) {
    if (!(await s.store.resources.get(s.store.db, 'servers', uuid))) throw new ApiError('notexist', `No server ${uuid}`);
    if (opts.send === undefined) return `server ${uuid}: ${await s.sim.traffic.sentBytes(s.store.db, uuid)} bytes sent\n`;
    if (!/^\d{1,16}$/.test(opts.send)) throw new ConfigError('--send must be a whole number of bytes');
    const sent = await s.store.transaction(async (tx) => {
      // Under the server's row lock, as a power-on or power-off changes its counter.
      await s.store.resources.lock(tx, 'servers', uuid);
      return s.sim.traffic.sendBurst(tx, uuid, Number(opts.send));
    });
    return `server ${uuid}: ${sent} bytes sent\n`;
  }
  throw new ConfigError(usage);
}
