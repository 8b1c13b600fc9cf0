import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { record } from '../../src/core/events.js';
import { Notifier } from '../../src/notify/worker.js';
import type { Mailer, MailMessage } from '../../src/resources/notifications/mail.js';
import { listQuery, openServices } from '../helpers/services.js';

/**
 * The notification fan-out, called through the worker with the services and no HTTP: an event of an
 * account reaches, on each medium, exactly the contacts of that account whose preferences want its type
 * (e-mail to `email`, the feed to `api`); a contact that turned a type off still gets the other types, and
 * another account's contacts get nothing.
 */
async function open(t: TestContext) {
  const fx = await openServices();
  const sent: MailMessage[] = [];
  const mailer: Mailer = {
    kind: 'outbox',
    send: async (msg) => (sent.push(msg), { via: 'outbox', file: '' }),
    close: () => {},
  };
  const notifier = new Notifier(fx.services, mailer);
  t.after(async () => {
    await notifier.stop();
    await fx.close();
  });
  return { fx, sent, notifier };
}

/** A billing event of `owner`'s account, recorded as billing records it (its own transaction). */
async function billingEvent(fx: Awaited<ReturnType<typeof open>>['fx'], owner: string, action: string, details: string): Promise<void> {
  await fx.services.store.transaction((tx) => record(tx, fx.services, { action, category: 'Billing', uuid: '', owner, actor: null, details }));
}

test('an event reaches the contacts whose preferences want its type, on each medium, and no one else', async (t) => {
  const { fx, sent, notifier } = await open(t);
  const contacts = fx.collection('notification_contacts').service;
  const preferences = fx.collection('notification_preferences').service;
  const feed = fx.collection('notifications').service;

  const alice = await fx.user('alice-fanout@example.com');
  const bob = await fx.user('bob-fanout@example.com');
  const made = (await contacts.create!(alice, [
    { email: 'no-mail@example.com', name: 'No mail' },
    { email: 'no-feed@example.com', name: 'No feed' },
  ])) as Record<string, unknown>[];
  const [noMail, noFeed] = made.map((c) => String(c.uuid));
  const main = ((await contacts.list(alice, listQuery())).objects.find((c) => c.main === true) as { uuid: string }).uuid;
  await contacts.create!(bob, [{ email: 'bobs-friend@example.com' }]);

  // `payment` off by e-mail for one contact, off in the feed for another; `stop_servers` left on for both.
  await preferences.updateMany!(alice, [
    { contact: noMail, medium: 'email', type: 'payment', value: false },
    { contact: noFeed, medium: 'api', type: 'payment', value: false },
  ]);

  await billingEvent(fx, alice.caller.uuid, 'payment', 'We received 10.00 EUR.');
  await notifier.runDue();

  assert.deepEqual(sent.map((m) => m.to).sort(), ['alice-fanout@example.com', 'no-feed@example.com'], 'e-mail: every contact but the one that turned it off');
  for (const m of sent) {
    assert.equal(m.subject, 'Payment received');
    assert.match(m.text, /We received 10\.00 EUR\./);
  }
  const entries = (await feed.list(alice, listQuery())).objects as { contact: string; type: string; text: string }[];
  assert.deepEqual(entries.map((e) => e.contact.split('/').at(-2)).sort(), [main, noMail].sort(), 'feed: every contact but the one that turned it off');
  assert.ok(entries.every((e) => e.type === 'payment' && e.text === 'We received 10.00 EUR.'));
  assert.equal((await feed.list(bob, listQuery())).total, 0, "another account's feed gets nothing");

  // A preference is per type: the same contacts get a type they did not turn off.
  sent.length = 0;
  await billingEvent(fx, alice.caller.uuid, 'stop_servers', 'Your servers were stopped.');
  await notifier.runDue();
  assert.deepEqual(sent.map((m) => m.to).sort(), ['alice-fanout@example.com', 'no-feed@example.com', 'no-mail@example.com']);
  const stops = (await feed.list(alice, listQuery({ filters: { type: 'stop_servers' } }))).objects;
  assert.equal(stops.length, 3);

  // Bob's event reaches Bob's contacts only.
  sent.length = 0;
  await billingEvent(fx, bob.caller.uuid, 'payment', 'We received 5.00 EUR.');
  await notifier.runDue();
  assert.deepEqual(sent.map((m) => m.to).sort(), ['bob-fanout@example.com', 'bobs-friend@example.com']);
  assert.equal((await feed.list(alice, listQuery())).total, 2 + 3, "Alice's feed is unchanged");
});

test('the feed (a kind over its own table): newest first, `read` and `type` filters, read marks, private to its owner', async (t) => {
  const { fx, notifier } = await open(t);
  const feed = fx.collection('notifications').service;
  const alice = await fx.user();
  const bob = await fx.user();
  for (const [action, details] of [
    ['payment', 'first'],
    ['stop_servers', 'second'],
    ['payment', 'third'],
  ])
    await billingEvent(fx, alice.caller.uuid, action, details);
  await notifier.runDue();
  const texts = async (filters: Record<string, string | string[]> = {}) => (await feed.list(alice, listQuery({ filters }))).objects.map((o) => o.text);
  assert.deepEqual(await texts(), ['third', 'second', 'first']);
  assert.deepEqual(await texts({ type: 'payment' }), ['third', 'first']);
  const [third] = (await feed.list(alice, listQuery({ limit: 1 }))).objects as { uuid: string }[];
  assert.equal(((await feed.update!(alice, third.uuid, { read: true })) as Record<string, unknown>).read, true);
  await assert.rejects(feed.update!(alice, third.uuid, { read: 'x' }), (e: { status?: number; point?: string }) => e.status === 400 && e.point === 'read');
  assert.deepEqual(
    (await feed.list(alice, listQuery({ limit: 2 }))).objects.map((o) => o.text),
    ['third', 'second'],
  );
  assert.deepEqual(await texts({ read: 'true' }), ['third']);
  assert.deepEqual(await texts({ read: ['False'] }), ['second', 'first']);
  assert.deepEqual(await texts({ read: ['1', '0'] }), ['third', 'second', 'first'], 'both read and unread: no condition');
  assert.deepEqual(await texts({ read: 'maybe' }), ['third', 'second', 'first'], 'neither: no condition');
  assert.equal((await feed.get(alice, third.uuid)).read, true);
  await assert.rejects(feed.get(bob, third.uuid), (e: { status?: number }) => e.status === 404);
  await assert.rejects(feed.update!(bob, third.uuid, { read: false }), (e: { status?: number }) => e.status === 404);
});
