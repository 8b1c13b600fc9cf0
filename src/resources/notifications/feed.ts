import { f } from '../../core/fields.js';
import { isoTimestamp } from '../../core/clock.js';
import { notFound, validation } from '../../core/errors.js';
import type { CollectionDecl } from '../../core/resource.js';
import { resourceUri } from '../../store/repository.js';
import type { FeedRow } from '../../store/notifications/index.js';
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

const shown = (r: FeedRow) => ({
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
      const read: boolean[] = [];
      for (const values of query.filters.get('read') ?? []) {
        const wanted = new Set(values.map((v) => v.toLowerCase()));
        const isRead = wanted.has('true') || wanted.has('1');
        const unread = wanted.has('false') || wanted.has('0');
        if (isRead !== unread) read.push(isRead);
      }
      const filter = { owner: ctx.caller.uuid, types: query.filters.get('type') ?? [], read };
      const { total, rows } = await ctx.store.notifications.feed.page(ctx.store.db, filter, query.offset, query.limit);
      return { total, objects: rows.map(shown) };
    },
    async get(ctx, uuid) {
      const r = await ctx.store.notifications.feed.get(ctx.store.db, ctx.caller.uuid, uuid);
      if (!r) throw notFound(uuid);
      return shown(r);
    },
    async update(ctx, uuid, input) {
      if (input.read !== undefined && typeof input.read !== 'boolean') throw validation('read', 'read must be true or false');
      if (typeof input.read === 'boolean') {
        const found = await ctx.store.notifications.feed.setRead(ctx.store.db, ctx.caller.uuid, uuid, input.read ? isoTimestamp(ctx.clock.now()) : null);
        if (!found) throw notFound(uuid);
      }
      return this.get(ctx, uuid);
    },
  },
};
