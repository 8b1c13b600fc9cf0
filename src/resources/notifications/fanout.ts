import { isoTimestamp } from '../../core/clock.js';
import type { Services } from '../../core/context.js';
import type { Tx } from '../../store/db.js';
import { contactsOf, ensureMainContact } from './contacts.js';
import { enqueue } from './deliveries.js';
import { wants } from './preferences.js';
import { renderEmail } from './render.js';
import { ACCOUNT_ONLY, EVENT_NOTIFICATIONS, SUBJECTS, type NotificationType } from './types.js';
import { WEBHOOKS, webhookBody } from './webhooks.js';

/** Outbox rows taken per transaction. */
const BATCH = 50;

/**
 * Turns outbox events into notifications: for each event of a mapped type (types.ts), an e-mail
 * delivery to each contact whose `email` preference is on, a feed entry for each whose `api` preference is on, and a delivery to each of the account's webhooks that wants the type.
 * All of it, and the mark that the event is done, commit in one transaction, so an event is fanned out
 * exactly once even with several processes (SKIP LOCKED on PostgreSQL, and the mark's primary key).
 * Returns how many events it handled.
 */
export async function fanOut(s: Services, mailDomain: string): Promise<number> {
  const types = Object.keys(EVENT_NOTIFICATIONS);
  return s.store.transaction(async (tx) => {
    const rows = await s.store.notifications.fanout.claim(tx, types, BATCH);
    for (const row of rows) {
      if (row.owner_uuid) await notify(tx, s, mailDomain, { ...row, owner_uuid: row.owner_uuid, notification: EVENT_NOTIFICATIONS[row.type] });
      await s.store.notifications.fanout.markDone(tx, row.seq);
    }
    return rows.length;
  });
}

async function notify(
  tx: Tx,
  s: Services,
  mailDomain: string,
  e: { seq: number; type: string; owner_uuid: string; payload: string; created_at: string; notification: NotificationType },
): Promise<void> {
  const { owner_uuid: owner, notification: type } = e;
  const account = await s.store.accounts.users.emailOf(tx, owner);
  if (account === undefined) return;
  await ensureMainContact(tx, s, owner);
  const details = String((JSON.parse(e.payload) as { details?: unknown }).details ?? '');
  const subject = SUBJECTS[type];
  const accountOnly = ACCOUNT_ONLY.has(type);
  const contacts = (await contactsOf(tx, s.store, owner)).filter((c) => !accountOnly || c.main);
  const ids = contacts.map((c) => c.uuid);
  const id = s.ids.uuid();

  const byMail = await wants(tx, s.store, ids, type, 'email');
  const mail = renderEmail({ subject, details, type, at: e.created_at, account });
  for (const c of contacts)
    if (byMail.has(c.uuid))
      await enqueue(tx, s, { owner, channel: 'email', target: c.uuid, address: c.email, type, messageId: `<${id}.${c.uuid}@${mailDomain}>`, content: mail });
  if (accountOnly) return;

  const text = details || `${subject}.`;
  const inFeed = await wants(tx, s.store, ids, type, 'api');
  const now = isoTimestamp(s.clock.now());
  for (const c of contacts)
    if (inFeed.has(c.uuid))
      await s.store.notifications.feed.insert(tx, {
        uuid: s.ids.uuid(),
        owner_uuid: owner,
        contact_uuid: c.uuid,
        type,
        subject,
        text,
        created_at: e.created_at || now,
        read_at: null,
      });

  for (const hook of await s.store.resources.owned(tx, WEBHOOKS, { owner })) {
    const only = (hook.body.types as string[] | undefined) ?? [];
    if (only.length && !only.includes(type)) continue;
    const deliveryId = `${id}.${hook.uuid}`;
    await enqueue(tx, s, {
      owner,
      channel: 'webhook',
      target: hook.uuid,
      address: String(hook.body.url),
      type,
      messageId: deliveryId,
      content: { body: webhookBody({ id: deliveryId, type, subject, text, created_at: e.created_at, account: owner, event: e.type }) },
    });
  }
}
