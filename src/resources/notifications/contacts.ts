import Type from 'typebox';
import { createHash } from 'node:crypto';
import { f } from '../../core/fields.js';
import type { Obj } from '../../core/input.js';
import type { Ctx, Services } from '../../core/context.js';
import { ApiError, validation } from '../../core/errors.js';
import { storedDecl } from '../../core/stored.js';
import type { CollectionService } from '../../core/resource.js';
import type { Db, Tx } from '../../store/db.js';
import { isValidEmail, normalizeEmail } from '../users/users.js';

export const CONTACTS = 'notification_contacts';

/**
 * Notification contacts (reference §17): who hears about what the service does to an account. The
 * account's own contact (`main: true`) always exists, shows the account's current e-mail (it follows a
 * change of the account's address) and cannot be deleted; contacts a user adds have `main: null`. Phone
 * numbers are kept as the recorded API keeps them: without spaces.
 */
const fields = {
  email: f.string({ required: true, maxLength: 254 }),
  main: f.boolean({ readonly: true, nullable: true, default: null }),
  name: f.string({ maxLength: 256, default: '' }),
  phone: f.string({ maxLength: 64, nullable: true, default: null }),
  resource_uri: f.string({ readonly: true }),
  uuid: f.string({ readonly: true }),
};

/** The main contact's uuid: one per account, the same in every process (two first reads make one). */
export function mainContactUuid(userUuid: string): string {
  const h = createHash('sha256').update(`main-contact:${userUuid}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** Creates the account's main contact if it has none yet (accounts made before notifications, or just now). */
export async function ensureMainContact(tx: Tx, s: Pick<Services, 'store' | 'clock'>, userUuid: string): Promise<void> {
  const user = await s.store.accounts.users.profileOf(tx, userUuid);
  if (!user) return;
  const profile = JSON.parse(user.profile) as { first_name?: string; last_name?: string };
  const name = [profile.first_name, profile.last_name].filter(Boolean).join(' ');
  await s.store.resources.insertIfAbsent(tx, s.clock.now(), {
    kind: CONTACTS,
    uuid: mainContactUuid(userUuid),
    owner: userUuid,
    body: { email: user.email, main: true, name, phone: '' },
  });
}

function prepare(values: Obj): Obj {
  if (typeof values.email === 'string') {
    if (!isValidEmail(values.email)) throw validation('email', 'Enter a valid e-mail address');
    values.email = normalizeEmail(values.email);
  }
  if (typeof values.phone === 'string') values.phone = values.phone.replace(/\s+/g, '');
  return values;
}

const decl = storedDecl(
  {
    kind: CONTACTS,
    flavour: 'model',
    fields,
    listMethods: ['get', 'post'],
    detailMethods: ['get', 'put', 'delete'],
    // The recorded PUT answer repeats the uuid as `pk`.
    wire: { updatedKeys: { pk: Type.String() } },
  },
  {
    prepare,
    // Only the account's own contact is `main`; every added one shows null, as recorded.
    async beforeInsert(_tx, _ctx, _uuid, values) {
      return { ...values, main: null };
    },
    presentStatic(o) {
      const { owner: _owner, ...rest } = o;
      return rest;
    },
    async decorate(ctx, objects, rows) {
      const mains = rows.filter((r) => r.body.main === true).map((r) => r.owner_uuid!);
      const emails = await ctx.store.accounts.users.emails(ctx.store.db, mains);
      objects.forEach((o, i) => {
        if (o.main === true) o.email = emails.get(rows[i].owner_uuid!) ?? o.email;
      });
    },
    async beforeUpdate(_tx, _ctx, row, values) {
      // The main contact's address is the account's: changing it here would be undone on the next read.
      if (row.body.main === true && values.email !== undefined) delete values.email;
      return values;
    },
    async beforeDelete(tx, ctx, uuid, row) {
      if (row.body.main === true) throw new ApiError('permission', 'The main contact of an account cannot be deleted', 'main');
      await ctx.store.notifications.preferences.deleteOfContact(tx, uuid);
    },
  },
);

const stored = decl.service;

/** The main contact exists before the caller sees the list; the PUT answer carries `pk` (the recorded API's). */
const service: CollectionService = {
  async list(ctx, query) {
    await ensureOwnMain(ctx);
    return stored.list(ctx, query);
  },
  async get(ctx, uuid) {
    if (uuid === mainContactUuid(ctx.caller.uuid)) await ensureOwnMain(ctx);
    return stored.get(ctx, uuid);
  },
  create: (ctx, inputs) => stored.create(ctx, inputs),
  async update(ctx, uuid, input) {
    if (uuid === mainContactUuid(ctx.caller.uuid)) await ensureOwnMain(ctx);
    const o = await stored.update(ctx, uuid, input);
    return { ...o, pk: o.uuid };
  },
  remove: (ctx, uuid, params) => stored.remove(ctx, uuid, params),
};

async function ensureOwnMain(ctx: Ctx): Promise<void> {
  // A read-only check first: the common case (it exists) writes nothing.
  if (await ctx.store.resources.get(ctx.store.db, CONTACTS, mainContactUuid(ctx.caller.uuid))) return;
  await ctx.store.transaction((tx) => ensureMainContact(tx, ctx, ctx.caller.uuid));
}

export const notificationContacts = { ...decl, service };

/** An account's contacts (the main one first): uuid and address (the main contact's is the account's). */
export async function contactsOf(db: Db | Tx, store: Services['store'], owner: string): Promise<{ uuid: string; email: string; main: boolean }[]> {
  const rows = await store.resources.owned(db, CONTACTS, { owner });
  const account = rows.some((r) => r.body.main === true) ? (await store.accounts.users.emails(db, [owner])).get(owner) : undefined;
  return rows.map((r) => ({
    uuid: r.uuid,
    email: r.body.main === true ? (account ?? String(r.body.email)) : String(r.body.email),
    main: r.body.main === true,
  }));
}
