import type { Services } from '../../core/context.js';
import { ApiError } from '../../core/errors.js';
import { sha256Hex } from '../../core/passwords.js';
import { normalizeEmail } from '../users/users.js';
import { DEFAULT_LOGIN_PROTECTION, type LoginProtection } from '../../core/login-rules.js';

/**
 * Login protection against password guessing.
 *
 * The rule. A failed login is a wrong password (or an unknown e-mail) through HTTP Basic, HTTP Digest (a
 * wrong `response` for a genuine nonce) or `accounts/action/?do=login`. Three counters of failed logins are
 * kept, each over a fixed 15-minute window that its first failure opens:
 *
 *   pair     one account (e-mail) from one client address   5 failures -> that address is refused for that account
 *   address  one client address, any accounts              20 failures -> that address is refused for every account
 *   account  one account, from all addresses together       50 failures -> the account is refused from every address
 *
 * "Refused" means 429 (`ratelimit`, error array, `Retry-After` = seconds until the lock ends) before the
 * password is even looked at: the right password is refused too, and a refused guess costs no scrypt. A
 * lock lasts 15 minutes from the failure that set it. Refused attempts are not counted, so a lock never
 * extends itself: every lock ends 15 minutes after the failure that set it, whatever an attacker does
 * meanwhile. An attempt whose password was checked answers 429 if a lock is in force when the check ends,
 * whether the password was right or wrong (so the failure that sets a lock already answers 429, and a
 * burst of parallel guesses that passed the first check together cannot tell a right guess by its
 * status); else 200 or 401. A successful login clears its pair counter (not the address or account ones).
 *
 * Why three counters: the pair counter stops the guessing of one account from one address after 5
 * tries, without touching the owner logging in from anywhere else; the address counter stops one address
 * from spraying guesses over many accounts; the account counter stops a guess spread over many addresses.
 * Because its pair lock caps any single address at 5 failures per account and window, an attacker needs at
 * least ten addresses at once to lock the owner out of an account, and that lock, too, ends 15 minutes
 * after its last counted failure.
 *
 * Counters are rows of `login_failures` (so every API process on one PostgreSQL database agrees), keyed
 * by a SHA-256 of the counter kind and its subject (no e-mail or address in clear), timed by the
 * injected clock. Credentials a process verified for the same account from the same address in the last
 * 2 s may still be accepted from its cache for that long after another process set a lock (see
 * http/auth/basic.ts: the cache is per account and address, so a locked address never rides on an entry
 * another address earned); a lock set in the same process drops the account's cache entries at once.
 *
 * The numbers above are the defaults of `--login-protection` (core/login-rules.ts): an operator may change each
 * count, turn a counter off, change the window and the lock, or turn the protection off (`--ci` does: a
 * pipeline that tests wrong passwords must not lock itself out). A pair counter also carries the keys of
 * its account and address, so `stratus users unlock EMAIL` (or `--address IP`) clears every counter of an
 * account or an address without either being stored in clear.
 */
export const LOGIN_WINDOW_MS = DEFAULT_LOGIN_PROTECTION.windowMs;
export const LOGIN_LOCK_MS = DEFAULT_LOGIN_PROTECTION.lockMs;
export const LOGIN_LIMITS = {
  pair: DEFAULT_LOGIN_PROTECTION.pair!,
  address: DEFAULT_LOGIN_PROTECTION.address!,
  account: DEFAULT_LOGIN_PROTECTION.account!,
} as const;

type Kind = keyof typeof LOGIN_LIMITS;
/** How a refusal by login protection begins (metrics tell it from a rate-limit refusal by it). */
export const LOGIN_LOCK_MESSAGE = 'Too many failed logins';
export type LoginKeys = Record<Kind, string>;

const PRUNE_EVERY_MS = 60_000;
let nextPrune = 0;

/** The three counter keys of one attempt. */
export function loginKeys(email: string, address: string): LoginKeys {
  const who = normalizeEmail(email);
  return {
    pair: sha256Hex(`pair\n${who}\n${address}`),
    address: sha256Hex(`address\n${address}`),
    account: sha256Hex(`account\n${who}`),
  };
}

interface LockState {
  /** Latest end of a lock in force on any of the keys (0 = none). */
  lockedUntil: number;
  /** Failures currently counted for the pair (a success clears them). */
  pairFailures: number;
}

/** The keys of the counters the deployment keeps (a counter turned off neither counts nor locks). */
const activeKeys = (p: LoginProtection, keys: LoginKeys): string[] => KINDS.filter((k) => p[k] !== null).map((k) => keys[k]);
const KINDS = ['pair', 'address', 'account'] as const;

