import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findUserByEmail } from '../../src/resources/users/users.js';
import { Client } from '../helpers/client.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { basic, curl, linkIn, parseMail, smtpSink } from '../helpers/auth.js';

let srv: TestServer;
let sink: Awaited<ReturnType<typeof smtpSink>>;

before(async () => {
  sink = await smtpSink();
  srv = await startServer({ 'rate-limits': 'off', 'smtp-url': sink.url, 'promo-codes': 'WELCOME, Spring24' });
});
after(async () => {
  await srv.close();
  await sink.close();
});

const CREATE = '/api/2.0/accounts/action/?do=create';
let n = 0;
const fresh = () => `signup${++n}-${Date.now()}@example.com`;

/** GET/POST the confirmation page (an HTML form, as a browser would send it). Outside /api/2.0/, so plain fetch. */
async function page(link: string, form?: Record<string, string>) {
  const res = await fetch(link, {
    method: form ? 'POST' : 'GET',
    ...(form ? { body: new URLSearchParams(form).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } } : {}),
  });
  return { status: res.status, headers: Object.fromEntries(res.headers), text: await res.text() };
}

/**
 * The next sign-up e-mail to `email`: sign-up queues it for the notification worker (a delivery row), so the
 * worker runs first; the welcome notification's e-mail (new_account) is passed over.
 */
async function signupMail(email: string) {
  await srv.app.notifier.runDue();
  for (;;) {
    const mail = await sink.next(email);
    if (!/^Welcome/.test(mail.subject)) return mail;
  }
}

/** The .eml files of a server's outbox folder, after its notification worker ran, without welcome messages. */
async function outboxMails(server: TestServer, dir: string) {
  await server.app.notifier.runDue();
  return readdirSync(dir)
    .filter((f) => f.endsWith('.eml'))
    .map((f) => parseMail(readFileSync(join(dir, f), 'utf8')))
    .filter((m) => !/^Welcome/.test(m.subject));
}

async function signUp(email: string, promo: unknown = null) {
  const res = await srv.anon().post(CREATE, { email, promo });
  assert.equal(res.status, 200, res.text);
  return res;
}

