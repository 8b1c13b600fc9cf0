import { openAccount } from '../../billing/accounts.js';
import type { UserRow } from '../../store/accounts/index.js';
import type { Services } from '../../core/context.js';
import { isoTimestamp } from '../../core/clock.js';
import { ApiError, validation } from '../../core/errors.js';
import { checkAhead, digestHa1, hashPassword, KEPT_IN_CLEAR, verifyPassword } from '../../core/passwords.js';
import { profileDefaults } from '../profile/profile.js';
import { endUserSessions } from '../accounts/sessions.js';

export const USER_STATES = ['REGULAR', 'TRIAL', 'GUEST', 'NEW_USER'] as const;

export type { UserRow };

const EMAIL_RE = /^[^\s@]+@[^\s@]+$/;
export const normalizeEmail = (email: string) => email.trim().toLowerCase();
/** Whether a string is an acceptable account e-mail (after normalizing). */
export const isValidEmail = (email: string) => EMAIL_RE.test(normalizeEmail(email)) && normalizeEmail(email).length <= 254;

/** The setting that keeps the demo login printed at every start. */
const DEMO_LOGIN = 'demo_login';

const isUserState = (state: string) => (USER_STATES as readonly string[]).includes(state);

/** Listeners told when a user's password changes (the credential cache forgets that user). */
const passwordListeners: ((email: string) => void)[] = [];
export const onPasswordChange = (fn: (email: string) => void) => passwordListeners.push(fn);

/** `keptInClear`: the password is also stored in clear (the demo login), so it is hashed cheaply (KEPT_IN_CLEAR). */
export async function createUser(s: Services, input: { email: string; password?: string | null; state?: string; keptInClear?: boolean }): Promise<UserRow> {
  const email = normalizeEmail(input.email);
  if (!isValidEmail(email)) throw validation('email', 'Enter a valid e-mail address');
  const state = input.state ?? 'REGULAR';
  if (!isUserState(state)) throw validation('state', `State must be one of ${USER_STATES.join(', ')}`);
  const uuid = s.ids.uuid();
  const now = s.clock.now();
  const row: UserRow = {
    uuid,
    email,
    password_hash: input.password ? await hashPassword(input.password, input.keptInClear ? KEPT_IN_CLEAR : undefined) : null,
    digest_ha1: input.password ? digestHa1(email, input.password) : null,
    state,
    profile: JSON.stringify(profileDefaults(uuid, now, s.config.currency)),
    created_at: isoTimestamp(now),
  };
  const existing = await findUserByEmail(s, email);
  if (existing) throw new ApiError('conflict', `A user with e-mail ${email} already exists`, 'email');
  // The account's money starts with it (the opening balance), in one transaction.
  await s.store.transaction(async (tx) => {
    await s.store.accounts.users.insert(tx, row);
    await openAccount(tx, s, uuid);
  });
  return row;
}

export function findUserByEmail(s: Services, email: string): Promise<UserRow | undefined> {
  return s.store.accounts.users.byEmail(s.store.db, normalizeEmail(email));
}

export function findUser(s: Services, uuid: string): Promise<UserRow | undefined> {
  return s.store.accounts.users.byUuid(s.store.db, uuid);
}

/**
 * Set a user's password: the scrypt hash and the Digest HA1 change together. `state`, when given, is set in
 * the same statement (finishing sign-up moves NEW_USER to REGULAR).
 */
export async function setPassword(s: Services, email: string, password: string, state?: string, opts: { keptInClear?: boolean } = {}): Promise<void> {
  const user = await findUserByEmail(s, email);
  if (!user) throw new ApiError('notexist', `No user with e-mail ${email}`, 'email');
  if (state !== undefined && !isUserState(state)) throw validation('state', `State must be one of ${USER_STATES.join(', ')}`);
  const values = {
    password_hash: await hashPassword(password, opts.keptInClear ? KEPT_IN_CLEAR : undefined),
    digest_ha1: digestHa1(user.email, password),
    ...(state ? { state } : {}),
  };
  await s.store.transaction(async (tx) => {
    await s.store.accounts.users.update(tx, user.uuid, values);
    // A new password ends the account's sessions (browser and event stream), in every process.
    await endUserSessions(tx, s, user.uuid);
    // A changed password retires the demo login printed at start-up.
    await s.store.settings.deleteIfContains(tx, DEMO_LOGIN, `"${user.email}"`);
  });
  for (const fn of passwordListeners) fn(user.email);
}

/** Change a user's account state (REGULAR, TRIAL, GUEST, NEW_USER). */
export async function setState(s: Services, email: string, state: string): Promise<UserRow> {
  if (!isUserState(state)) throw validation('state', `State must be one of ${USER_STATES.join(', ')}`);
  const user = await findUserByEmail(s, email);
  if (!user) throw new ApiError('notexist', `No user with e-mail ${email}`, 'email');
  await s.store.accounts.users.update(s.store.db, user.uuid, { state });
  for (const fn of passwordListeners) fn(user.email); // cached callers carry the old state
  return { ...user, state };
}

export function listUsers(s: Services): Promise<UserRow[]> {
  return s.store.accounts.users.list(s.store.db);
}

/**
 * The demo account a newcomer logs in with. Created on first start; its password is kept so that every
 * start can print a working login (until an operator changes it). A configured login (`--demo-login`,
 * what a pipeline knows in advance) is made true at every start: the account is created, or its password
 * set when it differs, whatever other users the database has.
 */
export async function ensureDemoLogin(
  s: Services,
  generated: string,
  configured?: { email: string; password: string } | null,
): Promise<{ email: string; password: string } | null> {
  if (configured) return ensureConfiguredLogin(s, configured);
  const saved = await s.store.settings.get(s.store.db, DEMO_LOGIN);
  if (saved !== undefined) {
    const login = JSON.parse(saved) as { email: string; password: string };
    // Databases from before Digest support: give the demo user its HA1 (its password is known here).
    await s.store.accounts.users.fillMissingHa1(s.store.db, normalizeEmail(login.email), digestHa1(normalizeEmail(login.email), login.password));
    // Its scrypt runs now, while src/serve.ts builds the app, not on the first request (the printed curl line).
    await checkAhead(login.password, (await findUserByEmail(s, login.email))?.password_hash ?? null);
    return login;
  }
  if (await s.store.accounts.users.any(s.store.db)) return null;
  const login = { email: 'demo@stratus.local', password: generated };
  await createUser(s, { ...login, keptInClear: true });
  await saveDemoLogin(s, login);
  return login;
}

/** The demo login kept in settings (printed at every start), or null. */
export async function savedDemoLogin(s: Services): Promise<{ email: string; password: string } | null> {
  const saved = await s.store.settings.get(s.store.db, DEMO_LOGIN);
  return saved !== undefined ? (JSON.parse(saved) as { email: string; password: string }) : null;
}

async function ensureConfiguredLogin(s: Services, login: { email: string; password: string }): Promise<{ email: string; password: string }> {
  const user = await findUserByEmail(s, login.email);
  if (!user) await createUser(s, { ...login, keptInClear: true });
  else if (!(await verifyPassword(login.password, user.password_hash)) || user.digest_ha1 === null)
    await setPassword(s, login.email, login.password, undefined, { keptInClear: true });
  else await checkAhead(login.password, user.password_hash);
  await saveDemoLogin(s, login);
  return login;
}

async function saveDemoLogin(s: Services, login: { email: string; password: string }): Promise<void> {
  const value = JSON.stringify({ email: normalizeEmail(login.email), password: login.password });
  await s.store.settings.put(s.store.db, DEMO_LOGIN, value);
}
