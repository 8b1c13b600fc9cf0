import Type from 'typebox';
import { f } from '../../core/fields.js';
import { readLevels } from '../../billing/levels.js';
import { listKind } from '../../core/list-kind.js';
import type { Config } from '../../config.js';

/**
 * The price catalogue as the API shows it (reference §16.2, §16.3, §16.5): `/pricing/` (with the burst
 * levels in force, `current`, and the ones that follow, `next`), `/discount/` and `/licenses/`. They are
 * the deployment's, read from the configured catalogue; only the levels come from the database.
 */
type PriceRow = Config['pricing']['rows'][number];
type License = Config['pricing']['licenses'][number];

export const pricing = listKind<PriceRow>({
  kind: 'pricing',
  flavour: 'model',
  fields: {
    currency: f.string({ readonly: true, help: 'The currency of the price' }),
    id: f.string({ unique: true, default: '', help: 'Unicode string data. Ex: "Hello World"' }),
    level: f.integer({ default: 0, help: 'The burst level the price applies to' }),
    multiplier: f.integer({ readonly: true, help: 'The multiplier applied to get the price of one unit per second, from the unit of the price' }),
    price: f.decimal({ help: 'Price' }),
    resource: f.string({ readonly: true, help: 'The resource the price applies to' }),
    unit: f.string({ readonly: true, help: 'The unit of the price' }),
  },
  defaultLimit: 0,
  listMethods: ['get'],
  detailMethods: ['get'],
  filtering: { level: 1 },
  wire: { listBeside: { current: Type.Record(Type.String(), Type.Integer()), next: Type.Record(Type.String(), Type.Integer()) } },
  async items(ctx) {
    const levels = await readLevels(ctx.store.db, ctx);
    return { items: ctx.config.pricing.rows, beside: { current: levels.current, next: levels.next } };
  },
  filterValues: { level: (r) => String(r.level) },
  idOf: (r) => r.id,
  present: (r) => ({ ...r }),
});

export const discount = listKind<Config['pricing']['discounts'][number]>({
  kind: 'discount',
  flavour: 'model',
  fields: {
    period: f.string({ nullable: true, help: 'The minimum period for this discount' }),
    value: f.decimal({ default: 0, help: 'The value of the discount' }),
  },
  defaultLimit: 0,
  listMethods: ['get'],
  detailMethods: ['get'],
  filtering: {},
  items: (ctx) => ({ items: ctx.config.pricing.discounts }),
  present: (d) => ({ ...d }),
});

const licenseObject = (l: License) => ({
  burstable: l.burstable,
  long_name: l.long_name,
  name: l.name,
  resource_uri: `/api/2.0/licenses/${l.id}/`,
  type: l.type,
  user_metric: l.user_metric,
});

export const licenses = listKind<License>({
  kind: 'licenses',
  flavour: 'model',
  fields: {
    burstable: f.boolean({ default: false, help: 'Whether this resource can be used on burst' }),
    long_name: f.string({ default: '', help: 'A human readable name for the resource.' }),
    name: f.string({ unique: true, help: 'Name that should be used when purchasing' }),
    resource_uri: f.string({ readonly: true, help: 'Unicode string data. Ex: "Hello World"' }),
    type: f.string({ default: 'instance', help: 'Type of billing' }),
    user_metric: f.string({ help: 'The metric that the user is charged for' }),
  },
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: ['get'],
  filtering: {},
  items: (ctx) => ({ items: [...ctx.config.pricing.licenses].sort((a, b) => (a.name < b.name ? -1 : 1)) }),
  idOf: (l) => String(l.id),
  present: licenseObject,
});
