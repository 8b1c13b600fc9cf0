import { accountOf } from '../../billing/accounts.js';
import { ledgerAmount } from '../../billing/money.js';
import { f } from '../../core/fields.js';
import type { SingletonDecl } from '../../core/resource.js';

/** The stock filters the recorded `schema/` of billing's single objects prints (the service's base resource's). */
export const STOCK_FILTERS = { filtering: { name: 'exact', name__contains: 'exact', tag: 'exact', uuid: 'exact' } };

/** `GET /balance/` (reference §16.1): the caller's money, as the ledger leaves it. */
export const balance: SingletonDecl = {
  shape: 'singleton',
  kind: 'balance',
  flavour: 'custom',
  fields: {
    balance: f.decimal({ readonly: true, required: true, help: 'Amount of money in account' }),
    credit_limit: f.string({ readonly: true, required: true, nullable: true, help: 'Credit limit applied to the account, if present' }),
    currency: f.string({ readonly: true, required: true, help: 'Currency of the account' }),
  },
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: ['get'],
  wire: { advertised: STOCK_FILTERS },
  service: {
    async get(ctx) {
      const a = await accountOf(ctx.store.db, ctx, ctx.caller.uuid);
      return { balance: ledgerAmount(a.balance), credit_limit: a.credit_limit, currency: a.currency };
    },
  },
};
