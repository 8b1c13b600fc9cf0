import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHmac } from 'node:crypto';
import { startServer, type TestServer } from '../helpers/server.js';
import { Client } from '../helpers/client.js';
import { golden, sameShape } from '../helpers/golden.js';
import { expectError } from '../helpers/errors.js';
import { smtpSink } from '../helpers/auth.js';
import { record } from '../../src/core/events.js';
import { EVENT_NOTIFICATIONS, NOTIFICATION_TYPES } from '../../src/resources/notifications/types.js';
import { onlyOn } from '../helpers/skips.js';

let srv: TestServer;
let sink: Awaited<ReturnType<typeof smtpSink>>;
let hooks: Awaited<ReturnType<typeof receiver>>;

/** A webhook receiver on loopback that keeps what it gets; `failNext` answers 500 that many times. */
async function receiver() {
  const got: { headers: http.IncomingHttpHeaders; body: string }[] = [];
  const state = { failNext: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (state.failNext > 0) {
        state.failNext--;
        res.writeHead(500).end();
        return;
      }
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}/hook`, got, state, close: () => new Promise<void>((r) => server.close(() => r())) };
}

before(async () => {
  sink = await smtpSink();
  hooks = await receiver();
  // The receiver is on loopback: this server allows private webhook destinations (local development).
  srv = await startServer({ 'smtp-url': sink.url, 'webhooks-allow-private': 'true' });
});
after(async () => {
  await srv.close();
  await sink.close();
  await hooks.close();
});

/** Records an event as a producer (billing, subscriptions) would, in a transaction of the server's services. */
async function produce(owner: string, eventType: string, details = `Details of ${eventType}`) {
  const [category, action] = eventType.split('.');
  await srv.services.store.transaction((tx) => record(tx, srv.services, { category, action, uuid: owner, owner, actor: null, details }));
}

const deliver = () => srv.app.notifier.runDue();
const mailsTo = (addr: string) => sink.mails.filter((m) => m.to.includes(addr));

async function contacts(c: Client) {
  const res = await c.get('notification_contacts/?limit=0');
  assert.equal(res.status, 200, res.text);
  return res.json.objects as Record<string, any>[];
}

describe('notification contacts', () => {
  test('the main contact exists, follows the account e-mail, cannot be deleted; others are created, changed, deleted', async () => {
    const u = await srv.user();
    const list = await contacts(u);
    assert.equal(list.length, 1);
    sameShape({ ...list[0] }, golden('response_notification_contacts_list_1').objects[0]);
    assert.equal(list[0].main, true);
    assert.equal(list[0].email, u.email);
    assert.equal(list[0].phone, '');
    expectError(await u.delete(`notification_contacts/${list[0].uuid}/`), 403, 'permission', 'main');

    const made = await u.post('notification_contacts/', { objects: [{ email: 'some_email_2@example.com', name: 'Some Name 2', phone: '+1 123 555 1234' }] });
    assert.equal(made.status, 201, made.text);
    sameShape(made.json, golden('response_notification_contacts_create'));
    const c = made.json.objects[0];
    assert.equal(c.main, null);
    assert.equal(c.phone, '+11235551234');

    const put = await u.put(`notification_contacts/${c.uuid}/`, { email: 'some_email_2@example.com', name: 'Some New Name' });
    assert.equal(put.status, 200, put.text);
    sameShape(put.json, golden('response_notification_contacts_update'));
    assert.equal(put.json.pk, c.uuid);
    assert.equal(put.json.name, 'Some New Name');

    expectError(await u.post('notification_contacts/', { email: 'not-an-address' }), 400, 'validation', 'email');
    expectError(await u.post('notification_contacts/', { name: 'x' }), 400, 'validation', 'email');
    assert.equal((await contacts(u)).length, 2);

    const xml = await u.get('notification_contacts/?format=xml');
    assert.equal(xml.status, 200);
    assert.match(xml.headers['content-type'] ?? '', /xml/);
    assert.equal((await u.get('notification_contacts/schema/')).status, 200);

    assert.equal((await u.delete(`notification_contacts/${c.uuid}/`)).status, 204);
    assert.equal((await contacts(u)).length, 1);

    // Another user cannot see it.
    const other = await srv.user();
    expectError(await other.get(`notification_contacts/${list[0].uuid}/`), 404, 'notexist', null);
  });
});

describe('notification preferences', () => {
  test('one row per contact, medium and type; PUT one or a list: 202 with only those rows', async () => {
    const u = await srv.user();
    const [main] = await contacts(u);
    const res = await u.get('notification_preferences/?limit=0');
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.meta.total_count, NOTIFICATION_TYPES.length * 2);
    sameShape(res.json.objects[0], golden('response_notification_preferences_list_1').objects[0]);
    for (const t of NOTIFICATION_TYPES) for (const m of ['email', 'api']) assert.ok(res.json.objects.some((p: any) => p.type === t && p.medium === m));

    const one = { contact: main.resource_uri, medium: 'email', type: 'trial_expire', value: false };
    const put = await u.put('notification_preferences/', one);
    assert.equal(put.status, 202, put.text);
    assert.deepEqual(put.json, { objects: [one] });
    sameShape(put.json, golden('response_notification_preferences_update'));

    const many = [
      { contact: main.resource_uri, medium: 'email', type: 'payment_withheld', value: false },
      { contact: main.resource_uri, medium: 'api', type: 'payment_failed', value: false },
    ];
    const put2 = await u.put('notification_preferences/', many);
    assert.equal(put2.status, 202, put2.text);
    assert.deepEqual(put2.json.objects, many);
    const after = (await u.get('notification_preferences/?limit=0')).json.objects;
    const value = (m: string, t: string) => after.find((p: any) => p.medium === m && p.type === t).value;
    assert.equal(value('email', 'trial_expire'), false);
    assert.equal(value('email', 'payment_withheld'), false);
    assert.equal(value('api', 'payment_failed'), false);
    assert.equal(value('email', 'payment_failed'), true);

    // Bad rows: 400 naming the field, nothing changes (the first, valid row of the list is not applied either).
    const flip = { contact: main.resource_uri, medium: 'email', type: 'payment', value: false };
    expectError(await u.put('notification_preferences/', [flip, { ...flip, type: 'nope' }]), 400, 'validation', 'objects[1].type');
    expectError(await u.put('notification_preferences/', { ...flip, medium: 'sms' }), 400, 'validation', 'medium');
    expectError(await u.put('notification_preferences/', { ...flip, value: 'yes' }), 400, 'validation', 'value');
    const stranger = (await contacts(await srv.user()))[0];
    expectError(await u.put('notification_preferences/', { ...flip, contact: stranger.resource_uri }), 400, 'validation', 'contact');
    const again = (await u.get('notification_preferences/?limit=0')).json.objects;
    assert.equal(again.find((p: any) => p.medium === 'email' && p.type === 'payment').value, true);
  });
});

describe('delivery', () => {
  test('every mapped event reaches exactly the contacts, feed and webhooks its preferences allow', async () => {
    const u = await srv.user();
    const [main] = await contacts(u);
    const second = (await u.post('notification_contacts/', { email: `second-${u.uuid}@example.com`, name: 'Second' })).json.objects[0];
    const hook = (await u.post('webhooks/', { url: hooks.url, types: ['out_of_money_soon', 'payment'] })).json.objects[0];
    assert.equal(typeof hook.secret, 'string');
    // The second contact wants no e-mail about payments, the main contact no feed entry about them.
    await u.put('notification_preferences/', [
      { contact: second.resource_uri, medium: 'email', type: 'payment', value: false },
      { contact: main.resource_uri, medium: 'api', type: 'payment', value: false },
    ]);

    const events = Object.keys(EVENT_NOTIFICATIONS).filter((e) => e !== 'accounts.reset_password' && e !== 'accounts.new_account');
    for (const e of events) await produce(u.uuid, e);
    const before = hooks.got.length;
    await deliver();

    for (const e of events) {
      const type = EVENT_NOTIFICATIONS[e];
      const subjectOf = (m: { raw: string }) => m.raw.includes(`Details of ${e}\r\n`);
      const toMain = mailsTo(u.email).filter(subjectOf);
      const toSecond = mailsTo(second.email).filter(subjectOf);
      assert.equal(toMain.length, 1, `${e}: one mail to the main contact`);
      assert.equal(toSecond.length, type === 'payment' ? 0 : 1, `${e}: mails to the second contact`);
      assert.match(toMain[0].raw, /Message-ID:\s*<[^>]+@stratus\.local>/i);
      assert.match(toMain[0].raw, /text\/html/);
    }
    const feed = await u.get('notifications/?limit=0');
    assert.equal(feed.status, 200);
    // Two contacts, every type, minus the main contact's payment entry.
    assert.equal(feed.json.meta.total_count, events.length * 2 - 1);
    const got = hooks.got.slice(before).map((h) => ({ ...h, json: JSON.parse(h.body) }));
    assert.deepEqual(got.map((h) => h.json.type).sort(), ['out_of_money_soon', 'payment']);
    for (const h of got) {
      const sig = String(h.headers['x-stratus-signature']);
      const t = /t=(\d+)/.exec(sig)![1];
      assert.equal(sig, `t=${t},v1=${createHmac('sha256', hook.secret).update(`${t}.${h.body}`).digest('hex')}`);
    }
    // Fanned out once: another pass sends nothing new.
    const count = sink.mails.length;
    await deliver();
    assert.equal(sink.mails.length, count);
  });

  test('webhook failures are retried with backoff, visible to the user; the test action delivers', async () => {
    const u = await srv.user();
    const hook = (await u.post('webhooks/', { url: hooks.url })).json.objects[0];
    hooks.state.failNext = 1;
    const before = hooks.got.length;
    const res = await u.post(`webhooks/${hook.uuid}/action/?do=test`, {});
    assert.equal(res.status, 202, res.text);
    await deliver();
    let seen = (await u.get(`webhooks/${hook.uuid}/`)).json;
    assert.equal(seen.last_status, 'failing');
    assert.match(seen.last_error, /500/);
    assert.equal(hooks.got.length, before);
    const log = (await u.get(`webhooks/${hook.uuid}/deliveries/`)).json.objects;
    assert.equal(log[0].state, 'pending');
    assert.equal(log[0].attempts, 1);
    await srv.advance(5_000);
    await deliver();
    seen = (await u.get(`webhooks/${hook.uuid}/`)).json;
    assert.equal(seen.last_status, 'ok');
    assert.equal(seen.last_error, null);
    assert.equal(hooks.got.length, before + 1);
    assert.equal(JSON.parse(hooks.got.at(-1)!.body).type, 'test');
    expectError(await u.post('webhooks/', { url: 'ftp://x' }), 400, 'validation', 'url');
    expectError(await u.post('webhooks/', { url: hooks.url, types: ['nope'] }), 400, 'validation', 'types');
  });

  test('e-mail failures are retried until the SMTP server takes the message', async () => {
    // A second server whose SMTP server refuses connections: the delivery stays, counted and explained.
    const broken = await startServer({ 'smtp-url': 'smtp://127.0.0.1:1' }, undefined, { clock: srv.clock });
    try {
      const v = await broken.user();
      await broken.services.store.transaction((tx) =>
        record(tx, broken.services, { category: 'billing', action: 'payment', uuid: v.uuid, owner: v.uuid, actor: null, details: 'x' }),
      );
      await broken.app.notifier.runDue();
      const row = await broken.services.store.db.selectFrom('notification_deliveries').selectAll().where('owner_uuid', '=', v.uuid).executeTakeFirstOrThrow();
      assert.equal(row.state, 'pending');
      assert.equal(row.attempts, 1);
      assert.ok(row.last_error);
    } finally {
      await broken.close();
    }
  });
});

describe('several API processes (PostgreSQL)', () => {
  test('two processes working the same outbox fan out and send each notification once', { skip: onlyOn('postgres') }, async () => {
    const second = await startServer({ db: srv.dbUrl, 'smtp-url': sink.url }, undefined, { clock: srv.clock });
    try {
      const users = await Promise.all([srv.user(), srv.user(), srv.user()]);
      const events = ['billing.payment', 'billing.stop_servers', 'subscriptions.renewal_success', 'billing.out_of_money_soon'];
      for (const u of users) for (const e of events) await produce(u.uuid, e, `Twice? ${e}`);
      await Promise.all([srv.app.notifier.runDue(), second.app.notifier.runDue(), srv.app.notifier.runDue(), second.app.notifier.runDue()]);
      for (const u of users) {
        const ids = mailsTo(u.email).map((m) => /Message-ID:\s*(<[^>]+>)/i.exec(m.raw)?.[1]);
        assert.equal(ids.length, events.length, `${u.email}: one mail per event`);
        assert.equal(new Set(ids).size, events.length);
        assert.equal((await u.get('notifications/?limit=0')).json.meta.total_count, events.length);
      }
    } finally {
      await second.close();
    }
  });
});

describe('accounts', () => {
  test('sign-up records new_account; reset_password mails a one-time link to the account only, never revealing addresses', async () => {
    const email = `reset-${Date.now()}@example.com`;
    const anon = srv.anon();
    assert.equal((await anon.post('accounts/action/?do=create', { email })).status, 200);
    await deliver();
    const welcome = mailsTo(email).filter((m) => /Welcome/.test(m.subject));
    assert.equal(welcome.length, 1);

    const u = await srv.user();
    await u.post('notification_contacts/', { email: `other-${u.uuid}@example.com` });
    const a = await anon.post('accounts/action/?do=reset_password', { email: u.email });
    const b = await anon.post('accounts/action/?do=reset_password', { email: 'nobody-here@example.com' });
    assert.equal(a.status, 200);
    assert.deepEqual(a.json, b.json);
    expectError(await anon.post('accounts/action/?do=reset_password', { email: 'x' }), 400, 'validation', 'email');
    await deliver();
    const mail = mailsTo(u.email).find((m) => /Reset/.test(m.subject));
    assert.ok(mail);
    assert.equal(mailsTo(`other-${u.uuid}@example.com`).filter((m) => /Reset/.test(m.subject)).length, 0);
    const link = /https?:\/\/\S+\/accounts\/confirm\/[A-Za-z0-9_-]+/.exec(mail.text.replace(/=\r?\n/g, ''))?.[0];
    assert.ok(link, mail.text);
    const form = (password: string) =>
      fetch(link, {
        method: 'POST',
        body: new URLSearchParams({ password, password2: password }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
    const set = await form('brand-new-pass');
    assert.ok(set.status < 400, await set.text());
    assert.ok((await form('other-new-pass')).status >= 400, 'the link works once');
    const me = new Client(srv.base, { email: u.email, password: 'brand-new-pass' });
    assert.equal((await me.get('profile/')).status, 200);
    // Not in the feed or the audit log (the link is a secret).
    assert.ok(!(await me.get('logs/?limit=0')).text.includes('/accounts/confirm/'));
    assert.equal((await me.get('notifications/?type=reset_password')).json.meta.total_count, 0);
  });
});
