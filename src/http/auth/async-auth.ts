import { createHmac } from 'node:crypto';
import type { Caller, Services } from '../../core/context.js';
import { safeEqual } from '../../core/passwords.js';
import { findUser } from '../../resources/users/users.js';
import { setCookie } from './cookies.js';
import { serverSecret } from './digest.js';

/** The cookie `authenticate_asynchronous` sets and the websocket (notify/stream.ts) reads. */
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
 * however long it lives, and a client that reconnects later asks `authenticate_asynchronous` for a fresh
 * cookie (pycloudsigma's `Websocket` asks once and connects at once). A cookie whose user no longer exists
 * opens nothing.
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

  private signature(value: string, ts: string): string {
    return createHmac('sha1', this.key).update(ASYNC_AUTH_COOKIE).update(value).update(ts).digest('hex');
  }

  /** The cookie's value for a user, issued now. */
  value(userUuid: string): string {
    const value = Buffer.from(userUuid, 'utf8').toString('base64');
    const ts = String(Math.floor(this.s.clock.now().getTime() / 1000));
    return `${value}|${ts}|${this.signature(value, ts)}`;
  }

  /** The `Set-Cookie` value `authenticate_asynchronous` answers with. */
  setCookie(userUuid: string, secure: boolean): string {
    return setCookie(ASYNC_AUTH_COOKIE, this.value(userUuid), { maxAgeS: ASYNC_AUTH_MAX_AGE_S, now: this.s.clock.now(), httpOnly: true, secure });
  }

  /** The user uuid a genuine cookie of the last 120 s names, else null (malformed, forged, expired or from the future). */
  verify(cookie: string): string | null {
    const m = VALUE_RE.exec(cookie);
    if (!m) return null;
    const [, value, ts, sig] = m;
    if (!safeEqual(sig, this.signature(value, ts))) return null;
    const issuedMs = Number(ts) * 1000;
    const now = this.s.clock.now().getTime();
    if (now >= issuedMs + ASYNC_AUTH_MAX_AGE_S * 1000 || issuedMs > now + ASYNC_AUTH_MAX_AGE_S * 1000) return null;
    const uuid = Buffer.from(value, 'base64').toString('utf8');
    return UUID_RE.test(uuid) ? uuid : null;
  }

  /** The caller a cookie opens the websocket for, or null. */
  async caller(cookie: string): Promise<Caller | null> {
    const uuid = this.verify(cookie);
    const user = uuid ? await findUser(this.s, uuid) : undefined;
    return user ? { uuid: user.uuid, email: user.email, state: user.state } : null;
  }
}
