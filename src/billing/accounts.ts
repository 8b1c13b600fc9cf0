import { isoTimestamp } from '../core/clock.js';
import type { Services } from '../core/context.js';
import type { Db, Tx } from '../store/db.js';
import { ledgerAmount, Money } from './money.js';

/**
 * Each account's money (reference §16.1) and its ledger (§16.4). The balance row is created with the
 * configured opening balance when the account is made (or, for an account older than billing, at its
 * first read or charge). Every debit and credit is one ledger row written under the balance row's lock in
 * the transaction of its cause, with `initial` the balance before and `end = initial − amount` after, so
 * "balance = opening balance − Σ amounts" holds exactly.
 */
type S = Pick<Services, 'store' | 'clock' | 'config'>;

export interface Account {
  owner: string;
  balance: Money;
  currency: string;
  credit_limit: string | null;
  /** The last out-of-money notice given (soon, very_soon, stopped), or null. */
  notice: string | null;
}

/** A ledger entry to write (the balance fields are filled in by `post`). */
export interface Charge {
  amount: Money;
  reason: string;
  poll_time: Date;
  billing_cycle?: number | null;
  interval?: number | null;
  human_interval?: string | null;
  resource?: string | null;
  resource_amount?: string | null;
}

/** The account's balance row, made with the opening balance if it has none yet (idempotent, any process). */
export async function openAccount(tx: Tx, s: S, owner: string): Promise<void> {
  await tx
    .insertInto('billing_accounts')
    .values({
      owner_uuid: owner,
      balance: ledgerAmount(s.config.openingBalance),
      currency: s.config.currency,
      credit_limit: null,
      updated_at: isoTimestamp(s.clock.now()),
    })
    .onConflict((oc) => oc.column('owner_uuid').doNothing())
    .execute();
}

const toAccount = (r: { owner_uuid: string; balance: string; currency: string; credit_limit: string | null; notice: string | null }): Account => ({
  owner: r.owner_uuid,
  balance: new Money(r.balance),
  currency: r.currency,
  credit_limit: r.credit_limit,
  notice: r.notice,
});

/** Read an account's balance (no lock): what `/balance/` shows. */
export async function accountOf(db: Db | Tx, s: S, owner: string): Promise<Account> {
  const row = await db.selectFrom('billing_accounts').selectAll().where('owner_uuid', '=', owner).executeTakeFirst();
  if (row) return toAccount(row);
  return { owner, balance: new Money(ledgerAmount(s.config.openingBalance)), currency: s.config.currency, credit_limit: null, notice: null };
}

/** Lock accounts' balance rows for a change (creating missing ones), in owner order so two writers never deadlock. */
export async function lockAccounts(tx: Tx, s: S, owners: readonly string[]): Promise<Map<string, Account>> {
  const sorted = [...new Set(owners)].sort();
  const out = new Map<string, Account>();
  if (!sorted.length) return out;
  const read = async (which: string[]) => {
    for (let i = 0; i < which.length; i += 500) {
      const rows = await s.store
        .locking(
          tx
            .selectFrom('billing_accounts')
            .selectAll()
            .where('owner_uuid', 'in', which.slice(i, i + 500))
            .orderBy('owner_uuid'),
        )
        .execute();
      for (const r of rows) out.set(r.owner_uuid, toAccount(r));
    }
  };
  await read(sorted);
  const missing = sorted.filter((o) => !out.has(o));
  if (missing.length) {
    for (const owner of missing) await openAccount(tx, s, owner);
    await read(missing);
  }
  return out;
}

/**
 * Write an account's entries in order, each from the balance the previous one left, and store the final
 * balance. The account must be locked by the caller (lockAccounts). Returns the balance after.
 */
export async function post(tx: Tx, s: S, account: Account, charges: readonly Charge[]): Promise<Money> {
  if (!charges.length) return account.balance;
  const now = isoTimestamp(s.clock.now());
  let balance = account.balance;
  const rows = charges.map((c) => {
    const amount = new Money(ledgerAmount(c.amount));
    const initial = balance;
    balance = initial.minus(amount);
    return {
      owner_uuid: account.owner,
      amount: ledgerAmount(amount),
      billing_cycle: c.billing_cycle ?? null,
      initial: ledgerAmount(initial),
      end_balance: ledgerAmount(balance),
      interval: c.interval ?? null,
      human_interval: c.human_interval ?? null,
      poll_time: isoTimestamp(c.poll_time),
      reason: c.reason,
      resource: c.resource ?? null,
      resource_amount: c.resource_amount ?? '1',
      time: now,
    };
  });
  for (let i = 0; i < rows.length; i += 200)
    await tx
      .insertInto('ledger')
      .values(rows.slice(i, i + 200))
      .execute();
  await tx
    .updateTable('billing_accounts')
    .set({ balance: ledgerAmount(balance), updated_at: now })
    .where('owner_uuid', '=', account.owner)
    .execute();
  account.balance = balance;
  // The live event stream tells the account its balance changed (notify/stream.ts).
  s.store.changes.note(tx, { owner: account.owner, kind: 'balance', uuid: null });
  return balance;
}
