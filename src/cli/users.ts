import { isIP } from 'node:net';
import { ConfigError } from '../config.js';
import { ApiError } from '../core/errors.js';
import type { Services } from '../core/context.js';
import { randomPassword } from '../core/passwords.js';
import { createUser, ensureDemoLogin, findUserByEmail, listUsers, savedDemoLogin, setPassword, setState, USER_STATES } from '../resources/users/users.js';
import { resetAll } from '../admin/reset.js';
import { setAccountLimits } from '../resources/accounts/rate-limits.js';
import { checkLimits } from '../admin/limits.js';
import { limitsCommand, type LimitsOptions } from './limits.js';
import { unlockLogins } from '../resources/accounts/login-guard.js';
import { describeLoginProtection } from '../core/login-rules.js';

export interface UsersOptions extends LimitsOptions {
  password?: string;
  state?: string;
  limits?: string;
  address?: string;
  all?: boolean;
}

/**
 * `stratus users add|list|set-password|set-state|limits …`: the operator's accounts, without SQL. Returns
 * what the command prints; operator mistakes throw ConfigError or ApiError (exit code 2).
 */
export async function usersCommand(s: Services, args: string[], opts: UsersOptions, usage: string): Promise<string> {
  const [sub, email] = args;
  if (sub === 'add' && email) {
    const password = opts.password ?? randomPassword();
    const limits = opts.limits === undefined ? undefined : checkLimits(opts.limits, 'limits');
    // State names in any case, as the admin API and `set-state` take them (`--state guest`).
    const user = await createUser(s, { email, password, state: opts.state?.toUpperCase() });
    if (limits !== undefined) await setAccountLimits(s, user.email, limits);
    return `created ${user.email} ${user.uuid}${opts.password ? '' : `\npassword: ${password}`}\n`;
  }
  if (sub === 'list') {
    return (await listUsers(s)).map((u) => `${u.uuid}  ${u.state.padEnd(9)} ${u.email}${u.password_hash ? '' : '  (no password yet)'}\n`).join('');
  }
  if (sub === 'set-password' && email) {
    const password = opts.password ?? randomPassword();
    await setPassword(s, email, password);
    return `password set for ${email}${opts.password ? '' : `: ${password}`}\n`;
  }
  if (sub === 'set-state' && email && args[2]) {
    const state = args[2].toUpperCase();
    if (!(USER_STATES as readonly string[]).includes(state)) throw new ConfigError(`state must be one of ${USER_STATES.join(', ')}`);
    const user = await setState(s, email, state);
    return `state of ${user.email} set to ${state}\n`;
  }
  if (sub === 'limits' && email) return limitsCommand(s, email, opts);
  if (sub === 'unlock') return unlockCommand(s, email, opts);
  throw new ConfigError(usage);
}

/**
 * `users unlock EMAIL | --address IP | EMAIL --address IP | --all`: forgets the failed logins that lock an
 * account (from every address) or an address (for every account), at once for every API process.
 */
async function unlockCommand(s: Services, email: string | undefined, opts: UsersOptions): Promise<string> {
  if (opts.address !== undefined && isIP(opts.address) === 0) throw new ConfigError(`--address must be an IPv4 or IPv6 address, got "${opts.address}"`);
  if (opts.all && (email || opts.address)) throw new ConfigError('users unlock: give EMAIL and/or --address IP, or --all alone');
  if (!opts.all && !email && opts.address === undefined) throw new ConfigError('users unlock: give EMAIL, --address IP, or --all');
  if (email && !(await findUserByEmail(s, email))) throw new ApiError('notexist', `No user with e-mail ${email}`, 'email');
  const cleared = await unlockLogins(s, opts.all ? 'all' : { email, address: opts.address });
  const what = opts.all ? 'every account and address' : [email, opts.address].filter(Boolean).join(' and ');
  return `unlocked ${what}: ${cleared} failed-login counter(s) cleared (login protection: ${describeLoginProtection(s.config.loginProtection)})\n`;
}

/** `stratus reset`: the admin plane's reset on the database (the demo login is put back with its credentials). */
export async function resetCommand(s: Services): Promise<string> {
  const keep = s.config.demoLogin ?? (await savedDemoLogin(s));
  const deleted = await resetAll(s);
  const demo = await ensureDemoLogin(s, randomPassword(), keep);
  const rows = Object.values(deleted).reduce((a, b) => a + b, 0);
  return `reset: ${deleted.users} user(s) and ${rows - deleted.users} other row(s) deleted${demo ? `; demo login ${demo.email} kept` : ''}\n`;
}
