import type { FastifyRequest } from 'fastify';
import type { Caller, Services } from '../../core/context.js';
import { ApiError, permission } from '../../core/errors.js';
import { safeEqual } from '../../core/passwords.js';
import { checkLogin, loginFailed, loginKeys, loginSucceeded, type LoginKeys } from '../../resources/accounts/login-guard.js';
import { CSRF_COOKIE_MAX_AGE_S, findSession, type Session } from '../../resources/accounts/sessions.js';
import { findUserByEmail, type UserRow } from '../../resources/users/users.js';
import type { RequestInfo } from '../routes.js';
import { AsyncAuthCookie } from './async-auth.js';
import { BASIC_CHALLENGE, CredentialCache, parseBasic } from './basic.js';
import { readCookie, setCookie } from './cookies.js';
import { DigestAuth, parseDigest } from './digest.js';
import { sentTarget } from '../locations.js';

/** Methods that change nothing; anything else in a cookie session needs the CSRF token (Django's rule). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);
const BASIC_SCHEME = /^Basic(\s|$)/i;

export const SESSION_COOKIE = 'sessionid';
export const CSRF_COOKIE = 'csrftoken';

export const requestInfo = (req: FastifyRequest): RequestInfo => ({
  method: req.method,
  url: sentTarget(req.raw) ?? req.url,
  ip: req.ip,
  headers: req.headers,
});

/**
 * Every authentication scheme behind one Authenticator: an `Authorization` header is Basic or Digest
 * (and decides alone: a bad header is 401 even with a session cookie); without one, the `sessionid`
 * cookie of a browser session. A 401 offers both Basic and Digest challenges (two `WWW-Authenticate`
 * headers). Password checks of Basic, Digest and cookie login go through login protection
 * (resources/accounts/login-guard.ts): a locked account or address answers 429 with `Retry-After`.
 */
export class Auth {
  readonly cache: CredentialCache;

  private constructor(
    private readonly s: Services,
    readonly digest: DigestAuth,
    /** The websocket's credential (`authenticate_asynchronous`, http/event-stream.ts). */
    readonly asyncAuth: AsyncAuthCookie,
  ) {
    this.cache = new CredentialCache(s);
  }

  static async create(s: Services): Promise<Auth> {
    return new Auth(s, await DigestAuth.create(s), await AsyncAuthCookie.create(s));
  }

  /** The Authenticator the routes call. */
  readonly authenticate = (req: FastifyRequest): Promise<Caller> => this.authenticateRequest(requestInfo(req));

  /** 401 offering both schemes; `stale` tells a Digest client its nonce merely expired. */
  unauthorized(message: string, stale = false): ApiError {
    return new ApiError('auth', message, null, { 'WWW-Authenticate': [BASIC_CHALLENGE, this.digest.challenge(stale)] });
  }

  /**
   * The caller of a Basic header whose credentials this process verified from this address within the last
   * moments (CredentialCache.fresh: no database, no scrypt, no login protection to consult), else null and
   * authenticateRequest decides. What a hit answers is what authenticateRequest would: it starts the same way.
   */
  freshCaller(req: Pick<RequestInfo, 'headers' | 'ip'>): Caller | null {
    const header = req.headers.authorization;
    if (header === undefined || !BASIC_SCHEME.test(header)) return null;
    const creds = parseBasic(header);
    return creds && this.cache.fresh(creds.email, creds.password, req.ip);
  }

  async authenticateRequest(req: RequestInfo): Promise<Caller> {
    const header = req.headers.authorization;
    if (header !== undefined) {
      if (BASIC_SCHEME.test(header)) {
        const creds = parseBasic(header);
        if (!creds) throw this.unauthorized('Malformed Basic authorization');
        const caller = await this.passwordLogin(creds.email, creds.password, req.ip);
        if (!caller) throw this.unauthorized('Invalid e-mail or password');
        return caller;
      }
      if (/^Digest(\s|$)/i.test(header)) return this.digestLogin(header, req);
      throw this.unauthorized('Unsupported Authorization scheme; use Basic or Digest');
    }
    const session = await this.session(req);
    if (session) {
      if (!SAFE_METHODS.has(req.method) && !this.csrfOk(req, session))
        throw permission(`${req.method} in a cookie session needs the X-CSRFToken header (the csrftoken cookie's value)`, 'X-CSRFToken');
      return session.caller;
    }
    throw this.unauthorized(
      readCookie(req.headers.cookie, SESSION_COOKIE) ? 'The session has expired or was logged out' : 'Authentication credentials were not provided',
    );
  }

