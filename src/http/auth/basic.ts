import type { Caller, Services } from '../../core/context.js';
import { dummyHash, passwordTag, sameTag, verifyPassword } from '../../core/passwords.js';
import { findUserByEmail, normalizeEmail, onPasswordChange } from '../../resources/users/users.js';

interface Verified {
  caller: Caller;
  /** The stored hash the password was checked against: a new hash (another process) forces a re-check. */
  hash: string;
  tag: string;
  /** Until this instant (ms) the entry is trusted without reading the user row. */
  freshUntil: number;
}

const FRESH_MS = 2_000;

/**
 * Remembers verified credentials so a correct Basic header does not pay scrypt on every request.
 * Entries hold an HMAC of the password under a per-process key, never the password. After FRESH_MS
 * the user row is read again (so a password or state changed by another process is seen); scrypt runs
 * again only when the stored hash changed. A local password change forgets the entry at once.
 *
 * Entries are per account *and client address* (`scope`): a hit skips login protection's lock check, so
 * an address locked out of an account must never be answered from an entry another address earned.
 */
export class CredentialCache {
  private entries = new Map<string, Verified>();

  constructor(
    private readonly s: Services,
    /**
     * Entries kept (`--credential-cache`), one per account and client address; the least recently verified
     * goes first. A login in use is verified again every FRESH_MS (re-inserted at the end), so hits need not
     * reorder the Map on the request path.
     */
    readonly maxEntries = s.config.credentialCache,
  ) {
    onPasswordChange((email) => this.forget(email));
  }

  get size(): number {
    return this.entries.size;
  }

  clear(): void {
    this.entries.clear();
  }

  /** Drops every entry of one account (its password or state changed, or login protection locked it). */
  forget(email: string): void {
    const prefix = `${normalizeEmail(email)}\n`;
    for (const key of this.entries.keys()) if (key.startsWith(prefix)) this.entries.delete(key);
  }

  /** The caller when these exact credentials were verified from `scope` within FRESH_MS; no database, no scrypt. */
  fresh(email: string, password: string, scope = ''): Caller | null {
    const hit = this.entries.get(`${normalizeEmail(email)}\n${scope}`);
    if (hit && hit.freshUntil > this.s.clock.now().getTime() && sameTag(hit.tag, passwordTag(password))) return hit.caller;
    return null;
  }

  async verify(email: string, password: string, scope = ''): Promise<Caller | null> {
    const address = normalizeEmail(email);
    const key = `${address}\n${scope}`;
    const tag = passwordTag(password);
    const hit = this.entries.get(key);
    const now = this.s.clock.now().getTime();
    if (hit && hit.freshUntil > now && sameTag(hit.tag, tag)) return hit.caller;

    const user = await findUserByEmail(this.s, address);
    if (!user || !user.password_hash) {
      // Same cost as a wrong password, so response times do not tell which e-mails have accounts.
      await verifyPassword(password, await dummyHash());
      return null;
    }
    const known = hit && hit.hash === user.password_hash && sameTag(hit.tag, tag);
    if (!known && !(await verifyPassword(password, user.password_hash))) return null;

    const caller: Caller = { uuid: user.uuid, email: user.email, state: user.state };
    this.entries.delete(key); // re-insert: Map order doubles as least-recently-used order
    this.entries.set(key, { caller, hash: user.password_hash, tag, freshUntil: now + FRESH_MS });
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    return caller;
  }
}

export const BASIC_CHALLENGE = 'Basic realm="users"';

/** Decode `Authorization: Basic …` into email and password, or null when the header is not Basic. */
export function parseBasic(header: string): { email: string; password: string } | null {
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header);
  if (!m) return null;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return null;
  return { email: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
