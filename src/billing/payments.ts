import type { Services } from '../core/context.js';
import { validation } from '../core/errors.js';
import { record } from '../core/events.js';
import { lockAccounts, post } from './accounts.js';
import { ledgerAmount, Money } from './money.js';

/**
 * A payment into an account (`stratus billing topup`): a credit, i.e. a ledger entry with a negative
 * amount and the recorded reason `Payment through <method> - <uuid>` (reference §16.4), and a `payment`
 * event for notifications — one transaction.
 */
export async function topUp(s: Services, owner: string, amountText: string, method = 'operator'): Promise<{ balance: string; id: string }> {
  if (!/^\d{1,15}(\.\d{1,20})?$/.test(amountText) || new Money(amountText).isZero())
    throw validation('amount', 'The amount must be a positive decimal like 50 or 12.50');
  if (!/^[\w .-]{1,32}$/.test(method)) throw validation('method', 'The method is a short word such as card or bank');
  const amount = new Money(amountText);
  const id = s.ids.uuid();
  return s.store.transaction(async (tx) => {
    const account = (await lockAccounts(tx, s, [owner])).get(owner)!;
    const after = await post(tx, s, account, [
      { amount: amount.neg(), reason: `Payment through ${method} - ${id}`, poll_time: s.clock.now(), resource_amount: '1' },
    ]);
    await record(tx, s, { action: 'payment', category: 'Billing', uuid: id, owner, actor: null, details: `${ledgerAmount(amount)} ${account.currency}` });
    return { balance: ledgerAmount(after), id };
  });
}

/**
 * Make an account's balance `target` (a seed, an operator): one ledger entry for the difference — a
 * payment when it rises, a debit when it falls — so the ledger still explains the balance. Nothing when
 * it already is. Returns whether an entry was written.
 */
export async function setBalance(s: Services, owner: string, target: string): Promise<boolean> {
  return s.store.transaction(async (tx) => {
    const account = (await lockAccounts(tx, s, [owner])).get(owner)!;
    const diff = new Money(target).minus(account.balance);
    if (diff.isZero()) return false;
    const id = s.ids.uuid();
    const reason = diff.gt(0) ? `Payment through seed - ${id}` : `Balance set by seed - ${id}`;
    await post(tx, s, account, [{ amount: diff.neg(), reason, poll_time: s.clock.now(), resource_amount: '1' }]);
    return true;
  });
}
