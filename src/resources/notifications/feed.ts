import { f } from '../../core/fields.js';
import { isoTimestamp } from '../../core/clock.js';
import { notFound, validation } from '../../core/errors.js';
import type { CollectionDecl } from '../../core/resource.js';
import { resourceUri } from '../../store/repository.js';
import type { Selectable } from 'kysely';
import type { NotificationsTable } from '../../store/schema.js';
import { CONTACTS } from './contacts.js';

export const FEED = 'notifications';

/**
 * The `api` medium (beyond the real API, whose delivery channel is not documented): the account's
 * notifications as a feed, `GET /notifications/` newest first and paged like every list,
 * `PUT /notifications/<uuid>/ {"read": true}` marks one read; `?read=false` lists the unread ones.
 * One entry per contact whose `api` preference for the type is on.
 */
const fields = {
  contact: f.string({ readonly: true }),
  created_at: f.datetime({ readonly: true }),
  read: f.boolean({ default: false }),
  resource_uri: f.string({ readonly: true }),
  subject: f.string({ readonly: true }),
  text: f.string({ readonly: true }),
  type: f.string({ readonly: true }),
  uuid: f.string({ readonly: true }),
};

const shown = (r: Selectable<NotificationsTable>) => ({
  contact: resourceUri(CONTACTS, r.contact_uuid),
  created_at: r.created_at,
  read: r.read_at !== null,
  resource_uri: resourceUri(FEED, r.uuid),
  subject: r.subject,
  text: r.text,
  type: r.type,
  uuid: r.uuid,
});

export const notificationFeed: CollectionDecl = {
  shape: 'collection',
  kind: FEED,
  flavour: 'model',
  fields,
  defaultLimit: 20,
  filtering: { read: 'exact', type: 'exact' },
  listMethods: ['get'],
  detailMethods: ['get', 'put'],
  service: {
    async list(ctx, query) {
      let q = ctx.store.db.selectFrom('notifications').where('owner_uuid', '=', ctx.caller.uuid);
      for (const values of query.filters.get('type') ?? []) q = q.where('type', 'in', values);
      for (const values of query.filters.get('read') ?? []) {
        const wanted = new Set(values.map((v) => v.toLowerCase()));
        const read = wanted.has('true') || wanted.has('1');
        const unread = wanted.has('false') || wanted.has('0');
        if (read && !unread) q = q.where('read_at', 'is not', null);
        else if (unread && !read) q = q.where('read_at', 'is', null);
      }
      const total = await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      let page = q.selectAll().orderBy('seq', 'desc').offset(query.offset);
      if (query.limit > 0) page = page.limit(query.limit);
      else page = page.limit(1_000_000_000);
      return { total: Number(total.n), objects: (await page.execute()).map(shown) };
    },
    async get(ctx, uuid) {
      const r = await ctx.store.db
        .selectFrom('notifications')
        .selectAll()
        .where('uuid', '=', uuid)
        .where('owner_uuid', '=', ctx.caller.uuid)
        .executeTakeFirst();
      if (!r) throw notFound(uuid);
      return shown(r);
    },
    async update(ctx, uuid, input) {
      if (input.read !== undefined && typeof input.read !== 'boolean') throw validation('read', 'read must be true or false');
      if (typeof input.read === 'boolean') {
        const res = await ctx.store.db
          .updateTable('notifications')
          .set({ read_at: input.read ? isoTimestamp(ctx.clock.now()) : null })
          .where('uuid', '=', uuid)
          .where('owner_uuid', '=', ctx.caller.uuid)
          .executeTakeFirst();
        if (Number(res.numUpdatedRows) === 0) throw notFound(uuid);
      }
      return this.get(ctx, uuid);
    },
  },
};
