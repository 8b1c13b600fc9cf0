import { f } from '../../core/fields.js';
import { isoTimestamp } from '../../core/clock.js';
import { notFound, validation } from '../../core/errors.js';
import type { CollectionDecl } from '../../core/resource.js';
import { tableKind } from '../../core/table-kind.js';
import { resourceUri } from '../../store/repository.js';
import type { NotificationsTable, RowOf } from '../../store/schema.js';
import { CONTACTS } from './contacts.js';

export const FEED = 'notifications';

/**
 * The `api` medium (beyond the real API, whose delivery channel is not documented): the account's
 * notifications as a feed, `GET /notifications/` newest first and paged like every list,
 * `PUT /notifications/<uuid>/ {"read": true}` marks one read; `?read=false` lists the unread ones.
 * One entry per contact whose `api` preference for the type is on. A kind over its own table
 * (core/table-kind.ts: the fan-out writes the rows), plus the one write it allows: read or unread.
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

type Entry = RowOf<NotificationsTable>;

const present = (r: Entry) => ({
  contact: resourceUri(CONTACTS, r.contact_uuid),
  created_at: r.created_at,
  read: r.read_at !== null,
  resource_uri: resourceUri(FEED, r.uuid),
  subject: r.subject,
  text: r.text,
  type: r.type,
  uuid: r.uuid,
});

export const notificationFeed: CollectionDecl = tableKind<Entry>({
  kind: FEED,
  table: 'notifications',
  flavour: 'model',
  fields,
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: ['get', 'put'],
  filters: {
    type: { column: 'type', op: '=' },
    read: { column: 'read_at', op: 'set' },
  },
  filtering: { read: 'exact', type: 'exact' },
  order: [['seq', 'desc']],
  detail: { column: 'uuid', parse: (id) => id },
  present,
  service: {
    // Marking read or unread is the one change an entry takes.
    async update(ctx, uuid, input) {
      if (input.read !== undefined && typeof input.read !== 'boolean') throw validation('read', 'read must be true or false');
      if (typeof input.read === 'boolean') {
        const found = await ctx.store.notifications.feed.setRead(ctx.store.db, ctx.caller.uuid, uuid, input.read ? isoTimestamp(ctx.clock.now()) : null);
        if (!found) throw notFound(uuid);
      }
      return notificationFeed.service.get(ctx, uuid);
    },
  },
});
