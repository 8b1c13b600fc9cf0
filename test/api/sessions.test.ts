import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { buildApp } from '../../src/app.js';
import { Client } from '../helpers/client.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { basic, headerLines, setCookies } from '../helpers/auth.js';

let srv: TestServer;

before(async () => {
  srv = await startServer({ 'rate-limits': 'off' });
});
after(() => srv.close());

const ACTION = '/api/2.0/accounts/action/';

/** Log in over HTTP; returns the cookies and a helper that sends requests in that session. */
async function login(email: string, password: string) {
  const res = await srv.anon().post(`${ACTION}?do=login`, { username: email, password });
  assert.equal(res.status, 200, res.text);
  const cookies = setCookies(res);
  const sessionid = cookies.get('sessionid')!.value;
  const csrftoken = cookies.get('csrftoken')!.value;
  const cookie = `csrftoken=${csrftoken}; sessionid=${sessionid}`;
  const send = (method: string, path: string, opts: { body?: unknown; csrf?: string | null; headers?: Record<string, string> } = {}) =>
    srv.anon().request(method, path, {
      body: opts.body,
      headers: { cookie, ...(opts.csrf === null ? {} : { 'x-csrftoken': opts.csrf ?? csrftoken }), ...opts.headers },
    });
  return { res, sessionid, csrftoken, cookie, send };
}

describe('cookie login (reference 4.3)', () => {
  test('do=login answers 200 {uuid} and sets csrftoken and sessionid as the real API does', async () => {
    const u = await srv.user();
    const { res, sessionid, csrftoken } = await login(u.email, u.password);
    assert.match(String(res.headers['content-type']), /application\/json/);
    assert.deepEqual(res.json, { uuid: u.uuid });
    assert.equal(headerLines(res, 'set-cookie').length, 2);
    const cookies = setCookies(res);
    assert.match(sessionid, /^[0-9a-f]{32}$/);
    assert.match(csrftoken, /^[A-Za-z0-9]{32}$/);
    const s = cookies.get('sessionid')!.attrs;
    assert.equal(s['max-age'], '1209600');
    assert.equal(s.path, '/');
    assert.equal(s.httponly, true);
    assert.ok(typeof s.expires === 'string' && !Number.isNaN(Date.parse(s.expires)));
    const c = cookies.get('csrftoken')!.attrs;
    assert.equal(c['max-age'], '31449600');
    assert.equal(c.path, '/');
    assert.equal(c.httponly, undefined, 'scripts must be able to read the CSRF token');
  });

  test('an XML body logs in too; the e-mail is case-insensitive', async () => {
    const u = await srv.user();
    const xml = `<?xml version="1.0" encoding="utf-8"?><request><username>${u.email.toUpperCase()}</username><password>${u.password}</password></request>`;
    const res = await srv.anon().request('POST', `${ACTION}?do=login`, { raw: xml, headers: { 'content-type': 'application/xml' } });
    assert.equal(res.status, 200, res.text);
    assert.ok(setCookies(res).get('sessionid'));
  });

  test('bad credentials: 401 with challenges and no cookies; missing or non-string fields: 400 on the field', async () => {
    const u = await srv.user();
    for (const body of [
      { username: u.email, password: 'wrong-password' },
      { username: 'nobody@example.com', password: u.password },
    ]) {
      const res = await srv.anon().post(`${ACTION}?do=login`, body);
      assert.equal(res.status, 401);
      assert.equal(headerLines(res, 'set-cookie').length, 0);
      assert.equal(headerLines(res, 'www-authenticate').length, 2);
      assert.ok(Array.isArray(res.json));
    }
    for (const [body, point] of [
      [{ username: u.email }, 'password'],
      [{ password: u.password }, 'username'],
      [{ username: 42, password: u.password }, 'username'],
      [{ username: u.email, password: ['x'] }, 'password'],
      [undefined, 'username'],
    ] as const) {
      const res = await srv.anon().post(`${ACTION}?do=login`, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.json[0].error_type, 'validation');
      assert.equal(res.json[0].error_point, point);
    }
    const array = await srv.anon().post(`${ACTION}?do=login`, [1, 2]);
    assert.equal(array.status, 400);
  });

  test('a user without a password (sign-up not finished) cannot log in', async () => {
    const { createUser } = await import('../../src/resources/users/users.js');
    const row = await createUser(srv.services, { email: `pending-${Date.now()}@example.com`, state: 'NEW_USER' });
    const res = await srv.anon().post(`${ACTION}?do=login`, { username: row.email, password: '' });
    assert.equal(res.status, 401);
  });

  test('unknown or missing do: 400 on do; other methods: 405', async () => {
    for (const q of ['?do=frobnicate', '', '?do=']) {
      const res = await srv.anon().post(`${ACTION}${q}`, {});
      assert.equal(res.status, 400, q);
      assert.equal(res.json[0].error_point, 'do');
    }
    const get = await srv.anon().get(`${ACTION}?do=check_login`);
    assert.equal(get.status, 405);
    assert.equal(get.headers.allow, 'POST');
  });
});

