/**
 * A decimal amount of the API (a string, up to 20 places) for a person: rounded half up to `places`, with
 * thousands separated ("10,000.00"). Computed on the digits (BigInt), never through a float.
 */
export function money(amount: unknown, places = 2): string {
  const m = typeof amount === 'string' || typeof amount === 'number' ? /^(-?)(\d+)(?:\.(\d*))?$/.exec(String(amount)) : null;
  if (!m) return amount === null || amount === undefined ? '—' : String(amount);
  const [, sign, whole, frac = ''] = m;
  const scaled = (BigInt(whole + frac.padEnd(places + 1, '0').slice(0, places + 1)) + 5n) / 10n;
  const unit = 10n ** BigInt(places);
  const int = (scaled / unit).toLocaleString('en-US');
  const cents = places ? `.${(scaled % unit).toString().padStart(places, '0')}` : '';
  return `${sign && scaled ? '-' : ''}${int}${cents}`;
}
