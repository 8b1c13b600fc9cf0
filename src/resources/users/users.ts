import type { Services } from '../../core/context.js';
import { isoTimestamp } from '../../core/clock.js';
import { ApiError, validation } from '../../core/errors.js';
import { hashPassword } from '../../core/passwords.js';
import { profileDefaults } from '../profile/profile.js';

export const USER_STATES = ['REGULAR', 'TRIAL', 'GUEST', 'NEW_USER'] as const;

export interface UserRow {
  uuid: string;
  email: string;
  password_hash: string | null;
  state: string;
  profile: string;
  created_at: string;
}

const EMAIL_RE = /^[^\s@]+@[^\s@]+$/;
export const normalizeEmail = (email: string) => email.trim().toLowerCase();

/** Listeners told when a user's password changes (the credential cache forgets that user). */
const passwordListeners: ((email: string) => void)[] = [];
export const onPasswordChange = (fn: (email: string) => void) => passwordListeners.push(fn);

export async function createUser(
  s: Services,
  input: { email: string; password?: string | null; state?: string },
): Promise<UserRow> {
  const email = normalizeEmail(input.email);
  if (!EMAIL_RE.test(email) || email.length > 254) throw validation('email', 'Enter a valid e-mail address');
  const state = input.state ?? 'REGULAR';
  if (!(USER_STATES as readonly string[]).includes(state)) throw validation('state', `State must be one of ${USER_STATES.join(', ')}`);
  const uuid = s.ids.uuid();
  const now = s.clock.now();
  const row: UserRow = {
    uuid,
    email,
    password_hash: input.password ? await hashPassword(input.password) : null,
    state,
    profile: JSON.stringify(profileDefaults(uuid, now, s.config.currency)),
    created_at: isoTimestamp(now),
  };
  const existing = await findUserByEmail(s, email);
  if (existing) throw new ApiError('conflict', `A user with e-mail ${email} already exists`, 'email');
  await s.store.db.insertInto('users').values(row).execute();
  return row;
}

export function findUserByEmail(s: Services, email: string): Promise<UserRow | undefined> {
  return s.store.db.selectFrom('users').selectAll().where('email', '=', normalizeEmail(email)).executeTakeFirst();
}

export function findUser(s: Services, uuid: string): Promise<UserRow | undefined> {
  return s.store.db.selectFrom('users').selectAll().where('uuid', '=', uuid).executeTakeFirst();
}

export async function setPassword(s: Services, email: string, password: string): Promise<void> {
  const user = await findUserByEmail(s, email);
  if (!user) throw new ApiError('notexist', `No user with e-mail ${email}`, 'email');
  await s.store.db.updateTable('users').set({ password_hash: await hashPassword(password) }).where('uuid', '=', user.uuid).execute();
  // A changed password retires the demo login printed at start-up.
  await s.store.db.deleteFrom('settings').where('key', '=', 'demo_login').where('value', 'like', `%"${user.email}"%`).execute();
  for (const fn of passwordListeners) fn(user.email);
}

export function listUsers(s: Services): Promise<UserRow[]> {
  return s.store.db.selectFrom('users').selectAll().orderBy('created_at').orderBy('email').execute();
}

/**
 * The demo account a newcomer logs in with. Created on first start; its password is kept so that every
 * start can print a working login (until an operator changes it).
 */
export async function ensureDemoLogin(s: Services, password: string): Promise<{ email: string; password: string } | null> {
  const saved = await s.store.db.selectFrom('settings').select('value').where('key', '=', 'demo_login').executeTakeFirst();
  if (saved) return JSON.parse(saved.value);
  const anyUser = await s.store.db.selectFrom('users').select('uuid').limit(1).executeTakeFirst();
  if (anyUser) return null;
  const login = { email: 'demo@stratus.local', password };
  await createUser(s, login);
  await s.store.db.insertInto('settings').values({ key: 'demo_login', value: JSON.stringify(login) }).execute();
  return login;
}