describe('requests in a cookie session', () => {
  test('the sessionid cookie alone authenticates safe requests', async () => {
    const u = await srv.user();
    const s = await login(u.email, u.password);
    const res = await s.send('GET', '/api/2.0/profile/', { csrf: null });
    assert.equal(res.status, 200);
    assert.equal(res.json.uuid, u.uuid);
    // Only the session cookie is needed to be recognised.
    const onlySession = await srv.anon().get('/api/2.0/profile/', { cookie: `sessionid=${s.sessionid}` });
    assert.equal(onlySession.status, 200);
  });

  test('unsafe methods need X-CSRFToken equal to the session token: 403 permission otherwise', async () => {
    const u = await srv.user();
    const s = await login(u.email, u.password);
    const other = await login(u.email, u.password);
    for (const csrf of [null, '', 'x'.repeat(32), other.csrftoken]) {
      const res = await s.send('POST', '/api/2.0/tags/', { body: { name: 'nope' }, csrf });
      assert.equal(res.status, 403, String(csrf));
      assert.equal(res.json[0].error_type, 'permission');
      assert.equal(res.json[0].error_point, 'X-CSRFToken');
    }
    const created = await s.send('POST', '/api/2.0/tags/', { body: { name: 'with-csrf' } });
    assert.equal(created.status, 201, created.text);
    const uuid = created.json.objects[0].uuid;
    assert.equal((await s.send('PUT', `/api/2.0/tags/${uuid}/`, { body: { name: 'renamed' }, csrf: null })).status, 403);
    assert.equal((await s.send('PUT', `/api/2.0/tags/${uuid}/`, { body: { name: 'renamed' } })).status, 200);
    assert.equal((await s.send('DELETE', `/api/2.0/tags/${uuid}/`, { csrf: null })).status, 403);
    assert.equal((await s.send('DELETE', `/api/2.0/tags/${uuid}/`)).status, 204);
    // Nothing was created by the refused requests.
    const list = await u.get('tags/');
    assert.equal(list.json.meta.total_count, 0);
  });

  test('an Authorization header decides alone: a bad one is 401 even with a valid session cookie', async () => {
    const u = await srv.user();
    const s = await login(u.email, u.password);
    const res = await s.send('GET', '/api/2.0/profile/', { headers: { authorization: basic(u.email, 'wrong-password') } });
    assert.equal(res.status, 401);
    // Basic needs no CSRF token.
    const ok = await srv
      .anon()
      .request('POST', '/api/2.0/tags/', { body: { name: 'basic' }, headers: { authorization: basic(u.email, u.password), cookie: s.cookie } });
    assert.equal(ok.status, 201);
  });

  test('unknown, malformed or forged session ids: 401 with challenges', async () => {
    for (const cookie of ['sessionid=0123456789abcdef0123456789abcdef', 'sessionid=nope', 'sessionid=', 'csrftoken=abc', 'sessionid="quoted"; other=1']) {
      const res = await srv.anon().get('/api/2.0/profile/', { cookie });
      assert.equal(res.status, 401, cookie);
      assert.equal(headerLines(res, 'www-authenticate').length, 2);
    }
  });

  test('sessions live in the database: another API process on it serves the same session', async () => {
    const u = await srv.user();
    const s = await login(u.email, u.password);
    const other = await buildApp(srv.services);
    await other.listen({ host: '127.0.0.1', port: 0 });
    try {
      const there = new Client(`http://127.0.0.1:${(other.server.address() as { port: number }).port}`);
      const res = await there.get('/api/2.0/profile/', { cookie: s.cookie });
      assert.equal(res.status, 200);
      assert.equal(res.json.uuid, u.uuid);
      const created = await there.post('/api/2.0/tags/', { name: 'there' }, { cookie: s.cookie, 'x-csrftoken': s.csrftoken });
      assert.equal(created.status, 201);
    } finally {
      await other.close();
    }
  });

  test('the session table keeps only a hash of the session id', async () => {
    const u = await srv.user();
    const s = await login(u.email, u.password);
    const rows = await srv.services.store.db.selectFrom('sessions').selectAll().where('user_uuid', '=', u.uuid).execute();
    assert.equal(rows.length, 1);
    assert.notEqual(rows[0].id_hash, s.sessionid);
    assert.match(rows[0].id_hash, /^[0-9a-f]{64}$/);
  });
});

