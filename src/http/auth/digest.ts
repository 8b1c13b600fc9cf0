import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { Services } from '../../core/context.js';
import { DIGEST_REALM, safeEqual } from '../../core/passwords.js';

/**
 * HTTP Digest (RFC 7616 / 2617), MD5 with `qop=auth`, realm `users`, as the real API offers it.
 *
 * Nonces are stateless until first used: `<unix time, 2 decimals>:<16 hex random>:<32 hex MAC>`, the MAC
 * an HMAC-SHA256 of the first two parts under a server secret. The secret is created once (random) in the
 * `settings` table, so every API process on one database issues and accepts the same nonces. A nonce
 * older than `digestNonceTtl` seconds (by the injected clock) is stale. `opaque` is a MAC of the nonce, so
 * it cannot be swapped or invented. (The real API's nonce middle part is 4 hex; 16 makes two clients
 * challenged in the same 10 ms practically never share a nonce, and so its nc counter.)
 *
 * Replay protection: the highest `nc` accepted per nonce is kept in `digest_nonces`; a request must carry
 * a higher one, decided by one atomic upsert, so it holds across processes. Rows go once their nonce
 * has expired (an expired nonce is refused as stale anyway, so forgetting its counter is safe).
 */
export const DIGEST_SETTING = 'auth_secret';
const PRUNE_EVERY_MS = 60_000;

export interface DigestParams {
  username: string;
  realm: string;
  nonce: string;
  uri: string;
  response: string;
  qop: string;
  nc: string;
  cnonce: string;
  opaque: string;
  algorithm: string;
}

/** Why a Digest header was refused; `stale` asks the client to retry with a fresh nonce. */
export type DigestOutcome =
  { ok: true; email: string } | { ok: false; reason: 'malformed' | 'nonce' | 'opaque' | 'uri' | 'replay' | 'stale' | 'password'; email?: string };

/** Loads the shared server secret, creating it on first use (the first process to insert wins). */
export async function serverSecret(s: Services): Promise<Buffer> {
  const { settings } = s.store;
  let value = await settings.get(s.store.db, DIGEST_SETTING);
  if (value === undefined) {
    await settings.insertIfAbsent(s.store.db, DIGEST_SETTING, randomBytes(32).toString('hex'));
    value = await settings.get(s.store.db, DIGEST_SETTING);
  }
  return Buffer.from(value!, 'hex');
}

const md5 = (s: string) => createHash('md5').update(s, 'utf8').digest('hex');

/**
 * Parses `Digest k=v, k="v", …` (auth-params, quoted strings with `\` escapes). Null when malformed, a
 * directive repeats, or a required one is missing.
 */
export function parseDigest(header: string): DigestParams | null {
  const m = /^Digest\s+(.*)$/is.exec(header.trim());
  if (!m) return null;
  const out: Record<string, string> = {};
  const re = /\s*([A-Za-z0-9_*-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]*))\s*(?:,|$)/gy;
  const text = m[1];
  let pos = 0;
  while (pos < text.length) {
    re.lastIndex = pos;
    const p = re.exec(text);
    if (!p || p[0] === '') return null;
    const key = p[1].toLowerCase();
    if (Object.prototype.hasOwnProperty.call(out, key)) return null;
    out[key] = p[2] !== undefined ? p[2].replace(/\\(.)/g, '$1') : p[3];
    pos = re.lastIndex;
  }
  for (const k of ['username', 'realm', 'nonce', 'uri', 'response'] as const) if (out[k] === undefined) return null;
  return {
    username: out.username,
    realm: out.realm,
    nonce: out.nonce,
    uri: out.uri,
    response: out.response,
    qop: out.qop ?? '',
    nc: out.nc ?? '',
    cnonce: out.cnonce ?? '',
    opaque: out.opaque ?? '',
    algorithm: out.algorithm ?? 'MD5',
  };
}

export class DigestAuth {
  private nextPrune = 0;
  /** HA1 checked when the user is unknown or has no password: same work, never a match. */
  private readonly dummyHa1 = randomBytes(16).toString('hex');

  constructor(
    private readonly s: Services,
    private readonly secret: Buffer,
  ) {}

  static async create(s: Services): Promise<DigestAuth> {
    return new DigestAuth(s, await serverSecret(s));
  }

