/**
 * The `--login-protection` setting: `off`, `default`, or rules over the defaults, e.g.
 * `pair=10,address=off,window=5m,lock=1m`. `pair`, `address` and `account` are failure counts (or `off`
 * for no such counter; see resources/accounts/login-guard.ts for what each counts); `window` and `lock` are durations
 * (`90s`, `15m`, `1h`).
 */
export interface LoginProtection {
  pair: number | null;
  address: number | null;
  account: number | null;
  windowMs: number;
  lockMs: number;
}

export const DEFAULT_LOGIN_PROTECTION: Readonly<LoginProtection> = Object.freeze({
  pair: 5,
  address: 20,
  account: 50,
  windowMs: 15 * 60_000,
  lockMs: 15 * 60_000,
});

export class LoginRuleError extends Error {}

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000 } as const;

export function parseLoginProtection(raw: string): LoginProtection | null {
  const value = raw.trim();
  if (value === 'off') return null;
  if (value === 'default') return { ...DEFAULT_LOGIN_PROTECTION };
  const out: LoginProtection = { ...DEFAULT_LOGIN_PROTECTION };
  const seen = new Set<string>();
  for (const part of value.split(',').map((p) => p.trim())) {
    const m = /^([a-z]+)=(.*)$/.exec(part);
    if (!m) throw new LoginRuleError(`"${part}" is not name=value (give off, default, or rules like pair=5,address=20,account=50,window=15m,lock=15m)`);
    const [, name, v] = m;
    if (seen.has(name)) throw new LoginRuleError(`${name} is given twice`);
    seen.add(name);
    if (name === 'pair' || name === 'address' || name === 'account') {
      if (v === 'off') out[name] = null;
      else if (/^\d{1,6}$/.test(v) && Number(v) >= 1) out[name] = Number(v);
      else throw new LoginRuleError(`${name} must be a number of failures from 1 to 999999, or off; got "${v}"`);
    } else if (name === 'window' || name === 'lock') {
      const d = /^(\d{1,6})([smh])$/.exec(v);
      const ms = d ? Number(d[1]) * UNIT_MS[d[2] as keyof typeof UNIT_MS] : 0;
      if (!d || ms < 1000 || ms > 7 * 86_400_000) throw new LoginRuleError(`${name} must be a duration from 1s to 168h like 90s, 15m or 1h; got "${v}"`);
      out[name === 'window' ? 'windowMs' : 'lockMs'] = ms;
    } else throw new LoginRuleError(`unknown rule "${name}"; known: pair, address, account, window, lock`);
  }
  return out;
}

/** The rule as `users unlock` and the start-up banner describe it. */
export function describeLoginProtection(p: LoginProtection | null): string {
  if (!p) return 'off';
  const n = (v: number | null) => (v === null ? 'off' : String(v));
  const d = (ms: number) => (ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : ms % 60_000 === 0 ? `${ms / 60_000}m` : `${ms / 1000}s`);
  return `pair=${n(p.pair)},address=${n(p.address)},account=${n(p.account)},window=${d(p.windowMs)},lock=${d(p.lockMs)}`;
}
