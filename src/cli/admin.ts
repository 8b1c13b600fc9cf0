import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { ConfigError } from '../config.js';
import type { Services } from '../core/context.js';
import { ApiError } from '../core/errors.js';
import { schedule } from '../core/timers.js';
import { clockState, moveClock, parseDuration } from '../admin/clock.js';
import { resetAccount } from '../admin/reset.js';
import { seed } from '../admin/seed.js';
import { registry } from '../registry.js';
import { exportState, importState } from '../admin/state-file.js';
import { findUserByEmail } from '../resources/users/users.js';
import type { Progress } from './progress.js';

/**
 * The admin plane's actions as operator commands on the database (a running server sees them: the clock at
 * its next scheduler tick, everything else at once):
 *   stratus seed FILE                      as POST /_stratus/admin/seed
 *   stratus export [FILE]                  the whole state (stdout without FILE)
 *   stratus import FILE                    replace the whole state
 *   stratus clock show|advance 1h30m|set ISO
 *   stratus faults boot SERVER | clone [DRIVE]
 * Time that would move backwards, a bad file or an unknown object is exit code 2 with one line.
 */
function readJson(path: string, what: string): unknown {
  let text: string;
  try {
    text = readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (e) {
    throw new ConfigError(`${what}: cannot read ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ConfigError(`${what}: ${path} is not JSON (${(e as Error).message})`);
  }
}

/** An ApiError from the shared code as one line naming where in the file it is. */
function inFile(path: string) {
  return (e: unknown) => {
    if (e instanceof ApiError) throw new ConfigError(`${path}: ${e.point ? `${e.point}: ` : ''}${e.message}`);
    throw e;
  };
}

export async function seedCommand(s: Services, args: string[], _opts: unknown, _usage: string, progress?: Progress): Promise<string> {
  const report = await seed(s, registry, readJson(args[0], 'seed'), undefined, progress).catch(inFile(args[0]));
  const list = (o: Record<string, number>) =>
    Object.entries(o)
      .map(([k, n]) => `${n} ${k}`)
      .join(', ') || 'nothing';
  return `seeded from ${args[0]}: created ${list(report.created)}; already there ${list(report.existing)}\n`;
}

export async function exportCommand(s: Services, args: string[], _opts: unknown, _usage: string, progress?: Progress): Promise<string> {
  const text = JSON.stringify(await exportState(s, progress));
  const path = args[0];
  if (!path || path === '-') return text + '\n';
  // Whole or not at all: a reader never sees half a file.
  const tmp = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(tmp, text + '\n', { mode: 0o600 });
    renameSync(tmp, path);
  } catch (e) {
    throw new ConfigError(`export: cannot write ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  return `exported to ${path} (${text.length} bytes)\n`;
}

export async function importCommand(s: Services, args: string[], _opts: unknown, _usage: string, progress?: Progress): Promise<string> {
  const imported = await importState(s, readJson(args[0], 'import'), progress).catch(inFile(args[0]));
  const rows = Object.values(imported).reduce((a, b) => a + b, 0);
  return `imported ${args[0]}: ${rows} row(s) in ${Object.keys(imported).length} table(s) replace the state (running servers: cached logins end within 2 s)\n`;
}

export async function clockCommand(s: Services, args: string[]): Promise<string> {
  const [sub, arg] = args;
  const show = (st: { now: string; offset_ms: number }) => `${st.now} (offset ${st.offset_ms} ms from real time)\n`;
  if (sub === 'show' && arg === undefined) return show(clockState(s));
  if (sub === 'advance' && arg) {
    const ms = parseDuration(arg);
    if (ms === null) throw new ConfigError(`clock advance: "${arg}" is not a duration like 90s, 30m, 1h, 2d or 1h30m`);
    return 'clock moved to ' + show(await moveClock(s, { advanceMs: ms }));
  }
  if (sub === 'set' && arg) {
    const to = Date.parse(arg);
    if (Number.isNaN(to)) throw new ConfigError(`clock set: "${arg}" is not an ISO-8601 time like 2030-01-01T00:00:00Z`);
    return 'clock moved to ' + show(await moveClock(s, { to: new Date(to) }));
  }
  throw new ConfigError('clock: show | advance DURATION | set ISO-TIME (stratus help clock)');
}

export async function faultsCommand(s: Services, args: string[]): Promise<string> {
  const [what, uuid] = args;
  if (what === 'boot' && uuid) {
    if (!(await s.store.resources.get(s.store.db, 'servers', uuid))) throw new ApiError('notexist', `No server ${uuid}`);
    await s.store.transaction((tx) => schedule(tx, s, { kind: 'server.event', subject: uuid, inMs: 0, payload: { event: 'fail_next_boot' } }));
    return `the next boot of server ${uuid} fails\n`;
  }
  if (what === 'clone') {
    if (uuid && !(await s.store.resources.get(s.store.db, 'drives', uuid))) throw new ApiError('notexist', `No drive ${uuid}`);
    await s.store.transaction((tx) => s.sim.storage.failNextClone(tx, uuid ?? null));
    return `the next clone of ${uuid ? `drive ${uuid}` : 'any drive'} fails\n`;
  }
  throw new ConfigError('faults: boot SERVER | clone [DRIVE] (stratus help faults)');
}

/** `stratus reset EMAIL`: one account emptied (its login stays). */
export async function resetOneCommand(s: Services, email: string): Promise<string> {
  const user = await findUserByEmail(s, email);
  if (!user) throw new ApiError('notexist', `No user with e-mail ${email}`, 'email');
  const deleted = await resetAccount(s, user.uuid);
  return `reset ${user.email}: ${deleted.resources} object(s) and their state deleted; the login stays\n`;
}
