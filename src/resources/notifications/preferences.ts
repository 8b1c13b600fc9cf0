import { f } from '../../core/fields.js';
import type { Obj } from '../../core/input.js';
import type { Ctx } from '../../core/context.js';
import { validation } from '../../core/errors.js';
import { listKind } from '../../core/list-kind.js';
import { resourceUri } from '../../store/repository.js';
import type { Db, Store, Tx } from '../../store/db.js';
import { CONTACTS, contactsOf, ensureMainContact } from './contacts.js';
import { DEFAULT_PREFERENCE, isMedium, isNotificationType, MEDIA, NOTIFICATION_TYPES, type Medium, type NotificationType } from './types.js';

/**
 * Notification preferences (reference §17): one boolean per contact × medium × type. Only values that
 * differ from the default are stored (a new type or contact needs no rows); the list shows every
 * combination. `PUT /notification_preferences/` takes one object or a list, checks all of them first
 * (an unknown contact, type or medium, or a value that is not a boolean, is a 400 naming the field and
 * changes nothing) and answers 202 with the rows it changed.
 */
const fields = {
  contact: f.string({ required: true }),
  medium: f.string({ required: true, choices: [...MEDIA] }),
  type: f.string({ required: true, choices: [...NOTIFICATION_TYPES] }),
  value: f.boolean({ required: true }),
};

/** Stored values differing from the default, keyed `contact medium type`. */
async function storedValues(db: Db | Tx, store: Store, contacts: readonly string[]): Promise<Map<string, boolean>> {
  const rows = await store.notifications.preferences.of(db, contacts);
  return new Map(rows.map((r) => [`${r.contact} ${r.medium} ${r.type}`, r.value]));
}

/** Whether each of an account's contacts wants a type on a medium (the fan-out asks this). */
export async function wants(db: Db | Tx, store: Store, contacts: readonly string[], type: NotificationType, medium: Medium): Promise<Set<string>> {
  const values = await storedValues(db, store, contacts);
  return new Set(contacts.filter((c) => values.get(`${c} ${medium} ${type}`) ?? DEFAULT_PREFERENCE));
}

const row = (contact: string, medium: string, type: string, value: boolean): Obj => ({ contact: resourceUri(CONTACTS, contact), medium, type, value });

/** A contact given as its URI (as the API shows it), `{resource_uri}`/`{uuid}`, or a bare uuid. */
function contactUuid(v: unknown): string | undefined {
  const raw = typeof v === 'object' && v !== null ? ((v as Obj).uuid ?? (v as Obj).resource_uri) : v;
  if (typeof raw !== 'string') return undefined;
  const m = /^\/api\/2\.0\/notification_contacts\/([^/]+)\/?$/.exec(raw);
  return m ? m[1] : raw;
}

async function ensure(ctx: Ctx): Promise<void> {
  await ctx.store.transaction((tx) => ensureMainContact(tx, ctx, ctx.caller.uuid));
}

export const notificationPreferences = listKind<Obj>({
  kind: 'notification_preferences',
  flavour: 'model',
  fields,
  defaultLimit: 0,
  filtering: {},
  listMethods: ['get', 'put'],
  // Read and changed as a list: no detail view.
  detailMethods: [],
  /** Every contact × medium × type, stored value or the default. */
  async items(ctx) {
    await ensure(ctx);
    const contacts = (await contactsOf(ctx.store.db, ctx.store, ctx.caller.uuid)).map((c) => c.uuid);
    const values = await storedValues(ctx.store.db, ctx.store, contacts);
    const all: Obj[] = [];
    for (const c of contacts)
      for (const m of MEDIA) for (const t of NOTIFICATION_TYPES) all.push(row(c, m, t, values.get(`${c} ${m} ${t}`) ?? DEFAULT_PREFERENCE));
    return { items: all };
  },
  present: (r) => r,
  service: {
    async updateMany(ctx, inputs) {
      await ensure(ctx);
      const mine = new Set((await contactsOf(ctx.store.db, ctx.store, ctx.caller.uuid)).map((c) => c.uuid));
      const changes = inputs.map((input, i) => {
        const at = inputs.length > 1 ? `objects[${i}].` : '';
        const contact = contactUuid(input.contact);
        if (input.contact === undefined || input.contact === null) throw validation(`${at}contact`, 'This field is required');
        if (!contact || !mine.has(contact)) throw validation(`${at}contact`, `No notification contact ${JSON.stringify(input.contact)}`);
        if (!isMedium(input.medium)) throw validation(`${at}medium`, `medium must be one of ${MEDIA.join(', ')}`);
        if (!isNotificationType(input.type)) throw validation(`${at}type`, `Unknown notification type ${JSON.stringify(input.type ?? null)}`);
        if (typeof input.value !== 'boolean') throw validation(`${at}value`, 'value must be true or false');
        return { contact, medium: input.medium, type: input.type, value: input.value };
      });
      await ctx.store.transaction(async (tx) => {
        for (const c of changes) await ctx.store.notifications.preferences.set(tx, c, c.value !== DEFAULT_PREFERENCE ? c.value : null);
      });
      return changes.map((c) => row(c.contact, c.medium, c.type, c.value));
    },
  },
});
