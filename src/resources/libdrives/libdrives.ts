import { permission } from '../../core/errors.js';
import { storedDecl, type StoredFilter } from '../../core/stored.js';
import { cloneDrive } from '../drives/clone.js';
import { drives } from '../drives/drives.js';
import { syncLibrary } from './catalogue.js';
import { libdriveFields } from './fields.js';

/**
 * Library drives (reference §6.6): the location's catalogue of images (loaded at start-up by
 * `syncLibrary`, see catalogue.ts), readable by every user, never owned (`owner: null`), read-only except
 * `action/?do=clone`, which makes a drive in the caller's account. The image description is kept in the
 * JSON body; its filters are evaluated in the database on that body.
 */

const exact =
  (key: string): StoredFilter =>
  (_eb, values, ctx) =>
    ctx.store.resources.bodyTextIn(key, values);

const filters: Record<string, StoredFilter> = {
  arch: exact('arch'),
  distribution: exact('distribution'),
  image_type: exact('image_type'),
  os: exact('os'),
  version: exact('version'),
  // `category` is a list: a drive matches when it lists one of the values.
  category: (_eb, values, ctx) => ctx.store.resources.bodyListHasAny('category', values),
  name__icontains: (eb, values, ctx) => eb.or(values.map((s) => ctx.store.resources.like('resources.name', s, { contains: true, caseInsensitive: true }))),
};

export const libdrives = storedDecl(
  {
    kind: 'libdrives',
    flavour: 'custom',
    fields: libdriveFields,
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
        async: true,
        answer: { objects: 'drives' },
        run: async (ctx, uuid, body) => ({ objects: [await drives.service.get(ctx, await cloneDrive(ctx, uuid, body))] }),
      },
    },
    // The configured catalogue into the database, once per start (idempotent, safe for several processes).
    startup: async (s) => void (await syncLibrary(s)),
  },
  {
    // Every user sees the whole library (rows without an owner).
    alsoVisible: (ctx, db) => ctx.store.resources.ownedUuids(db, 'libdrives', null),
    // No ACLs apply: anyone may clone a library drive, nothing else.
    async access(_ctx, uuid, perm, row) {
      if (!row) return undefined;
      if (perm !== 'CLONE') throw permission(`Library drive ${uuid} is read-only`);
      return row;
    },
    filters,
  },
);