describe('sign-up through to a working password (real SMTP)', () => {
  test('create -> e-mail with a one-time link -> HTML form -> password -> Basic and Digest work', async () => {
    const email = fresh();
    const res = await signUp(email);
    assert.deepEqual(Object.keys(res.json).sort(), ['success', 'uuid']);
    assert.equal(res.json.success, true);
    assert.match(res.json.uuid, /^[0-9a-f-]{36}$/);

    const row = await findUserByEmail(srv.services, email);
    assert.equal(row?.uuid, res.json.uuid);
    assert.equal(row?.state, 'NEW_USER');
    assert.equal(row?.password_hash, null);

    const mail = await signupMail(email);
    assert.deepEqual(mail.to, [email]);
    assert.match(mail.subject, /confirm/i);
    const link = linkIn(mail.text);
    assert.ok(link, mail.text);
    assert.ok(link.startsWith(`${srv.base}/accounts/confirm/`), link);

    // Not usable yet.
    assert.equal((await srv.anon().get('profile/', { authorization: basic(email, '') })).status, 401);

    const form = await page(link);
    assert.equal(form.status, 200);
    assert.match(String(form.headers['content-type']), /^text\/html/);
    assert.equal(form.headers['cache-control'], 'no-store');
    assert.equal(form.headers['referrer-policy'], 'no-referrer');
    assert.match(form.text, /<form method="post">/);
    assert.ok(form.text.includes(email));

    const short = await page(link, { password: 'short', password2: 'short' });
    assert.equal(short.status, 400);
    assert.match(String(short.headers['content-type']), /^text\/html/);
    const differ = await page(link, { password: 'long-enough-1', password2: 'long-enough-2' });
    assert.equal(differ.status, 400);
    const none = await page(link, {});
    assert.equal(none.status, 400);

    const done = await page(link, { password: 'my-new-password', password2: 'my-new-password' });
    assert.equal(done.status, 200, done.text);
    assert.match(String(done.headers['content-type']), /^text\/html/);

    const me = new Client(srv.base, { email, password: 'my-new-password' });
    const profile = await me.get('profile/');
    assert.equal(profile.status, 200);
    assert.equal(profile.json.uuid, res.json.uuid);
    assert.equal(profile.json.state, 'REGULAR');
    const digest = await curl(['--digest', '-u', `${email}:my-new-password`, `${srv.base}/api/2.0/profile/`]);
    assert.deepEqual(digest.status, [200]);

    // The link is single-use.
    assert.equal((await page(link)).status, 404);
    assert.equal((await page(link, { password: 'another-password', password2: 'another-password' })).status, 404);
    assert.equal((await me.get('profile/')).status, 200);
  });

  test('the token is stored hashed', async () => {
    const email = fresh();
    await signUp(email);
    const link = linkIn((await signupMail(email)).text)!;
    const token = link.split('/').pop()!;
    const rows = await srv.services.store.db.selectFrom('signup_tokens').selectAll().execute();
    assert.ok(rows.length > 0);
    for (const r of rows) assert.notEqual(r.token_hash, token);
  });

  test('links expire after 24 hours (injected clock)', async () => {
    const email = fresh();
    await signUp(email);
    const link = linkIn((await signupMail(email)).text)!;
    srv.clock.advance(24 * 3600_000 - 60_000);
    assert.equal((await page(link)).status, 200);
    srv.clock.advance(120_000);
    assert.equal((await page(link)).status, 404);
    assert.equal((await page(link, { password: 'my-new-password', password2: 'my-new-password' })).status, 404);
    assert.equal((await findUserByEmail(srv.services, email))?.password_hash, null);
  });

  test('malformed and unknown tokens: 404 HTML', async () => {
    for (const token of ['x', 'A'.repeat(43), '%3Cscript%3E']) {
      const res = await page(`${srv.base}/accounts/confirm/${token}`);
      assert.equal(res.status, 404, token);
      assert.match(String(res.headers['content-type']), /^text\/html/);
    }
  });
});

describe('sign-up never reveals an existing account', () => {
  test('the same e-mail again: the same 200 shape, a different uuid, no duplicate; the owner gets a notice, not a link', async () => {
    const email = fresh();
    const first = await signUp(email);
    const link = linkIn((await signupMail(email)).text)!;
    assert.equal((await page(link, { password: 'owner-password', password2: 'owner-password' })).status, 200);

    const again = await signUp(email.toUpperCase());
    assert.deepEqual(Object.keys(again.json).sort(), ['success', 'uuid']);
    assert.equal(again.json.success, true);
    assert.match(again.json.uuid, /^[0-9a-f-]{36}$/);
    assert.notEqual(again.json.uuid, first.json.uuid);
    const rows = await srv.services.store.db.selectFrom('users').select('uuid').where('email', '=', email).execute();
    assert.equal(rows.length, 1);

    const notice = await signupMail(email);
    assert.equal(linkIn(notice.text), null);
    assert.match(notice.text, /already has an account/);
    // Nothing about the account changed.
    const me = new Client(srv.base, { email, password: 'owner-password' });
    assert.equal((await me.get('profile/')).status, 200);
  });

  test('signing up again while the first link is unused sends a new link and retires the old one', async () => {
    const email = fresh();
    const first = await signUp(email);
    const old = linkIn((await signupMail(email)).text)!;
    const second = await signUp(email);
    assert.notEqual(second.json.uuid, first.json.uuid);
    const renewed = linkIn((await signupMail(email)).text)!;
    assert.notEqual(renewed, old);
    assert.equal((await page(old)).status, 404);
    assert.equal((await page(renewed, { password: 'second-try-pw', password2: 'second-try-pw' })).status, 200);
    const me = new Client(srv.base, { email, password: 'second-try-pw' });
    assert.equal((await me.get('profile/')).json.uuid, first.json.uuid);
  });

  test('concurrent sign-ups with one e-mail create one account, and all answer 200', async () => {
    const email = fresh();
    const results = await Promise.all(Array.from({ length: 5 }, () => srv.anon().post(CREATE, { email })));
    for (const r of results) {
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.success, true);
    }
    const rows = await srv.services.store.db.selectFrom('users').select('uuid').where('email', '=', email).execute();
    assert.equal(rows.length, 1);
  });
});

