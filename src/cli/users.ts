import { ConfigError } from '../config.js';
import type { Services } from '../core/context.js';
import { randomPassword } from '../core/passwords.js';
import { createUser, listUsers, setPassword, setState, USER_STATES } from '../resources/users/users.js';
import { limitsCommand, type LimitsOptions } from './limits.js';

export interface UsersOptions extends LimitsOptions {
  password?: string;
  state?: string;
}

/**
 * `stratus users add|list|set-password|set-state|limits …`: the operator's accounts, without SQL. Returns
 * what the command prints; operator mistakes throw ConfigError or ApiError (exit code 2).
 */
export async function usersCommand(s: Services, args: string[], opts: UsersOptions, usage: string): Promise<string> {
  const [sub, email] = args;
  if (sub === 'add' && email) {
    const password = opts.password ?? randomPassword();
    const user = await createUser(s, { email, password, state: opts.state });
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
  throw new ConfigError(usage);
}
