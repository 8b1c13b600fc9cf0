import { randomBytes } from 'node:crypto';
import Type from 'typebox';
import { f } from '../../core/fields.js';
import type { Obj } from '../../core/input.js';
import type { Ctx } from '../../core/context.js';
import { validation } from '../../core/errors.js';
import { storedDecl } from '../../core/stored.js';
import { isoTimestamp } from '../../core/clock.js';
import { enqueue } from './deliveries.js';
import { checkWebhookUrl } from './destinations.js';
import { isNotificationType, NOTIFICATION_TYPES } from './types.js';

export const WEBHOOKS = 'webhooks';

/**
 * Webhooks (beyond the real API): URLs a user registers to receive the account's notifications as signed
 * JSON POSTs (notify/webhook.ts: HMAC-SHA256 in `X-Stratus-Signature`, keyed with the webhook's
 * `secret`, shown to its owner). `types` limits which notification types it gets (empty: all but the
 * password-reset link, which only ever goes by e-mail). Each delivery is retried with backoff; the
 * webhook shows how the last one went (`last_status`, `last_error`, `last_delivery_at`), `GET
 * /webhooks/<uuid>/deliveries/` the recent ones, and `POST /webhooks/<uuid>/action/?do=test` sends a
 * test delivery. Only public destinations are allowed (destinations.ts) unless the operator allows
 * private ones (`--webhooks-allow-private`).
 */
const fields = {
  last_delivery_at: f.datetime({ readonly: true, nullable: true, default: null }),
  last_error: f.string({ readonly: true, nullable: true, default: null }),
  last_status: f.string({ readonly: true, default: 'none', choices: ['none', 'ok', 'failing'] }),
  name: f.string({ maxLength: 256, default: '' }),
  resource_uri: f.string({ readonly: true }),
  secret: f.string({ readonly: true }),
  types: f.list(Type.String(), {}),
  url: f.string({ required: true, maxLength: 2048 }),
  uuid: f.string({ readonly: true }),
};

function prepare(values: Obj, _mode: 'create' | 'update', ctx: Ctx): Obj {
  if (typeof values.url === 'string') {
    // The text only (no DNS here): the address a name resolves to is checked when a delivery connects.
    const checked = checkWebhookUrl(values.url, ctx.config.webhooksAllowPrivate);
    if ('refused' in checked) throw validation('url', checked.refused);
  }
  if (Array.isArray(values.types)) {
    const bad = values.types.find((t) => !isNotificationType(t));
    if (bad !== undefined) throw validation('types', `Unknown notification type ${JSON.stringify(bad)}; known: ${NOTIFICATION_TYPES.join(', ')}`);
    values.types = [...new Set(values.types as string[])];
  }
  return values;
}

/** The JSON a webhook receives for one notification. */
export function webhookBody(n: { id: string; type: string; subject: string; text: string; created_at: string; account: string; event: string | null }): string {
  return JSON.stringify({ account: n.account, created_at: n.created_at, event: n.event, id: n.id, subject: n.subject, text: n.text, type: n.type });
}

async function sendTest(ctx: Ctx, uuid: string): Promise<Obj> {
  const id = ctx.ids.uuid();
  const at = isoTimestamp(ctx.clock.now());
  await ctx.store.transaction(async (tx) => {
    const row = await ctx.store.resources.lock(tx, WEBHOOKS, uuid);
    if (!row) return;
    await enqueue(tx, ctx, {
      owner: ctx.caller.uuid,
      channel: 'webhook',
      target: uuid,
      address: String(row.body.url),
      type: 'test',
      messageId: id,
      content: {
        body: webhookBody({
          id,
          type: 'test',
          subject: 'Test delivery',
          text: 'A test delivery asked for by the webhook owner.',
          created_at: at,
          account: ctx.caller.uuid,
          event: null,
        }),
      },
    });
  });
  return { id, status: 'queued' };
}

export const webhooks = storedDecl(
  {
    kind: WEBHOOKS,
    flavour: 'model',
    fields,
    listMethods: ['get', 'post'],
    detailMethods: ['get', 'put', 'delete'],
    actions: { test: { permission: 'EDIT', async: true, run: (ctx, uuid) => sendTest(ctx, uuid) } },
    views: {
      async deliveries(ctx, uuid) {
        await webhooks.service.get(ctx, uuid);
        const rows = await ctx.store.notifications.deliveries.recentOf(ctx.store.db, uuid, 50);
        return {
          objects: rows.map((r) => ({
            attempts: r.attempts,
            created_at: r.created_at,
            id: r.message_id,
            last_error: r.last_error,
            next_attempt_at: r.state === 'pending' ? isoTimestamp(new Date(Number(r.due_ms))) : null,
            sent_at: r.sent_at,
            state: r.state,
            type: r.type,
          })),
        };
      },
    },
  },
  {
    prepare,
    presentStatic(o) {
      const { owner: _owner, ...rest } = o;
      return rest;
    },
    async beforeInsert(_tx, _ctx, _uuid, values) {
      return { ...values, secret: randomBytes(24).toString('base64url'), last_status: 'none', last_error: null, last_delivery_at: null };
    },
  },
);
