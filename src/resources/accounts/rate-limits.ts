import type { Services } from '../../core/context.js';
import { isoTimestamp } from '../../core/clock.js';
import { ApiError } from '../../core/errors.js';
import { formatRules, parseRuleList, RuleError, type OverrideRule } from '../../core/rate-rules.js';
import { findUserByEmail } from '../users/users.js';

/**
 * An account's own rate limits, set by an operator (`stratus users limits`): `off` (exempt), or rules that
 * replace (or, with `=off`, remove) the deployment's rules of the same METHOD[:PATH]. No row: the
 * deployment's rules. Stored as the canonical rule text, so it reads the same in SQL as on the CLI. The
 * limiter (http/ratelimit/limiter.ts) applies them; the admin plane and seeds set them without HTTP.
 */
export type AccountLimits = 'off' | OverrideRule[] | null;

/** Told when an account's override changes in this process, so the limiter forgets its cached copy. */
const listeners: ((userUuid: string) => void)[] = [];
export const onAccountLimitsChange = (fn: (userUuid: string) => void) => listeners.push(fn);

/** Reads a stored override text; anything unreadable (edited by hand) throws RuleError. */
export function decodeAccountLimits(text: string): Exclude<AccountLimits, null> {
  return text.trim().toLowerCase() === 'off' ? 'off' : parseRuleList(text, true);
}

/** Stored override text for a user, or undefined (no override). */
export async function getAccountLimitsText(s: Services, userUuid: string): Promise<string | undefined> {
  return s.store.limits.overrides.of(s.store.db, userUuid);
}

/**
 * Sets (`off` or rules, as values or as text like `GET=1000/min,POST:/servers/=5000/day`) or clears (null)
 * an account's override. Bad rule text is a validation error naming the problem.
 */
export async function setAccountLimits(s: Services, email: string, limits: AccountLimits | string): Promise<{ uuid: string; email: string }> {
  const user = await findUserByEmail(s, email);
  if (!user) throw new ApiError('notexist', `No user with e-mail ${email}`, 'email');
  let value: AccountLimits;
  try {
    value = typeof limits === 'string' ? decodeAccountLimits(limits) : limits;
  } catch (e) {
    if (e instanceof RuleError) throw new ApiError('validation', e.message, 'limits');
    throw e;
  }
  if (value === null) {
    await s.store.limits.overrides.clear(s.store.db, user.uuid);
  } else {
    const text = value === 'off' ? 'off' : formatRules(value);
    const updated_at = isoTimestamp(s.clock.now());
    await s.store.limits.overrides.set(s.store.db, user.uuid, text, updated_at);
  }
  for (const fn of listeners) fn(user.uuid);
  return { uuid: user.uuid, email: user.email };
}
