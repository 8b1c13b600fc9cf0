import { ConfigError } from '../config.js';
import { accountOf } from '../billing/accounts.js';
import { topUp } from '../billing/payments.js';
import type { Services } from '../core/context.js';
import { ApiError } from '../core/errors.js';
import { findUserByEmail } from '../resources/users/users.js';

/** `stratus billing topup EMAIL AMOUNT [--method M]` and `stratus billing show EMAIL`: an account's money. */
export async function billingCommand(s: Services, args: string[], opts: { method?: string }, usage: string): Promise<string> {
  const [sub, email, amount] = args;
  const user = email ? await findUserByEmail(s, email) : undefined;
  if (email && !user) throw new ApiError('notexist', `No user with e-mail ${email}`, 'email');
  if (sub === 'topup' && user && amount !== undefined) {
    const paid = await topUp(s, user.uuid, amount, opts.method);
    return `paid ${amount} into ${email} (payment ${paid.id}); balance ${paid.balance}\n`;
  }
  if (sub === 'show' && user) {
    const a = await accountOf(s.store.db, s, user.uuid);
    return `${email}: balance ${a.balance.toFixed(20)} ${a.currency}\n`;
  }
  throw new ConfigError(usage);
}
