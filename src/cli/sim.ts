import { ConfigError } from '../config.js';
import type { Services } from '../core/context.js';
import { ApiError } from '../core/errors.js';
import { drives } from '../resources/drives/drives.js';
import { SIM_EVENTS, type SimEvent } from '../resources/servers/lifecycle.js';
import { schedule } from '../sim/scheduler.js';

/**
 * The operator's handle on the simulated infrastructure:
 *   stratus sim server UUID EVENT        poweroff | crash | fail_next_boot | acpi_ignore | acpi_obey | host_failure
 *   stratus sim drive UUID [--written N] show or set the bytes of data written on a drive
 * Server events are durable timers due now: the running service's scheduler carries them out.
 */
export async function simCommand(s: Services, args: string[], opts: { written?: string }, usage: string): Promise<string> {
  const [what, uuid, event] = args;
  if (what === 'server' && uuid && event) {
    if (!(SIM_EVENTS as readonly string[]).includes(event)) throw new ConfigError(`event must be one of ${SIM_EVENTS.join(', ')}`);
    const row = await s.store.db.selectFrom('resources').select('uuid').where('kind', '=', 'servers').where('uuid', '=', uuid).executeTakeFirst();
    if (!row) throw new ApiError('notexist', `No server ${uuid}`);
    await s.store.transaction((tx) => schedule(tx, s, { kind: 'server.event', subject: uuid, inMs: 0, payload: { event: event as SimEvent } }));
    return `${event} scheduled for server ${uuid}\n`;
  }
  if (what === 'drive' && uuid) {
    const row = await s.store.db.selectFrom('resources').select('body').where('kind', '=', 'drives').where('uuid', '=', uuid).executeTakeFirst();
    if (!row) throw new ApiError('notexist', `No drive ${uuid}`);
    const body = JSON.parse(row.body) as { size: number; _written?: number };
    if (opts.written === undefined) return `drive ${uuid}: ${body._written ?? 0} of ${body.size} bytes written\n`;
    if (!/^\d{1,16}$/.test(opts.written)) throw new ConfigError('--written must be a whole number of bytes');
    const written = Math.min(Number(opts.written), body.size);
    await s.store.transaction((tx) => drives.service.patch(tx, s, uuid, (b) => ({ ...b, _written: written })));
    return `drive ${uuid}: ${written} of ${body.size} bytes written\n`;
  }
  throw new ConfigError(usage);
}
