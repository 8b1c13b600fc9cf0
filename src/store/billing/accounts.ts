import { sql, type Insertable, type Selectable } from 'kysely';
import type { Db, Dialect, Tx } from '../db.js';
import { lockRows } from '../locks.js';
import type { BillingAccountsTable, LedgerTable } from '../schema.js';

/**
 * Accounts' money (`billing_accounts`) and their ledger (`ledger`): the rows billing/accounts.ts keeps
 * (balances under a row lock, entries written with the balance they move).
 */
export type AccountRow = Selectable<BillingAccountsTable>;
export type LedgerEntry = Omit<Insertable<LedgerTable>, 'id'>;

/** Rows per statement: well below both engines' bound-parameter limits. */
const CHUNK = 500;

export class AccountQueries {
  constructor(private readonly dialect: Dialect) {}

  /** The account's row with these opening values, unless it has one already (idempotent, any process). */
  async open(tx: Tx, row: Omit<AccountRow, 'notice'>): Promise<void> {
    await tx
      .insertInto('billing_accounts')
      .values(row)
      .onConflict((oc) => oc.column('owner_uuid').doNothing())
      .execute();
  }

  /** An account's row (no lock), or undefined. */
  async read(db: Db | Tx, owner: string): Promise<AccountRow | undefined> {
    return db.selectFrom('billing_accounts').selectAll().where('owner_uuid', '=', owner).executeTakeFirst();
  }

  /** The account's currency, or undefined when it has no row yet. */
  async currency(db: Db | Tx, owner: string): Promise<string | undefined> {
    return (await db.selectFrom('billing_accounts').select('currency').where('owner_uuid', '=', owner).executeTakeFirst())?.currency;
  }

  /** Lock these accounts' rows until the transaction ends, in owner order (callers pass them sorted: no deadlock). */
  async lock(tx: Tx, owners: readonly string[]): Promise<AccountRow[]> {
    const out: AccountRow[] = [];
    for (let i = 0; i < owners.length; i += CHUNK)
      out.push(
        ...(await lockRows(
          this.dialect,
          tx
            .selectFrom('billing_accounts')
            .selectAll()
            .where('owner_uuid', 'in', owners.slice(i, i + CHUNK))
            .orderBy('owner_uuid'),
        ).execute()),
      );
    return out;
  }

  /** Ledger entries, a statement per 500. */
  async insertEntries(tx: Tx, rows: readonly LedgerEntry[]): Promise<void> {
    for (let i = 0; i < rows.length; i += CHUNK)
      await tx
        .insertInto('ledger')
        .values(rows.slice(i, i + CHUNK))
        .execute();
  }

  /**
   * New balances of several accounts. PostgreSQL: one UPDATE … FROM (VALUES …) per 500 accounts (a
   * billing poll of a thousand accounts is two statements); SQLite: a statement each (calls into the
   * same process, not round trips).
   */
  async setBalances(tx: Tx, balances: readonly { owner: string; balance: string }[], updatedAt: string): Promise<void> {
    if (this.dialect === 'postgres')
      for (let i = 0; i < balances.length; i += CHUNK) {
        const values = sql.join(balances.slice(i, i + CHUNK).map((a) => sql`(${a.owner}, ${a.balance})`));
        await sql`update billing_accounts as b set balance = v.balance, updated_at = ${updatedAt} from (values ${values}) as v(owner_uuid, balance) where b.owner_uuid = v.owner_uuid`.execute(
          tx,
        );
      }
    else
      for (const a of balances)
        await tx.updateTable('billing_accounts').set({ balance: a.balance, updated_at: updatedAt }).where('owner_uuid', '=', a.owner).execute();
  }

  /** The last out-of-money notice given to the account (null: none). */
  async setNotice(tx: Tx, owner: string, notice: string | null): Promise<void> {
    await tx.updateTable('billing_accounts').set({ notice }).where('owner_uuid', '=', owner).execute();
  }
}
