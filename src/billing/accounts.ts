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
  /** Charged by volume (traffic): `resource_amount` is what was used in the interval, not a rate held through it. */
  volume?: boolean;
}

/** The account's balance row, made with the opening balance if it has none yet (idempotent, any process). */
export async function openAccount(tx: Tx, s: S, owner: string): Promise<void> {
  await s.store.billing.accounts.open(tx, {
    owner_uuid: owner,
    balance: ledgerAmount(s.config.openingBalance),
    currency: s.config.currency,
    credit_limit: null,
    updated_at: isoTimestamp(s.clock.now()),
  });
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
  const row = await s.store.billing.accounts.read(db, owner);
  if (row) return toAccount(row);
  return { owner, balance: new Money(ledgerAmount(s.config.openingBalance)), currency: s.config.currency, credit_limit: null, notice: null };
}

/** Lock accounts' balance rows for a change (creating missing ones), in owner order so two writers never deadlock. */
export async function lockAccounts(tx: Tx, s: S, owners: readonly string[]): Promise<Map<string, Account>> {
  const sorted = [...new Set(owners)].sort();
  const out = new Map<string, Account>();
  if (!sorted.length) return out;
  const read = async (which: string[]) => {
    for (const r of await s.store.billing.accounts.lock(tx, which)) out.set(r.owner_uuid, toAccount(r));
  };
  await read(sorted);
  const missing = sorted.filter((o) => !out.has(o));
  if (missing.length) {
    for (const owner of missing) await openAccount(tx, s, owner);
    await read(missing);
  }
  return out;
}

/** An account's entries in order, each from the balance the previous one left; the account's balance moves on. */
function entriesOf(s: S, account: Account, charges: readonly Charge[], now: string) {
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
  account.balance = balance;
  return rows;
}

/**
 * Write several accounts' entries and their new balances (locked by the caller: lockAccounts), in a
 * bounded number of statements (store/billing/accounts.ts): a billing poll of a thousand accounts is a few
 * inserts and, on PostgreSQL, one update per 500 accounts.
 */
export async function postMany(tx: Tx, s: S, batch: readonly { account: Account; charges: readonly Charge[] }[]): Promise<void> {
  const now = isoTimestamp(s.clock.now());
  const changed = batch.filter((b) => b.charges.length);
  const rows = changed.flatMap((b) => entriesOf(s, b.account, b.charges, now));
  await s.store.billing.accounts.insertEntries(tx, rows);
  const accounts = changed.map((b) => b.account);
  await s.store.billing.accounts.setBalances(
    tx,
    accounts.map((a) => ({ owner: a.owner, balance: ledgerAmount(a.balance) })),
    now,
  );
  // The live event stream tells each account its balance changed (http/event-stream.ts).
  for (const a of accounts) s.store.changes.note(tx, { owner: a.owner, kind: 'balance', uuid: null });
}

/** Write one account's entries and its new balance (see postMany). Returns the balance after. */
export async function post(tx: Tx, s: S, account: Account, charges: readonly Charge[]): Promise<Money> {
  await postMany(tx, s, [{ account, charges }]);
  return account.balance;
}
