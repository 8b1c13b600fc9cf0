import { Decimal } from 'decimal.js';

/**
 * Money is decimal, never float. The real API prints amounts quantized to 16 places, and zero as
 * Python's Decimal does: `0E-16`.
 */
export function money16(value: string | number | Decimal): string {
  const d = new Decimal(value);
  return d.isZero() ? '0E-16' : d.toFixed(16);
}
