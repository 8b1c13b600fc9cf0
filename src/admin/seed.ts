import { setBalance } from '../billing/payments.js';
import type { Ctx, Services } from '../core/context.js';
import { ApiError, validation } from '../core/errors.js';
import type { CollectionDecl, ResourceDecl } from '../core/resource.js';
import { verifyPassword } from '../core/passwords.js';
import { setAccountLimits } from '../resources/accounts/rate-limits.js';
import { checkLimits } from './limits.js';
import { assignIps } from '../resources/ips/ips.js';
import { createUser, findUserByEmail, setPassword, setState, USER_STATES, type UserRow } from '../resources/users/users.js';
import { assignVlans } from '../resources/vlans/vlans.js';

/**
 * Seeding from a JSON document (`POST /_stratus/admin/seed`, `stratus seed FILE`, `serve --seed FILE`):
 *
 *   {"users": [{"email": "ci@example.com", "password": "s3cret", "state": "REGULAR", "rate_limits": "off",
 *               "ips": 2, "vlans": 1,
 *               "drives":  [{"name": "boot", "size": 10737418240, "media": "disk"}],
 *               "servers": [{"name": "web", "cpu": 2000, "mem": 2147483648, "vnc_password": "secret",
 *                            "drives": [{"drive": "boot", "dev_channel": "0:0", "device": "virtio", "boot_order": 1}]}],
 *               "tags":    [{"name": "prod", "resources": ["web", "boot"]}]}]}
 *
 * Drives, servers and tags are API bodies as the API takes them, created through the kinds' own services
 * (the same validation and defaults); a server's `drives[].drive` and a tag's `resources` may name the
 * account's drives and servers instead of giving uuids. `ips` and `vlans` are how many the account holds
 * (from the `--ip-pool`, new VLANs). Idempotent: a user that exists keeps its uuid (its password and state
 * are set only when they differ), an object whose name the account already has of that kind is left
 * alone, and counts are topped up, so seeding twice changes nothing. `balance` is what the account's
 * balance becomes: a ledger entry makes up the difference (none when it is already so). The whole document is checked before anything is written; a kind's
 * own validation (a bad drive size) stops the seeding where it is, and a rerun after the fix completes it.
 */
export interface SeedReport {
  created: Record<string, number>;
  existing: Record<string, number>;
}

const USER_KEYS = ['email', 'password', 'state', 'rate_limits', 'balance', 'ips', 'vlans', 'drives', 'servers', 'tags', 'locations'];
const KINDS = ['drives', 'servers', 'tags'] as const;
type Obj = Record<string, unknown>;

interface SeedUser {
  email: string;
  password?: string;
  state?: string;
  rate_limits?: string;
  /** The account's balance after seeding (a ledger entry makes up the difference). */
  balance?: string;
  ips: number;
  vlans: number;
  drives: Obj[];
  servers: Obj[];
  tags: Obj[];
  /** The locations the user is made in (a deployment of several, `--locations`); absent: every one the seed is applied to. */
  locations?: string[];
}