describe('check_login, logout, expiry', () => {
  test('check_login: 200 while logged in (cookie or Basic), 401 otherwise', async () => {
    const u = await srv.user();
    const s = await login(u.email, u.password);
    const yes = await s.send('POST', `${ACTION}?do=check_login`, { body: {}, csrf: null });
    assert.equal(yes.status, 200);
    assert.deepEqual(yes.json, {});
    const withUuid = await s.send('POST', `${ACTION}?do=check_login_with_return_uuid`, { body: {} });
    assert.deepEqual(withUuid.json, { uuid: u.uuid });
    const anon = await srv.anon().post(`${ACTION}?do=check_login`, {});
    assert.equal(anon.status, 401);
    const byBasic = await u.post(`${ACTION}?do=check_login`, {});
    assert.equal(byBasic.status, 200);
    const badBasic = await srv.anon().post(`${ACTION}?do=check_login`, {}, { authorization: basic(u.email, 'wrong-password') });
    assert.equal(badBasic.status, 401);
  });

  test('logout: needs the CSRF token, answers 200 {}, clears both cookies and ends the session', async () => {
    const u = await srv.user();
    const s = await login(u.email, u.password);
    const keep = await login(u.email, u.password);
    const refused = await s.send('POST', `${ACTION}?do=logout`, { body: {}, csrf: null });
    assert.equal(refused.status, 403);
    assert.equal((await s.send('GET', '/api/2.0/profile/')).status, 200, 'still logged in');

    const out = await s.send('POST', `${ACTION}?do=logout`, { body: {} });
    assert.equal(out.status, 200);
    assert.deepEqual(out.json, {});
    const cleared = setCookies(out);
    assert.equal(cleared.get('sessionid')?.attrs['max-age'], '0');
    assert.equal(cleared.get('csrftoken')?.attrs['max-age'], '0');

    assert.equal((await s.send('POST', `${ACTION}?do=check_login`, { body: {} })).status, 401);
    assert.equal((await s.send('GET', '/api/2.0/profile/')).status, 401);
    // Another session of the same user is untouched.
    assert.equal((await keep.send('GET', '/api/2.0/profile/')).status, 200);
    // Logging out without a session is harmless.
    assert.equal((await srv.anon().post(`${ACTION}?do=logout`, {})).status, 200);
    assert.equal((await srv.anon().post(`${ACTION}?do=logout`)).status, 200);
  });
});
