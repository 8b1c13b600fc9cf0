import { Decimal } from 'decimal.js';

/**
 * Billing's decimal: enough significant digits that a price per base unit per second (0.28 / 2.78e15)
 * times a byte count times seconds keeps every digit the API prints (20 decimal places, as the recorded
 * ledger and balance show). Amounts are rounded to 20 places once, where they enter the ledger.
 */
export const Money = Decimal.clone({ precision: 80, rounding: Decimal.ROUND_HALF_EVEN, toExpNeg: -40, toExpPos: 60 });
export type Money = InstanceType<typeof Money>;

export const PLACES = 20;

/** An amount as the ledger keeps and prints it: 20 decimal places. */
export const ledgerAmount = (d: Money | string | number): string => new Money(d).toFixed(PLACES);