  /**
   * E-mail and password (Basic, `do=login`) under login protection: a locked account/address throws 429
   * before the password is checked; a wrong password counts as a failure. Null when wrong.
   */
  async passwordLogin(email: string, password: string, ip: string): Promise<Caller | null> {
    const cached = this.cache.fresh(email, password, ip);
    if (cached) return cached;
    const keys = loginKeys(email, ip);
    await checkLogin(this.s, keys);
    const caller = await this.cache.verify(email, password, ip);
    if (!caller) {
      await this.failed(keys, email);
      return null;
    }
    await loginSucceeded(this.s, keys);
    return caller;
  }

  /** Counts a failed login (throws 429 when a lock is in force); a new lock on the account drops its cached credentials. */
  private failed(keys: LoginKeys, email: string): Promise<void> {
    return loginFailed(this.s, keys, () => this.cache.forget(email));
  }

  private async digestLogin(header: string, req: RequestInfo): Promise<Caller> {
    const params = parseDigest(header);
    if (!params) throw this.unauthorized('Malformed Digest authorization');
    const keys = loginKeys(params.username, req.ip);
    await checkLogin(this.s, keys);
    const found: { user?: UserRow } = {};
    const outcome = await this.digest.verify(params, req, async (email) => {
      found.user = await findUserByEmail(this.s, email);
      return found.user?.digest_ha1 ?? null;
    });
    const user = found.user;
    if (outcome.ok && user) {
      await loginSucceeded(this.s, keys);
      return { uuid: user.uuid, email: user.email, state: user.state };
    }
    switch (outcome.ok ? 'password' : outcome.reason) {
      case 'password':
        await this.failed(keys, params.username);
        throw this.unauthorized('Invalid e-mail or password');
      case 'stale':
        throw this.unauthorized('The Digest nonce has expired; retry with the new one', true);
      case 'replay':
        throw this.unauthorized('The Digest nonce count was already used (replayed request)');
      case 'nonce':
        throw this.unauthorized('The Digest nonce was not issued by this service');
      case 'opaque':
        throw this.unauthorized('The Digest opaque value does not belong to the nonce');
      case 'uri':
        throw this.unauthorized('The Digest uri does not match the request');
      default:
        throw this.unauthorized('Unsupported Digest parameters (realm "users", algorithm MD5, qop auth, nc and cnonce required)');
    }
  }

  /** The live session the request's cookie names, if any. */
  async session(req: RequestInfo): Promise<Session | null> {
    const id = readCookie(req.headers.cookie, SESSION_COOKIE);
    return id ? findSession(this.s, id) : null;
  }

  csrfOk(req: RequestInfo, session: Session): boolean {
    const sent = req.headers['x-csrftoken'];
    return typeof sent === 'string' && safeEqual(sent, session.csrfToken);
  }

  /** `Set-Cookie` values that start a browser session (reference 4.3). */
  loginCookies(started: { id: string; csrfToken: string; maxAgeS: number }): string[] {
    const now = this.s.clock.now();
    const secure = this.secureCookies;
    return [
      setCookie(CSRF_COOKIE, started.csrfToken, { maxAgeS: CSRF_COOKIE_MAX_AGE_S, now, secure }),
      setCookie(SESSION_COOKIE, started.id, { maxAgeS: started.maxAgeS, now, httpOnly: true, secure }),
    ];
  }

  /** The `Set-Cookie` value of `authenticate_asynchronous`: the websocket's 120-second credential. */
  asyncAuthCookie(userUuid: string): Promise<string> {
    return this.asyncAuth.setCookie(userUuid, this.secureCookies);
  }

  /** `Set-Cookie` values that remove both cookies (logout). */
  logoutCookies(): string[] {
    const now = this.s.clock.now();
    return [setCookie(CSRF_COOKIE, '', { maxAgeS: 0, now }), setCookie(SESSION_COOKIE, '', { maxAgeS: 0, now, httpOnly: true })];
  }

  /** Cookies carry `Secure` when the service is published over https. */
  private get secureCookies(): boolean {
    return this.s.config.publicUrl?.startsWith('https:') ?? false;
  }
}
