import { sql, type RawBuilder } from 'kysely';
import type { Ctx } from '../../core/context.js';
import { permission } from '../../core/errors.js';
import { storedDecl, type StoredFilter } from '../../core/stored.js';
import { cloneFrom } from '../drives/drives.js';
import { libdriveFields } from './fields.js';
import { librarySource } from './library.js';

/**
 * Library drives (reference §6.6): the location's catalogue of images (loaded at start-up by
 * `syncLibrary`, see catalogue.ts), readable by every user, never owned (`owner: null`), read-only except
 * `action/?do=clone`, which makes a drive in the caller's account. The image description is kept in the
 * JSON body; its filters are evaluated in the database on that body.
 */

/** A string field of the JSON body, in the engine's own JSON functions. */
function bodyText(ctx: Ctx, key: string): RawBuilder<string> {
  return ctx.store.dialect === 'postgres'
    ? sql<string>`(${sql.ref('resources.body')}::jsonb ->> ${sql.lit(key)})`
    : sql<string>`json_extract(${sql.ref('resources.body')}, ${sql.lit(`$.${key}`)})`;
}

const exact =
  (key: string): StoredFilter =>
  (_eb, values, ctx) =>
    sql<boolean>`${bodyText(ctx, key)} in (${sql.join(values)})`;

const filters: Record<string, StoredFilter> = {
  arch: exact('arch'),
  distribution: exact('distribution'),
  image_type: exact('image_type'),
  os: exact('os'),
  version: exact('version'),
  // `category` is a list: a drive matches when it lists one of the values.
  category: (_eb, values, ctx) =>
    ctx.store.dialect === 'postgres'
      ? sql<boolean>`exists (select 1 from jsonb_array_elements_text(${sql.ref('resources.body')}::jsonb -> 'category') as c(value) where c.value in (${sql.join(values)}))`
      : sql<boolean>`exists (select 1 from json_each(${sql.ref('resources.body')}, '$.category') as c where c.value in (${sql.join(values)}))`,
  name__icontains: (eb, values, ctx) => eb.or(values.map((s) => ctx.store.like('resources.name', s, { contains: true, caseInsensitive: true }))),
};

export const libdrives = storedDecl(
  {
    shape: 'collection',
    kind: 'libdrives',
    flavour: 'custom',
    fields: libdriveFields,
    defaultLimit: 20,
    listMethods: ['get'],
    detailMethods: ['get'],
    filtering: {
      arch: 'exact',
      category: 'exact',
      distribution: 'exact',
      image_type: 'exact',
      name: 'exact',
      name__icontains: 'exact',
      os: 'exact',
      uuid: 'exact',
      version: 'exact',
    },
    actions: {
      // A new drive of the caller's, in cloning_dst with a drive_clone job (optional body: name, media,
      // affinities, size, storage_type); the library's description lands in its meta, licenses stay bound.
      clone: {
        permission: 'CLONE',
        run: async (ctx, uuid, body) => ({ status: 202, body: { objects: [await cloneFrom(ctx, await librarySource(ctx.store.db, uuid), body)] } }),
      },
    },
  },
  {
    // Every user sees the whole library (rows without an owner).
    alsoVisible: (_ctx, db) => db.selectFrom('resources').select('uuid').where('kind', '=', 'libdrives').where('owner_uuid', 'is', null),
    // No ACLs apply: anyone may clone a library drive, nothing else.
    async access(_ctx, uuid, perm, row) {
      if (!row) return undefined;
      if (perm !== 'CLONE') throw permission(`Library drive ${uuid} is read-only`);
      return row;
    },
    filters,
  },
);
