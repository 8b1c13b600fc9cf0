import Type from 'typebox';
import { f } from '../../core/fields.js';
import { notFound } from '../../core/errors.js';
import { readLevels } from '../../billing/levels.js';
import type { CollectionDecl, ListQuery } from '../../core/resource.js';
import { pageOfItems } from '../../store/paging.js';

/**
 * The price catalogue as the API shows it (reference §16.2, §16.3, §16.5): `/pricing/` (with the burst
 * levels in force, `current`, and the ones that follow, `next`), `/discount/` and `/licenses/`. They are
 * the deployment's, read from the configured catalogue; only the levels come from the database.
 */
const page = <T>(items: readonly T[], q: ListQuery): T[] => pageOfItems(items, q.limit, q.offset).rows;

/** Values of a filter (comma = OR; repeated = AND, every group must match). */
const matchesAll = (groups: string[][] | undefined, value: string) => !groups || groups.every((g) => g.includes(value));

export const pricing: CollectionDecl = {
  shape: 'collection',
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
  service: {
    async list(ctx, q) {
      const rows = ctx.config.pricing.rows.filter((r) => matchesAll(q.filters.get('level'), String(r.level)));
      const levels = await readLevels(ctx.store.db, ctx);
      return { total: rows.length, objects: page(rows, q).map((r) => ({ ...r })), extra: { current: levels.current, next: levels.next } };
    },
    async get(ctx, id) {
      const row = ctx.config.pricing.rows.find((r) => r.id === id);
      if (!row) throw notFound(id);
      return { ...row };
    },
  },
};

export const discount: CollectionDecl = {
  shape: 'collection',
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
  service: {
    async list(ctx, q) {
      const all = ctx.config.pricing.discounts;
      return { total: all.length, objects: page(all, q).map((d) => ({ ...d })) };
    },
    async get(_ctx, id) {
      throw notFound(id);
    },
  },
};

const licenseObject = (l: { id: number; name: string; long_name: string; type: string; user_metric: string; burstable: boolean }) => ({
  burstable: l.burstable,
  long_name: l.long_name,
  name: l.name,
  resource_uri: `/api/2.0/licenses/${l.id}/`,
  type: l.type,
  user_metric: l.user_metric,
});

export const licenses: CollectionDecl = {
  shape: 'collection',
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
  service: {
    async list(ctx, q) {
      const all = [...ctx.config.pricing.licenses].sort((a, b) => (a.name < b.name ? -1 : 1));
      return { total: all.length, objects: page(all, q).map(licenseObject) };
    },
    async get(ctx, id) {
      const l = ctx.config.pricing.licenses.find((x) => String(x.id) === id);
      if (!l) throw notFound(id);
      return licenseObject(l);
    },
  },
};
