import type { Services } from '../core/context.js';
import { record } from '../core/events.js';
import type { Tx } from '../store/db.js';
import type { Account } from './accounts.js';
import { CYCLE_MS } from './cycle.js';
import { ledgerAmount, type Money } from './money.js';

/**
 * What happens as an account's money runs out (issue 14, item 7). After each poll's charges: when the
 * balance covers less than 7 days at this cycle's burn, the account gets `out_of_money_soon`, under a day
 * `out_of_money_very_soon`; at zero its servers are stopped (each with an audit `stop` and no
 * `stop_send`: nobody asked) and a `stop_servers` event records it. Each notice is given once on the way
 * down (kept in the account's `notice`) and again only after the balance has recovered (a top-up).
 */
export type ServerStopper = (tx: Tx, s: Services, owner: string) => Promise<number>;

const SOON_MS = 7 * 86_400_000;
const VERY_SOON_MS = 86_400_000;
const RANK: Record<string, number> = { soon: 1, very_soon: 2, stopped: 3 };

export async function checkFunds(tx: Tx, s: Services, account: Account, burnPerCycle: Money, stoppers: readonly ServerStopper[]): Promise<void> {
  const event = (action: string, details: string) => record(tx, s, { action, category: 'Billing', uuid: '', owner: account.owner, actor: null, details });
  let notice: string | null = null;
  if (account.balance.lte(0)) notice = 'stopped';
  else if (burnPerCycle.gt(0)) {
    const leftMs = account.balance.div(burnPerCycle).times(CYCLE_MS);
    if (leftMs.lt(VERY_SOON_MS)) notice = 'very_soon';
    else if (leftMs.lt(SOON_MS)) notice = 'soon';
  }
  const before = account.notice;
  if (notice === before) return;
  const worse = (RANK[notice ?? ''] ?? 0) > (RANK[before ?? ''] ?? 0);
  if (worse) {
    const balance = `balance ${ledgerAmount(account.balance)} ${account.currency}`;
    if (notice === 'stopped') {
      let stopped = 0;
      for (const stop of stoppers) stopped += await stop(tx, s, account.owner);
      await event('stop_servers', `${stopped} server(s) stopped: ${balance}`);
    } else await event(`out_of_money_${notice}`, `${balance}, spending ${ledgerAmount(burnPerCycle)} every 5 minutes`);
  }
  // Better (a top-up) or worse, the notice follows the balance.
  await s.store.billing.accounts.setNotice(tx, account.owner, notice);
  account.notice = notice;
}