async function readState(s: Services, p: LoginProtection, keys: LoginKeys, now: number): Promise<LockState> {
  const active = activeKeys(p, keys);
  if (active.length === 0) return { lockedUntil: 0, pairFailures: 0 };
  const rows = await s.store.accounts.loginFailures.read(s.store.db, active);
  let lockedUntil = 0;
  for (const r of rows) if (r.lockedUntilMs > now) lockedUntil = Math.max(lockedUntil, r.lockedUntilMs);
  const pair = rows.find((r) => r.key === keys.pair);
  return { lockedUntil, pairFailures: pair ? pair.failures : 0 };
}

function refused(until: number, now: number): ApiError {
  const seconds = Math.max(1, Math.ceil((until - now) / 1000));
  return new ApiError('ratelimit', `${LOGIN_LOCK_MESSAGE}; try again in ${seconds} seconds`, null, { 'Retry-After': String(seconds) });
}

/**
 * Before the password is looked at: throws 429 while any of the attempt's counters is locked.
 *
 * Concurrency: many attempts may pass this check together (before any of them failed), and their
 * password checks then finish one after another. So the outcome is decided again when the check
 * ends (loginFailed, loginSucceeded): an attempt that finds a lock in force then answers 429 whether its
 * password was right or wrong, so a burst of parallel guesses learns nothing past the first few.
 */
export async function checkLogin(s: Services, keys: LoginKeys): Promise<void> {
  const p = s.config.loginProtection;
  if (!p) return;
  const now = s.clock.now().getTime();
  const { lockedUntil } = await readState(s, p, keys, now);
  if (lockedUntil > now) throw refused(lockedUntil, now);
}

/**
 * Counts one failed login on all three counters (one atomic upsert each), then throws 429 if a lock is
 * in force (this failure may have set it), else returns. `accountLocked` tells the caller to drop cached
 * credentials of the account (a lock of its pair or account counter was set).
 */
export async function loginFailed(s: Services, keys: LoginKeys, onAccountLocked?: () => void): Promise<void> {
  const p = s.config.loginProtection;
  if (!p) return;
  const now = s.clock.now().getTime();
  let until = 0;
  let accountLocked = false;
  for (const kind of KINDS) {
    const limit = p[kind];
    if (limit === null) continue;
    const links = kind === 'pair' ? { account_key: keys.account, address_key: keys.address } : {};
    const { lockedUntil, setNow } = await countFailure(s, p, keys[kind], links, limit, now);
    if (lockedUntil > now) until = Math.max(until, lockedUntil);
    if (setNow && kind !== 'address') accountLocked = true;
  }
  if (now >= nextPrune) {
    nextPrune = now + PRUNE_EVERY_MS;
    await s.store.accounts.loginFailures.prune(s.store.db, now, p.windowMs);
  }
  if (accountLocked) onAccountLocked?.();
  if (until > now) throw refused(until, now);
}

/** After a right password: 429 if a lock came into force meanwhile; otherwise the pair's failures are forgotten. */
export async function loginSucceeded(s: Services, keys: LoginKeys): Promise<void> {
  const p = s.config.loginProtection;
  if (!p) return;
  const now = s.clock.now().getTime();
  const state = await readState(s, p, keys, now);
  if (state.lockedUntil > now) throw refused(state.lockedUntil, now);
  if (state.pairFailures > 0) await s.store.accounts.loginFailures.delete(s.store.db, keys.pair);
}

/**
 * Adds a failure to one counter: a window older than LOGIN_WINDOW_MS starts over at 1; the failure that
 * reaches the limit sets the lock (never while a lock is running, so concurrent failures cannot extend it).
 * Returns the counter's lock end and whether this failure set it.
 */
async function countFailure(
  s: Services,
  p: LoginProtection,
  key: string,
  links: { account_key?: string; address_key?: string },
  limit: number,
  now: number,
): Promise<{ lockedUntil: number; setNow: boolean }> {
  const lockedUntil = await s.store.accounts.loginFailures.count(s.store.db, { key, links, limit, now, windowMs: p.windowMs, lockMs: p.lockMs });
  return { lockedUntil, setNow: lockedUntil === now + p.lockMs };
}

/**
 * Forgets failed logins (and so ends locks): of one account (its own counter and every address's counter
 * for it), of one client address (its own counter and its counters for every account), of both (given
 * both), or all of them. Returns how many counters were cleared.
 */
export async function unlockLogins(s: Services, what: { email?: string; address?: string } | 'all'): Promise<number> {
  if (what === 'all') return s.store.accounts.loginFailures.clear(s.store.db, 'all');
  const accounts = what.email === undefined ? [] : [loginKeys(what.email, '').account];
  // An IPv4 client of a dual-stack listener is seen as `::ffff:a.b.c.d`: both spellings are cleared.
  const spellings = what.address === undefined ? [] : /^\d+\.\d+\.\d+\.\d+$/.test(what.address) ? [what.address, `::ffff:${what.address}`] : [what.address];
  const addresses = spellings.map((a) => loginKeys('', a).address);
  return s.store.accounts.loginFailures.clear(s.store.db, { accounts, addresses });
}