const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The document checked as a whole (nothing written yet); errors point at the entry, e.g. `users[1].drives[0].name`. */
export function parseSeed(doc: unknown): SeedUser[] {
  if (!isObj(doc)) throw validation('seed', 'a seed is a JSON object with "users": [...]');
  for (const k of Object.keys(doc)) if (k !== 'users') throw validation(k, `unknown key "${k}" in the seed (it takes "users")`);
  if (!Array.isArray(doc.users)) throw validation('users', '"users" must be a list');
  const emails = new Set<string>();
  return doc.users.map((u: unknown, i: number) => {
    const at = `users[${i}]`;
    if (!isObj(u)) throw validation(at, 'each user is an object with at least "email"');
    for (const k of Object.keys(u)) if (!USER_KEYS.includes(k)) throw validation(`${at}.${k}`, `unknown key "${k}"; a user takes ${USER_KEYS.join(', ')}`);
    const balance = u.balance === undefined || u.balance === null ? undefined : typeof u.balance === 'number' ? String(u.balance) : u.balance;
    if (balance !== undefined && (typeof balance !== 'string' || !/^\d{1,15}(\.\d{1,20})?$/.test(balance)))
      throw validation(`${at}.balance`, 'balance is a non-negative decimal, e.g. "250.00"');
    const str = (k: string, required = false) => {
      const v = u[k];
      if (v === undefined || v === null) {
        if (required) throw validation(`${at}.${k}`, `${k} is required`);
        return undefined;
      }
      if (typeof v !== 'string' || v === '') throw validation(`${at}.${k}`, `${k} must be a non-empty string`);
      return v;
    };
    const email = str('email', true)!.trim().toLowerCase();
    if (emails.has(email)) throw validation(`${at}.email`, `${email} is in the seed twice`);
    emails.add(email);
    const state = str('state')?.toUpperCase();
    if (state && !(USER_STATES as readonly string[]).includes(state)) throw validation(`${at}.state`, `state must be one of ${USER_STATES.join(', ')}`);
    const count = (k: string) => {
      const v = u[k] ?? 0;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 1000)
        throw validation(`${at}.${k}`, `${k} must be how many the account holds, 0 to 1000`);
      return v;
    };
    const list = (k: string) => {
      const v = u[k] ?? [];
      if (!Array.isArray(v)) throw validation(`${at}.${k}`, `${k} must be a list of API bodies`);
      const names = new Set<string>();
      v.forEach((o: unknown, j: number) => {
        if (!isObj(o) || typeof o.name !== 'string' || !o.name)
          throw validation(`${at}.${k}[${j}].name`, `each of ${k} needs a name (seeding finds it again by name)`);
        if (names.has(o.name)) throw validation(`${at}.${k}[${j}].name`, `${k} named "${o.name}" is in the seed twice for ${email}`);
        names.add(o.name);
      });
      return v as Obj[];
    };
    return {
      email,
      password: str('password'),
      state,
      rate_limits: u.rate_limits === undefined ? undefined : checkLimits(u.rate_limits, `${at}.rate_limits`),
      balance: balance as string | undefined,
      ips: count('ips'),
      vlans: count('vlans'),
      drives: list('drives'),
      servers: list('servers'),
      tags: list('tags'),
      ...(u.locations === undefined ? {} : { locations: codes(u.locations, `${at}.locations`) }),
    };
  });
}

/** A user's `locations`: location codes like `zrh`. */
function codes(v: unknown, at: string): string[] {
  if (!Array.isArray(v) || v.some((c) => typeof c !== 'string' || !/^[a-z][a-z0-9]{1,15}$/i.test(c)))
    throw validation(at, 'locations must be a list of location codes, e.g. ["zrh", "sjc"]');
  return v.map((c: string) => c.toLowerCase());
}

/**
 * Apply a seed document. `kinds` are the deployment's kinds (the registry, injected by the composition root:
 * the admin plane sits below it); `runDue` lets simulated work finish between steps (new drives before servers use them).
 */
