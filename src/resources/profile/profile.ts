import { f } from '../../core/fields.js';
import { isoTimestamp } from '../../core/clock.js';
import { notFound } from '../../core/errors.js';
import { validateFields, type Obj } from '../../core/input.js';
import { money16 } from '../../core/money.js';
import type { Ctx } from '../../core/context.js';
import type { SingletonDecl } from '../../core/resource.js';
import { restrictionLevelOf } from '../../core/firewall.js';
import type { ProfileRow } from '../../store/accounts/index.js';

const text = (help?: string) => f.string({ default: '', maxLength: 1024, ...(help ? { help } : {}) });
const money = () => f.decimal({ default: 0 });

export const CLONE_NAMING = ['NONE', 'COUNTER', 'DATE', 'TIMESTAMP'] as const;

/** The account profile (golden dump `profile`): one object per user, no list, no delete. */
export const profileFields = {
  address: text(),
  api_https_only: f.boolean({ default: false }),
  autotopup_amount: money(),
  autotopup_threshold: money(),
  bank_reference: f.string({ readonly: true, nullable: true, blank: true }),
  clone_naming: f.string({ default: 'NONE', choices: CLONE_NAMING }),
  company: text(),
  country: text(),
  currency: f.string({ readonly: true, nullable: true, blank: true }),
  email: f.string({ readonly: true }),
  first_name: text(),
  has_autotopup: f.boolean({ default: false }),
  has_tx_autotopup: f.boolean({ default: false }),
  invoicing: f.boolean({ default: true }),
  key_auth: f.boolean({ default: false }),
  language: f.string({ default: 'EN', maxLength: 16 }),
  last_name: text(),
  mailing_list: f.boolean({ default: true }),
  meta: f.dict(),
  my_notes: f.string({ default: '', nullable: true, maxLength: 65536 }),
  network_restrictions: f.string({ readonly: true, nullable: true }),
  nickname: text('User nickname'),
  phone: text(),
  postcode: f.string({ nullable: true, maxLength: 64 }),
  reseller: text(),
  signup_time: f.datetime({ readonly: true }),
  state: f.string({ readonly: true }),
  tax_name: f.string({ readonly: true, nullable: true }),
  tax_rate: f.decimal({ readonly: true, nullable: true }),
  title: text('User title'),
  town: text(),
  tx_autotopup_amount: money(),
  tx_autotopup_threshold: money(),
  uuid: f.string({ readonly: true }),
  vat: text(),
};

const MONEY_FIELDS = ['autotopup_amount', 'autotopup_threshold', 'tx_autotopup_amount', 'tx_autotopup_threshold'];

/** The stored part of a new user's profile (email, state and uuid come from the user row). */
export function profileDefaults(uuid: string, now: Date, currency: string): Obj {
  const profile = validateFields(profileFields, {}, 'create');
  for (const k of MONEY_FIELDS) profile[k] = money16(profile[k] as number);
  return {
    ...profile,
    bank_reference: uuid.slice(0, 8),
    currency,
    network_restrictions: null,
    postcode: '',
    signup_time: isoTimestamp(now),
    tax_name: null,
    tax_rate: null,
  };
}

async function load(ctx: Ctx) {
  const row = await ctx.store.accounts.users.profileOf(ctx.store.db, ctx.caller.uuid);
  if (!row) throw notFound(ctx.caller.uuid);
  return row;
}

/**
 * `network_restrictions`: the restriction level the account's state puts its servers' traffic under
 * (spec "Limits" 3–6), null for the regular level, as the recorded regular profiles show it.
 */
const networkRestrictions = (state: string): string | null => {
  const level = restrictionLevelOf(state);
  return level === 'regular' ? null : level;
};

const present = (row: ProfileRow): Obj => ({
  ...JSON.parse(row.profile),
  email: row.email,
  network_restrictions: networkRestrictions(row.state),
  state: row.state,
  uuid: row.uuid,
});

export const profile: SingletonDecl = {
  shape: 'singleton',
  kind: 'profile',
  flavour: 'model',
  fields: profileFields,
  defaultLimit: 20,
  listMethods: ['get', 'put'],
  detailMethods: ['get', 'put'],
  service: {
    async get(ctx) {
      return present(await load(ctx));
    },
    async update(ctx, input) {
      const values = validateFields(profileFields, input, 'update');
      for (const k of MONEY_FIELDS) if (values[k] !== undefined) values[k] = money16(values[k] as string);
      await ctx.store.transaction(async (tx) => {
        const stored = await ctx.store.accounts.users.lockProfile(tx, ctx.caller.uuid);
        if (stored === undefined) throw notFound(ctx.caller.uuid);
        const next = { ...JSON.parse(stored), ...values };
        await ctx.store.accounts.users.setProfile(tx, ctx.caller.uuid, JSON.stringify(next));
      });
      return present(await load(ctx));
    },
  },
};
