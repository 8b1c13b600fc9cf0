import { accountOf } from '../../billing/accounts.js';
import { levelOf, readLevels } from '../../billing/levels.js';
import { Money } from '../../billing/money.js';
import type { Ctx } from '../../core/context.js';
import { ApiError } from '../../core/errors.js';
import type { Obj } from '../../core/input.js';
import type { Tx } from '../../store/db.js';

/** Spec "Limits" 7: starting a server needs funds for 5 days of burst usage of its resources. */
const FIVE_DAYS_S = 5 * 86_400;

/** What 5 days of this server's cpu and memory cost at the burst prices in force, in the owner's currency. */
export async function fiveDaysOf(tx: Tx, ctx: Ctx, body: Obj, currency: string): Promise<Money> {
  const levels = (await readLevels(tx, ctx)).current;
  const type = String(body.cpu_type ?? 'amd');
  let total = new Money(0);
  for (const [keys, amount] of [
    [[`${type}_cpu`, 'cpu'], Number(body.cpu)],
    [[`${type}_mem`, 'mem'], Number(body.mem)],
  ] as const) {
    const resource = keys.find((k) => ctx.config.pricing.rowAt(k, 0, currency));
    if (!resource) continue;
    total = total.plus(ctx.config.pricing.perUnitSecond(resource, levelOf(levels, resource), currency)!.times(amount).times(FIVE_DAYS_S));
  }
  return total;
}

/** 402 when the owner's balance cannot pay 5 days of the server's burst usage. */
export async function requireFunds(tx: Tx, ctx: Ctx, owner: string, body: Obj): Promise<void> {
  const account = await accountOf(tx, ctx, owner);
  const needed = await fiveDaysOf(tx, ctx, body, account.currency);
  if (account.balance.lt(needed))
    throw new ApiError(
      'billing',
      `Insufficient funds: starting this server needs ${needed.toFixed(2)} ${account.currency} for 5 days of burst usage, the balance is ${account.balance.toFixed(2)} ${account.currency}`,
    );
}