export async function seed(
  s: Services,
  kinds: readonly ResourceDecl[],
  doc: unknown,
  runDue: () => Promise<unknown> = async () => 0,
  /** After each user: users done, of how many, the user (the command line's progress line). */
  progress?: (done: number, total: number, item: string) => void,
): Promise<SeedReport> {
  const users = parseSeed(doc);
  const report: SeedReport = { created: {}, existing: {} };
  const tally = (created: boolean, what: string, n = 1) => {
    const side = created ? report.created : report.existing;
    side[what] = (side[what] ?? 0) + n;
  };
  for (const [i, u] of users.entries()) {
    // A user of other locations only (several locations are served, each seeded with the same file).
    if (u.locations && !u.locations.includes(s.config.location)) continue;
    const user = await seedUser(s, u, tally);
    if (u.rate_limits !== undefined) await setAccountLimits(s, u.email, u.rate_limits);
    const ctx: Ctx = { ...s, caller: { uuid: user.uuid, email: user.email, state: user.state } };
    if (u.balance !== undefined) tally(await setBalance(s, user.uuid, u.balance), 'balance');
    await topUp(s, user.uuid, 'ips', u.ips, tally, (n) => s.store.transaction((tx) => assignIps(tx, s, user.uuid, n)));
    await topUp(s, user.uuid, 'vlans', u.vlans, tally, (n) => s.store.transaction((tx) => assignVlans(tx, s, user.uuid, n)));
    for (const kind of KINDS) {
      const decl = kinds.find((d): d is CollectionDecl => d.kind === kind && d.shape === 'collection');
      if (!decl?.service.create) throw new ApiError('backend', `the ${kind} kind cannot be created`);
      const names = await namesOf(s, user.uuid);
      for (const [j, body] of u[kind].entries()) {
        if (names.get(kind)?.has(String(body.name))) {
          tally(false, kind);
          continue;
        }
        await decl.service.create(ctx, [resolveNames(kind, body, names)]).catch((e: unknown) => {
          throw seedEntryError(e, `users[${i}].${kind}[${j}]`, String(body.name));
        });
        tally(true, kind);
      }
      await runDue();
    }
    progress?.(i + 1, users.length, `user ${u.email}`);
  }
  return report;
}

/** A kind's refusal of a seed entry names the entry (`users[0].drives[1].media`), not only the field. */
function seedEntryError(e: unknown, at: string, name: string): unknown {
  if (!(e instanceof ApiError)) return e;
  const point = e.point ? `${at}.${e.point.replace(/^objects\.\d+\.?/, '')}`.replace(/\.$/, '') : at;
  return new ApiError(e.type, `${e.message} (the entry named "${name}")`, point, e.headers);
}

async function seedUser(s: Services, u: SeedUser, tally: (created: boolean, what: string) => void): Promise<UserRow> {
  const found = await findUserByEmail(s, u.email);
  if (!found) {
    tally(true, 'users');
    return createUser(s, { email: u.email, password: u.password, state: u.state });
  }
  tally(false, 'users');
  if (u.password !== undefined && !(await verifyPassword(u.password, found.password_hash))) await setPassword(s, u.email, u.password);
  if (u.state !== undefined && u.state !== found.state) return setState(s, u.email, u.state);
  return found;
}

async function topUp(
  s: Services,
  owner: string,
  kind: 'ips' | 'vlans',
  wanted: number,
  tally: (created: boolean, what: string, n?: number) => void,
  add: (n: number) => Promise<unknown>,
): Promise<void> {
  if (!wanted) return;
  const have = await s.store.operator.countOwned(s.store.db, kind, owner);
  if (have < wanted) {
    await add(wanted - have);
    tally(true, kind, wanted - have);
  }
  tally(false, kind, Math.min(have, wanted));
}

/** The account's drive and server (and tag) names -> uuids, by kind. */
async function namesOf(s: Services, owner: string): Promise<Map<string, Map<string, string>>> {
  const rows = await s.store.operator.namedOwned(s.store.db, owner, KINDS);
  const out = new Map<string, Map<string, string>>();
  for (const r of rows) {
    if (!out.has(r.kind)) out.set(r.kind, new Map());
    out.get(r.kind)!.set(r.name, r.uuid);
  }
  return out;
}

/** A server's drives and a tag's resources may name the account's objects: the names become uuids. */
function resolveNames(kind: string, body: Obj, names: Map<string, Map<string, string>>): Obj {
  const lookup = (v: unknown, kinds: string[]) => {
    if (typeof v !== 'string') return v;
    for (const k of kinds) {
      const uuid = names.get(k)?.get(v);
      if (uuid) return uuid;
    }
    return v;
  };
  if (kind === 'servers' && Array.isArray(body.drives))
    return { ...body, drives: body.drives.map((d: unknown) => (isObj(d) ? { ...d, drive: lookup(d.drive, ['drives']) } : d)) };
  if (kind === 'tags' && Array.isArray(body.resources)) return { ...body, resources: body.resources.map((r: unknown) => lookup(r, ['drives', 'servers'])) };
  return body;
}