describe('sign-up validation', () => {
  test('invalid or missing e-mail: 400 on email', async () => {
    for (const body of [{ email: 'not-an-email' }, { email: '' }, { email: 42 }, { email: null }, {}, { email: `${'a'.repeat(250)}@example.com` }]) {
      const res = await srv.anon().post(CREATE, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json[0].error_type, 'validation');
      assert.equal(res.json[0].error_point, 'email');
    }
    const notObject = await srv.anon().post(CREATE, ['a@example.com']);
    assert.equal(notObject.status, 400);
  });

  test('promo codes: unknown is 400 on promo; configured ones (any case), null, absent are fine', async () => {
    for (const promo of ['NOPE', 7, ['WELCOME'], { code: 'WELCOME' }]) {
      const res = await srv.anon().post(CREATE, { email: fresh(), promo });
      assert.equal(res.status, 400, JSON.stringify(promo));
      assert.equal(res.json[0].error_point, 'promo');
    }
    for (const promo of ['WELCOME', 'welcome', 'SPRING24', null, undefined]) {
      const res = await srv.anon().post(CREATE, { email: fresh(), promo });
      assert.equal(res.status, 200, JSON.stringify(promo));
    }
  });

  test('no credentials needed; credentials are ignored; an XML body works', async () => {
    const u = await srv.user();
    const res = await u.post(CREATE, { email: fresh() });
    assert.equal(res.status, 200);
    const email = fresh();
    const xml = `<?xml version="1.0"?><request><email>${email}</email><promo type="null"/></request>`;
    const viaXml = await srv.anon().request('POST', CREATE, { raw: xml, headers: { 'content-type': 'application/xml' } });
    assert.equal(viaXml.status, 200, viaXml.text);
    assert.ok(await findUserByEmail(srv.services, email));
  });
});

describe('sign-up without SMTP: the outbox folder', () => {
  test('the message is written as an .eml file with a working link', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-outbox-'));
    const local = await startServer({ 'rate-limits': 'off', outbox: dir });
    try {
      const email = fresh();
      const res = await local.anon().post(CREATE, { email });
      assert.equal(res.status, 200);
      const mails = await outboxMails(local, dir);
      assert.equal(mails.length, 1);
      const [mail] = mails;
      assert.equal(mail.to, email);
      const link = linkIn(mail.text);
      assert.ok(link?.startsWith(`${local.base}/accounts/confirm/`), mail.text);
      assert.equal((await page(link!, { password: 'from-the-outbox', password2: 'from-the-outbox' })).status, 200);
      const me = new Client(local.base, { email, password: 'from-the-outbox' });
      assert.equal((await me.get('profile/')).status, 200);
    } finally {
      await local.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('--public-url is the base of the link', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'stratus-outbox-'));
    const local = await startServer({ 'rate-limits': 'off', outbox: dir, 'public-url': 'https://cloud.example.com/' });
    try {
      await local.anon().post(CREATE, { email: fresh() });
      const [mail] = await outboxMails(local, dir);
      const link = linkIn(mail.text);
      assert.match(link ?? '', /^https:\/\/cloud\.example\.com\/accounts\/confirm\/[A-Za-z0-9_-]{43}$/);
    } finally {
      await local.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
