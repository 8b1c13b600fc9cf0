import { randomBytes } from 'node:crypto';
import { isoTimestamp } from '../../core/clock.js';
import type { Services } from '../../core/context.js';
import { ApiError, validation } from '../../core/errors.js';
import { isPlainObject } from '../../core/input.js';
import { sha256Hex } from '../../core/passwords.js';
import { enqueue, mailDomain, type EmailContent } from '../notifications/deliveries.js';
import type { Mailer } from '../notifications/mail.js';
import { fromDatabaseError } from '../../store/errors.js';
import type { Tx } from '../../store/db.js';
import { record } from '../../core/events.js';
import { createUser, findUser, findUserByEmail, isValidEmail, normalizeEmail, setPassword, type UserRow } from '../users/users.js';

/**
 * Sign-up by e-mail (`POST /accounts/action/?do=create`, reference 4.4) and its confirmation link.
 *
 * A new account starts in state NEW_USER without a password; a one-time link (a 256-bit random token,
 * stored only as its SHA-256, valid 24 h by the injected clock) lets the owner of the address set one,
 * which moves the account to REGULAR. Sign-up never tells whether an address already has an account:
 * the answer is always 200 `{success: true, uuid}` (a random uuid for an existing address), and the
 * address gets either a fresh link (the account is still waiting for its password) or a notice that
 * someone tried to sign up with it. Either message is a delivery row (resources/notifications/deliveries.ts)
 * committed with the sign-up's writes and sent by the notification worker, as every e-mail is: a slow or
 * failing mail server neither delays the answer nor loses the message (it is retried).
 */
export const SIGNUP_TOKEN_TTL_MS = 24 * 3600_000;
export const MIN_PASSWORD_LENGTH = 8;
export const MAX_PASSWORD_LENGTH = 1024;
export const CONFIRM_PATH = '/accounts/confirm/';

const TOKEN_RE = /^[A-Za-z0-9_-]{43}$/;

export interface SignupDeps {
  /** How mail leaves (`outbox`: no SMTP server, so the link is also logged for a local user). */
  mailer: Pick<Mailer, 'kind'>;
  /** Base URL of links in e-mails, without a trailing slash. */
  publicUrl: () => string;
  log: { info(obj: object, msg: string): void; error(obj: object, msg: string): void };
}

export async function signUp(s: Services, deps: SignupDeps, body: unknown): Promise<{ success: true; uuid: string }> {
  const input = body === undefined || body === null ? {} : body;
  if (!isPlainObject(input)) throw validation(null, 'Request body must be an object {email, promo}');
  const { email, promo } = input;
  if (email === undefined || email === null) throw validation('email', 'This field is required');
  if (typeof email !== 'string' || !isValidEmail(email)) throw validation('email', 'Enter a valid e-mail address');
  if (promo !== undefined && promo !== null && promo !== '') {
    const wanted = typeof promo === 'string' ? promo.trim().toLowerCase() : null;
    if (wanted === null || !s.config.promoCodes.some((c) => c.toLowerCase() === wanted)) throw validation('promo', 'Unknown promo code');
  }

  const address = normalizeEmail(email);
  let user = await findUserByEmail(s, address);
  let created = false;
  if (!user) {
    try {
      user = await createUser(s, { email: address, state: 'NEW_USER' });
      created = true;
    } catch (e) {
      // A concurrent sign-up for the same address won the insert: answer as for an existing account.
      const err = e instanceof ApiError ? e : fromDatabaseError(e);
      if (err?.type !== 'conflict') throw e;
      user = await findUserByEmail(s, address);
      if (!user) throw e;
    }
  }

  if (created || (user.state === 'NEW_USER' && !user.password_hash)) {
    const account = user;
    await issueToken(s, user.uuid, async (tx, token) => {
      // The welcome notification (new_account) commits with the account's first link, and so does its e-mail.
      if (created)
        await record(tx, s, {
          category: 'Accounts',
          action: 'new_account',
          uuid: account.uuid,
          owner: account.uuid,
          actor: null,
          details: `The Stratus account ${account.email} was created.`,
        });
      const link = `${deps.publicUrl()}${CONFIRM_PATH}${token}`;
      await mail(tx, s, account, 'signup_confirm', confirmationMail(account.email, link));
      if (deps.mailer.kind === 'outbox') deps.log.info({ to: account.email, link }, 'no SMTP server configured: the sign-up e-mail goes to the outbox folder');
    });
  } else {
    const account = user;
    await s.store.transaction((tx) => mail(tx, s, account, 'signup_attempt', attemptNotice(account.email)));
  }
  return { success: true, uuid: created ? user.uuid : s.ids.uuid() };
}

/**
 * A new link for a user; earlier links of that user stop working. `also` runs in the same transaction
 * (the event the link belongs to).
 */
export async function issueToken(s: Services, userUuid: string, also?: (tx: Tx, token: string) => Promise<void>): Promise<string> {
  const now = s.clock.now();
  const token = randomBytes(32).toString('base64url');
  await s.store.transaction(async (tx) => {
    await s.store.accounts.signupTokens.replace(
      tx,
      { token_hash: sha256Hex(token), user_uuid: userUuid, created_at: isoTimestamp(now), expires_ms: now.getTime() + SIGNUP_TOKEN_TTL_MS },
      now.getTime(),
    );
    await also?.(tx, token);
  });
  return token;
}

