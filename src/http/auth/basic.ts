import type { Caller, Services } from '../../core/context.js';
import { ApiError } from '../../core/errors.js';
import { passwordTag, sameTag, verifyPassword } from '../../core/passwords.js';
import { findUserByEmail, normalizeEmail, onPasswordChange } from '../../resources/users/users.js';

interface Verified {
  caller: Caller;
  /** The stored hash the password was checked against: a new hash (another process) forces a re-check. */
  hash: string;
  tag: Buffer;
  /** Until this instant (ms) the entry is trusted without reading the user row. */
  freshUntil: number;
}

const FRESH_MS = 2_000;
const MAX_ENTRIES = 10_000;

/**
 * Remembers verified credentials so a correct Basic header does not pay scrypt on every request.
 * Entries hold an HMAC of the password under a per-process key, never the password. After FRESH_MS
 * the user row is read again (so a password or state changed by another process is seen); scrypt runs
 * again only when the stored hash changed. A local password change forgets the entry at once.
 */
export class CredentialCache {
  private entries = new Map<string, Verified>();

  constructor(private readonly s: Services) {
    onPasswordChange((email) => this.entries.delete(normalizeEmail(email)));
  }

  clear(): void {
    this.entries.clear();
  }

  async verify(email: string, password: string): Promise<Caller | null> {
    const key = normalizeEmail(email);
    const tag = passwordTag(password);
    const hit = this.entries.get(key);
    const now = this.s.clock.now().getTime();
    if (hit && hit.freshUntil > now && sameTag(hit.tag, tag)) return hit.caller;

    const user = await findUserByEmail(this.s, key);
    if (!user || !user.password_hash) return null;
    const known = hit && hit.hash === user.password_hash && sameTag(hit.tag, tag);
    if (!known && !(await verifyPassword(password, user.password_hash))) return null;

    const caller: Caller = { uuid: user.uuid, email: user.email, state: user.state };
    this.entries.delete(key); // re-insert: Map order doubles as least-recently-used order
    this.entries.set(key, { caller, hash: user.password_hash, tag, freshUntil: now + FRESH_MS });
    if (this.entries.size > MAX_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    return caller;
  }
}

export const BASIC_CHALLENGE = 'Basic realm="users"';

export const unauthorized = (message = 'Authentication credentials were not provided or are wrong') =>
  new ApiError('auth', message, null, { 'WWW-Authenticate': BASIC_CHALLENGE });

/** Decode `Authorization: Basic …` into email and password, or null when the header is not Basic. */
export function parseBasic(header: string): { email: string; password: string } | null {
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!m) return null;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  return { email: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

/** Authenticate a request from its Authorization header; throws 401 with a challenge otherwise. */
export async function authenticate(cache: CredentialCache, header: string | undefined): Promise<Caller> {
  if (!header) throw unauthorized();
  const creds = parseBasic(header);
  if (!creds) throw unauthorized('Unsupported or malformed Authorization header');
  const caller = await cache.verify(creds.email, creds.password);
  if (!caller) throw unauthorized('Invalid e-mail or password');
  return caller;
}