  private mac(purpose: string, text: string, hexLen: number): string {
    return createHmac('sha256', this.secret).update(`${purpose}\n${text}`).digest('hex').slice(0, hexLen);
  }

  private get ttlMs(): number {
    return this.s.config.digestNonceTtl * 1000;
  }

  newNonce(): string {
    const head = `${(this.s.clock.now().getTime() / 1000).toFixed(2)}:${randomBytes(8).toString('hex')}`;
    return `${head}:${this.mac('nonce', head, 32)}`;
  }

  opaqueFor(nonce: string): string {
    return this.mac('opaque', nonce, 40);
  }

  /** The `WWW-Authenticate: Digest …` challenge, with a fresh nonce. */
  challenge(stale = false): string {
    const nonce = this.newNonce();
    return `Digest realm="${DIGEST_REALM}", qop="auth", algorithm="MD5", nonce="${nonce}", opaque="${this.opaqueFor(nonce)}"` + (stale ? ', stale=true' : '');
  }

  /** Issue instant (ms) of a nonce this server signed, or null when it is not one of ours. */
  private nonceIssuedAt(nonce: string): number | null {
    const m = /^(\d{1,12}\.\d{2}):([0-9a-f]{16}):([0-9a-f]{32})$/.exec(nonce);
    if (!m) return null;
    if (!safeEqual(m[3], this.mac('nonce', `${m[1]}:${m[2]}`, 32))) return null;
    return Math.round(Number(m[1]) * 1000);
  }

  /**
   * Checks one Digest request, in this order: well-formed and ours (realm, MD5, qop=auth, nonce MAC,
   * opaque, uri = the request target); then the response hash against the stored HA1 (`password`, the
   * only outcome that counts as a failed login); then nonce age (`stale`, only for a correct response, as
   * RFC 7616 asks); then the nc counter (`replay`).
   * `lookup` returns the HA1 of an e-mail (null when unknown or without password).
   */
  async verify(params: DigestParams, request: { method: string; url: string }, lookup: (email: string) => Promise<string | null>): Promise<DigestOutcome> {
    const p = params;
    if (p.realm !== DIGEST_REALM || p.algorithm.toUpperCase() !== 'MD5' || p.qop !== 'auth') return { ok: false, reason: 'malformed' };
    if (!/^[0-9a-f]{8}$/i.test(p.nc) || !/^[0-9a-f]{32}$/i.test(p.response) || p.cnonce === '' || p.cnonce.length > 256)
      return { ok: false, reason: 'malformed' };
    const issued = this.nonceIssuedAt(p.nonce);
    if (issued === null) return { ok: false, reason: 'nonce' };
    if (!safeEqual(p.opaque, this.opaqueFor(p.nonce))) return { ok: false, reason: 'opaque' };
    if (!sameTarget(p.uri, request.url)) return { ok: false, reason: 'uri' };

    const stored = await lookup(p.username);
    const ha2 = md5(`${request.method}:${p.uri}`);
    const expected = md5(`${stored ?? this.dummyHa1}:${p.nonce}:${p.nc}:${p.cnonce}:${p.qop}:${ha2}`);
    const match = safeEqual(p.response.toLowerCase(), expected);
    if (!match || stored === null) return { ok: false, reason: 'password', email: p.username };

    const now = this.s.clock.now().getTime();
    if (now - issued > this.ttlMs || issued - now > 60_000) return { ok: false, reason: 'stale', email: p.username };

    const nc = parseInt(p.nc, 16);
    if (nc < 1) return { ok: false, reason: 'replay', email: p.username };
    const accepted = await this.s.store.accounts.digestNonces.accept(this.s.store.db, p.nonce, nc, issued + this.ttlMs);
    if (!accepted) return { ok: false, reason: 'replay', email: p.username };
    await this.prune(now);
    return { ok: true, email: p.username };
  }

  private async prune(now: number): Promise<void> {
    if (now < this.nextPrune) return;
    this.nextPrune = now + PRUNE_EVERY_MS;
    await this.s.store.accounts.digestNonces.prune(this.s.store.db, now);
  }
}

/** The `uri` directive names the request target: the same path and query (absolute form allowed). */
function sameTarget(uri: string, url: string): boolean {
  const target = uri.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/]*/i, '');
  return target === url;
}
