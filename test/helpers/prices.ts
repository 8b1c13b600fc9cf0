import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PriceCatalogue, type Discount, type PriceRow } from '../../src/billing/catalogue.js';

/**
 * A small price catalogue with round numbers, so a test's expected amounts are computed by hand (EUR):
 * - cpu: 3.6 per GHz-hour at level 1 (1 MHz·s = 0.000001), 7.2 at level 2, 1.8 to subscribe (level 0);
 * - mem: 0.36 per GB-hour at level 1 (1 GiB for 5 minutes = 0.03);
 * - dssd: 0.2592 per GB-month (30 days) at level 1 (10 GiB for 5 minutes = 0.0003), 0.1296 to subscribe
 *   (1 GiB for 30 days = 0.1296);
 * - ip: 2.592 per IP-month (one IP for a second = 0.000001), at both levels;
 * - tx: 0.05 per GB at level 1, 0.04 to subscribe;
 * - discounts: 3% from 3 months, 25% from a year.
 */
export const GiB = 2 ** 30;
const HOUR = 3600;
const MONTH = 30 * 86_400;

const row = (id: number, resource: string, level: number, price: string, unit: string, multiplier: number): PriceRow => ({
  id: String(id),
  currency: 'EUR',
  level,
  multiplier,
  price,
  resource,
  unit,
});

export const TEST_PRICE_ROWS: PriceRow[] = [
  row(1, 'cpu', 0, '1.8', 'GHz/hour', 1000 * HOUR),
  row(2, 'cpu', 1, '3.6', 'GHz/hour', 1000 * HOUR),
  row(3, 'cpu', 2, '7.2', 'GHz/hour', 1000 * HOUR),
  row(4, 'mem', 0, '0.18', 'GB/hour', GiB * HOUR),
  row(5, 'mem', 1, '0.36', 'GB/hour', GiB * HOUR),
  row(6, 'dssd', 0, '0.1296', 'GB/month', GiB * MONTH),
  row(7, 'dssd', 1, '0.2592', 'GB/month', GiB * MONTH),
  row(8, 'ip', 0, '2.592', 'IP/month', MONTH),
  row(9, 'ip', 1, '2.592', 'IP/month', MONTH),
  row(10, 'tx', 0, '0.04', 'GB', GiB),
  row(11, 'tx', 1, '0.05', 'GB', GiB),
];

export const TEST_DISCOUNTS: Discount[] = [
  { period: '3 months', value: '0.0300000000' },
  { period: '1 year', value: '0.2500000000' },
];

/** The catalogue as billing reads it (unit tests of pure functions). */
export const testCatalogue = (): PriceCatalogue =>
  new PriceCatalogue(
    TEST_PRICE_ROWS.map((r) => ({ ...r })),
    [],
    TEST_DISCOUNTS,
  );

/** The catalogue as a `--pricing` file (services opened with it: `openServices({ pricing: testPriceFile() })`). */
export function testPriceFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'stratus-prices-')), 'prices.json');
  writeFileSync(file, JSON.stringify({ objects: TEST_PRICE_ROWS, discounts: TEST_DISCOUNTS }));
  return file;
}
