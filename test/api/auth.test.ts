import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import { Client } from '../helpers/client.js';
import { setPassword } from '../../src/resources/users/users.js';

let srv: TestServer;

before(async () => {
  srv = await startServer();
});
after(() => srv.close());

const basic = (user: string, pass: string) => 'Basic ' + Buffer.from(`${user}:${pass}`).toString('base64');

describe('HTTP Basic authentication', () => {
  test('missing credentials: 401 with a Basic challenge and an error array', async () => {
    const res = await srv.anon().get('tags/');
    assert.equal(res.status, 401);
    assert.match(String(res.headers['www-authenticate']), /^Basic realm="users"/);
    assert.ok(Array.isArray(res.json));
    assert.deepEqual(Object.keys(res.json[0]).sort(), ['error_message', 'error_point', 'error_type']);
  });

  test('wrong password, unknown user, malformed header: 401', async () => {
    const u = await srv.user();
    for (const header of [
      basic(u.email, 'wrong'),
      basic('nobody@example.com', u.password),
      basic(u.email, ''),
      'Basic !!!not-base64!!!',
      'Basic ' + Buffer.from('no-colon').toString('base64'),
      'Bearer abc',
      'Basic',
    ]) {
      const res = await srv.anon().get('tags/', { authorization: header });
      assert.equal(res.status, 401, header);
      assert.ok(res.headers['www-authenticate']);
    }
  });

  test('the right password works, e-mail case-insensitively, repeatedly (cached)', async () => {
    const u = await srv.user();
    for (let i = 0; i < 5; i++) {
      const res = await srv.anon().get('profile/', { authorization: basic(u.email.toUpperCase(), u.password) });
      assert.equal(res.status, 200);
      assert.equal(res.json.uuid, u.uuid);
    }
  });

  test('passwords may contain colons and Unicode', async () => {
    const u = await srv.user();
    await setPassword(srv.services, u.email, 'a:b:ç☁');
    const res = await srv.anon().get('profile/', { authorization: basic(u.email, 'a:b:ç☁') });
    assert.equal(res.status, 200);
  });

  test('a changed password takes effect at once: the old one is refused, the new one accepted', async () => {
    const u = await srv.user();
    assert.equal((await u.get('profile/')).status, 200);
    await setPassword(srv.services, u.email, 'brand-new-pw');
    assert.equal((await u.get('profile/')).status, 401);
    const fresh = new Client(srv.base, { email: u.email, password: 'brand-new-pw' });
    assert.equal((await fresh.get('profile/')).status, 200);
  });

  test('a password changed by another process is noticed once the cache entry goes stale', async () => {
    const u = await srv.user();
    assert.equal((await u.get('profile/')).status, 200);
    // Simulate another API process: change the stored hash behind this process's back.
    const other = await srv.services.store.db.selectFrom('users').select('password_hash').where('uuid', '=', u.uuid).executeTakeFirst();
    assert.ok(other?.password_hash);
    await srv.services.store.db.updateTable('users').set({ password_hash: 'scrypt$16384$8$1$AAAA$BBBB' }).where('uuid', '=', u.uuid).execute();
    srv.clock.advance(2_100);
    assert.equal((await u.get('profile/')).status, 401);
  });

  test('a user without a password (sign-up not finished) cannot log in', async () => {
    const { createUser } = await import('../../src/resources/users/users.js');
    const row = await createUser(srv.services, { email: `nopw-${Date.now()}@example.com` });
    const res = await srv.anon().get('profile/', { authorization: basic(row.email, '') });
    assert.equal(res.status, 401);
  });

  test('many concurrent requests with wrong passwords are refused and the service keeps serving', async () => {
    const u = await srv.user();
    // From another client address: login protection locks that address out of this account (429) after
    // a few failures; the owner, from their own address, is not affected.
    const bad = Array.from({ length: 20 }, (_, i) =>
      srv.anon().request('GET', 'tags/', { headers: { authorization: basic(u.email, `wrong-${i}`) }, localAddress: '127.0.0.3' }),
    );
    const good = u.get('tags/');
    const results = await Promise.all(bad);
    for (const r of results) assert.ok(r.status === 401 || r.status === 429, String(r.status));
    assert.ok(results.some((r) => r.status === 429));
    assert.equal((await good).status, 200);
  });
});
