import { createHmac } from 'node:crypto';
import type { Caller, Services } from '../../core/context.js';
import { safeEqual } from '../../core/passwords.js';
import { findUser } from '../../resources/users/users.js';
import { setCookie } from './cookies.js';
import { serverSecret } from './digest.js';

/** The cookie `authenticate_asynchronous` sets and the websocket (http/event-stream.ts) reads. */
export const ASYNC_AUTH_COOKIE = 'async_auth';
/** Its lifetime: "a cookie that is valid for 2 minutes" (reference §4.3: `Max-Age=120`). */
export const ASYNC_AUTH_MAX_AGE_S = 120;

const VALUE_RE = /^([A-Za-z0-9+/]+={0,2})\|(\d{1,12})\|([0-9a-f]{40})$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The `async_auth` cookie as the real service issues it (reference §4.3, the documented example
 * `YTlhZmMw…|1356012032|f785e3d8…`): a Tornado secure cookie, version 1 — `<base64 of the user's uuid>|<unix
 * time of issue>|<HMAC-SHA1 hex of name, value and time>`. It is stateless: any API process on the same
 * database verifies it, the key being derived from the shared server secret (`settings`, digest.ts).
 *
 * It is good for 120 s from the second of issue by the injected clock (refused from then on, and when it
 * claims a time more than that ahead), and only to open the websocket: a socket opened in time stays open
 * until its credentials end (http/event-stream.ts), and a client that reconnects later asks
 * `authenticate_asynchronous` for a fresh cookie (pycloudsigma's `Websocket` asks once and connects at
 * once). The signing key is the deployment's key mixed with the user's password hash, so a new password
 * voids every cookie issued before it, in every process, with nothing stored; a cookie whose user no
 * longer exists opens nothing.
 */
export class AsyncAuthCookie {
  private constructor(
    private readonly s: Services,
    private readonly key: Buffer,
  ) {}

  static async create(s: Services): Promise<AsyncAuthCookie> {
    const key = createHmac('sha256', await serverSecret(s))
      .update('async_auth cookie')
      .digest();
    return new AsyncAuthCookie(s, key);
  }

  private signature(passwordHash: string | null, value: string, ts: string): string {
    return createHmac('sha1', this.key)
      .update(passwordHash ?? '')
      .update('\0')
      .update(ASYNC_AUTH_COOKIE)
      .update(value)
      .update(ts)
      .digest('hex');
  }

  /** The cookie's value for a user, issued now. */
  async value(userUuid: string): Promise<string> {
    const user = await findUser(this.s, userUuid);
    const value = Buffer.from(userUuid, 'utf8').toString('base64');
    const ts = String(Math.floor(this.s.clock.now().getTime() / 1000));
    return `${value}|${ts}|${this.signature(user?.password_hash ?? null, value, ts)}`;
  }

  /** The `Set-Cookie` value `authenticate_asynchronous` answers with. */
  async setCookie(userUuid: string, secure: boolean): Promise<string> {
    return setCookie(ASYNC_AUTH_COOKIE, await this.value(userUuid), {
      maxAgeS: ASYNC_AUTH_MAX_AGE_S,
      now: this.s.clock.now(),
      httpOnly: true,
      secure,
    });
  }

  /**
   * What a genuine cookie of the last 120 s opens, else null (malformed, forged, expired, from the future,
   * signed before its user's password changed, or of a user that is gone): the caller, the credential id a
   * logout or a new password ends it by (its signature), and when it was issued.
   */
  async open(cookie: string, opts: { expired?: 'accept' } = {}): Promise<StreamCredential | null> {
    const m = VALUE_RE.exec(cookie);
    if (!m) return null;
    const [, value, ts, sig] = m;
    const issuedMs = Number(ts) * 1000;
    const now = this.s.clock.now().getTime();
    // A logout names the cookie a socket was opened with, however long ago (`expired: 'accept'`).
    const tooOld = now >= issuedMs + ASYNC_AUTH_MAX_AGE_S * 1000 && opts.expired !== 'accept';
    if (tooOld || issuedMs > now + ASYNC_AUTH_MAX_AGE_S * 1000) return null;
    const uuid = Buffer.from(value, 'base64').toString('utf8');
    if (!UUID_RE.test(uuid)) return null;
    const user = await findUser(this.s, uuid);
    if (!user || !safeEqual(sig, this.signature(user.password_hash, value, ts))) return null;
    return { caller: { uuid: user.uuid, email: user.email, state: user.state }, credential: sig, issuedMs };
  }
}

/** What an `async_auth` cookie opens (AsyncAuthCookie.open). */
export interface StreamCredential {
  caller: Caller;
  /** The cookie's signature: a logout that carries the cookie ends the sockets opened with it by this. */
  credential: string;
  issuedMs: number;
}