/** A sign-up e-mail to the account's own address, queued in `tx` for the notification worker. */
async function mail(tx: Tx, s: Services, account: UserRow, type: 'signup_confirm' | 'signup_attempt', content: EmailContent): Promise<void> {
  const messageId = `<${s.ids.uuid()}.${account.uuid}@${mailDomain(s.config.mailFrom)}>`;
  await enqueue(tx, s, { owner: account.uuid, channel: 'email', target: account.uuid, address: account.email, type, messageId, content });
}

function confirmationMail(to: string, link: string): EmailContent {
  return {
    subject: 'Confirm your Stratus account',
    text:
      `Hello,\n\nan account was requested for ${to}. To finish signing up, choose a password here ` +
      `(the link works once, for 24 hours):\n\n${link}\n\n` +
      `If you did not sign up, ignore this e-mail: without a password the account cannot be used.\n`,
  };
}

function attemptNotice(to: string): EmailContent {
  return {
    subject: 'Sign-up attempt for your Stratus account',
    text:
      `Hello,\n\nsomeone just tried to sign up with ${to}, which already has an account. Nothing was changed.\n` +
      `If it was you, log in with your password. If it was not, you can ignore this e-mail.\n`,
  };
}

/** The account a confirmation token is for, while the token is valid; null otherwise. */
export async function pendingSignup(s: Services, token: string): Promise<UserRow | null> {
  if (!TOKEN_RE.test(token)) return null;
  const owner = await s.store.accounts.signupTokens.userOf(s.store.db, sha256Hex(token), s.clock.now().getTime());
  return owner ? ((await findUser(s, owner)) ?? null) : null;
}

/** Checks a new password (shared by the page and its tests). */
export function checkNewPassword(password: unknown, repeat: unknown): string {
  if (typeof password !== 'string' || password.length < MIN_PASSWORD_LENGTH)
    throw validation('password', `The password must have at least ${MIN_PASSWORD_LENGTH} characters`);
  if (password.length > MAX_PASSWORD_LENGTH) throw validation('password', `The password must have at most ${MAX_PASSWORD_LENGTH} characters`);
  if (repeat !== undefined && repeat !== password) throw validation('password2', 'The two passwords differ');
  return password;
}

/**
 * Sets the password through a confirmation token: the token is consumed first (one atomic delete, so
 * two submissions cannot both use it), then the password (scrypt hash and Digest HA1) is set and a
 * NEW_USER account becomes REGULAR. Throws `notexist` for an unknown, used or expired token.
 */
export async function confirmSignup(s: Services, token: string, password: unknown, repeat?: unknown): Promise<UserRow> {
  const chosen = checkNewPassword(password, repeat);
  if (!TOKEN_RE.test(token)) throw new ApiError('notexist', 'This link is not valid');
  const used = await s.store.accounts.signupTokens.consume(s.store.db, sha256Hex(token), s.clock.now().getTime());
  const user = used ? await findUser(s, used) : undefined;
  if (!user) throw new ApiError('notexist', 'This link is not valid, was already used or has expired');
  await setPassword(s, user.email, chosen, user.state === 'NEW_USER' ? 'REGULAR' : undefined);
  await s.store.accounts.signupTokens.deleteOfUser(s.store.db, user.uuid);
  return (await findUser(s, user.uuid)) ?? user;
}

/**
 * `POST /accounts/action/?do=reset_password {email}` (public): the same answer whether or not the address
 * has an account (`{success: true}`), so it reveals nothing. For an account, a one-time link (the sign-up
 * confirmation machinery: the same token table, page and 24 h validity) goes out as the `reset_password`
 * notification, recorded in the link's transaction: the notification worker e-mails it to the account's
 * own address (never to other contacts, the feed or webhooks).
 */
export async function requestPasswordReset(s: Services, deps: Pick<SignupDeps, 'publicUrl'>, body: unknown): Promise<{ success: true }> {
  const input = body === undefined || body === null ? {} : body;
  if (!isPlainObject(input)) throw validation(null, 'Request body must be an object {email}');
  const { email } = input;
  if (email === undefined || email === null) throw validation('email', 'This field is required');
  if (typeof email !== 'string' || !isValidEmail(email)) throw validation('email', 'Enter a valid e-mail address');
  const user = await findUserByEmail(s, normalizeEmail(email));
  if (user)
    await issueToken(s, user.uuid, async (tx, token) => {
      const link = `${deps.publicUrl()}${CONFIRM_PATH}${token}`;
      await record(tx, s, {
        category: 'Accounts',
        action: 'reset_password',
        uuid: user.uuid,
        owner: user.uuid,
        actor: null,
        // The audit log (/logs/) keeps that a reset was asked for; only the notification carries the link.
        details: 'A new password was requested',
        notice: `A new password was requested for the Stratus account ${user.email}. Choose it here (the link works once, for 24 hours):\n\n${link}\n\nIf you did not ask for this, ignore this e-mail: your password stays as it is.`,
      });
    });
  return { success: true };
}
