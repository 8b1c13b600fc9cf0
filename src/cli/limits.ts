import { ConfigError } from '../config.js';
import type { Services } from '../core/context.js';
import { ApiError } from '../core/errors.js';
import { decodeAccountLimits, getAccountLimitsText, setAccountLimits } from '../resources/accounts/rate-limits.js';
import { formatRule, mergeRules, ruleId, type Rule } from '../core/rate-rules.js';
import { findUserByEmail } from '../resources/users/users.js';

export interface LimitsOptions {
  off?: boolean;
  reset?: boolean;
  set?: string;
}

/**
 * `stratus users limits EMAIL [--off | --reset | --set RULES]`: changes an account's rate-limit override
 * (exempt it, drop the override, or set rules merged over the deployment's), then prints the account's
 * effective rules. The deployment's rules are those of this command's own `--rate-limits` setting, so
 * give it the same value (or STRATUS_RATE_LIMITS) as the server.
 */
export async function limitsCommand(s: Services, email: string, opts: LimitsOptions): Promise<string> {
  const chosen = [opts.off && '--off', opts.reset && '--reset', opts.set !== undefined && '--set'].filter(Boolean);
  if (chosen.length > 1) throw new ConfigError(`users limits: give at most one of --off, --reset, --set (got ${chosen.join(', ')})`);
  let done = '';
  if (opts.off) {
    await setAccountLimits(s, email, 'off');
    done = 'rate limits turned off for this account\n';
  } else if (opts.reset) {
    await setAccountLimits(s, email, null);
    done = 'account override removed: the deployment rules apply\n';
  } else if (opts.set !== undefined) {
    await setAccountLimits(s, email, opts.set);
    done = 'account override set\n';
  }
  return done + (await describeLimits(s, email));
}

/** The account's override and effective rules, one rule per line with where it comes from. */
export async function describeLimits(s: Services, email: string): Promise<string> {
  const user = await findUserByEmail(s, email);
  if (!user) throw new ApiError('notexist', `No user with e-mail ${email}`, 'email');
  const text = await getAccountLimitsText(s, user.uuid);
  const lines = [`rate limits of ${user.email} (account override: ${text ?? 'none'})`];
  const base = s.config.rateLimits;
  if (!base) {
    lines.push('  none: rate limits are off in this deployment (--rate-limits off)');
    return lines.join('\n') + '\n';
  }
  let override: ReturnType<typeof decodeAccountLimits> | null = null;
  if (text !== undefined) {
    try {
      override = decodeAccountLimits(text);
    } catch (e) {
      lines.push(`  the stored override is unreadable and ignored: ${(e as Error).message}`);
    }
  }
  if (override === 'off') {
    lines.push('  none: the account is exempt');
    return lines.join('\n') + '\n';
  }
  const own = new Set((override ?? []).map(ruleId));
  const effective: Rule[] = override ? mergeRules(base, override) : [...base];
  if (effective.length === 0) lines.push('  none');
  for (const r of effective) {
    const [id, limit] = formatRule(r).split('=');
    lines.push(`  ${id.replace(':', ' ').padEnd(28)} ${limit.padEnd(14)} ${own.has(ruleId(r)) ? 'account' : 'deployment'}`);
  }
  return lines.join('\n') + '\n';
}
