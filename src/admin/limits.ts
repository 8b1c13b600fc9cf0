import { validation } from '../core/errors.js';
import { decodeAccountLimits } from '../resources/accounts/rate-limits.js';
import { RuleError } from '../core/rate-rules.js';

/**
 * An account's rate-limit override as the admin plane, `users add --limits` and seeds take it ("off" or rules
 * like `GET=1000/min`), checked before the account is made: a refused rule creates nothing.
 */
export function checkLimits(text: unknown, point: string): string {
  if (typeof text !== 'string' || !text) throw validation(point, `${point} must be "off" or rules like "GET=1000/min,POST:/servers/=5000/day"`);
  try {
    decodeAccountLimits(text);
  } catch (e) {
    if (e instanceof RuleError) throw validation(point, e.message);
    throw e;
  }
  return text;
}
