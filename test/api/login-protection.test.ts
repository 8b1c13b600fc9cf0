import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { LOGIN_LIMITS, LOGIN_LOCK_MS } from '../../src/resources/accounts/login-guard.js';
import { Client, type Response } from '../helpers/client.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { twoServeProcesses } from '../helpers/process.js';
import { basic, digestChallenge, digestHeader, setCookies } from '../helpers/auth.js';

let srv: TestServer;

before(async () => {
  srv = await startServer({ 'rate-limits': 'off' });
});
after(() => srv.close());

const ACTION = '/api/2.0/accounts/action/';
const PROFILE = '/api/2.0/profile/';

// Every test uses its own client addresses (127.0.0.x is all loopback), so their counters never meet.
let nextHost = 10;
const address = () => `127.0.0.${nextHost++}`;

const basicFrom = (from: string, email: string, password: string, base = srv.base) =>
  new Client(base).request('GET', PROFILE, { headers: { authorization: basic(email, password) }, localAddress: from });

const loginFrom = (from: string, username: string, password: string) =>
  srv.anon().request('POST', `${ACTION}?do=login`, { body: { username, password }, localAddress: from });

function assertLocked(res: Response, what: string) {
  assert.equal(res.status, 429, `${what}: ${res.status} ${res.text}`);
  const retry = Number(res.headers['retry-after']);
  assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= LOGIN_LOCK_MS / 1000, `Retry-After ${res.headers['retry-after']}`);
  assert.ok(Array.isArray(res.json));
  assert.deepEqual(Object.keys(res.json[0]).sort(), ['error_message', 'error_point', 'error_type']);
}

/** `count` wrong Basic passwords from one address; returns the statuses. */
async function failBasic(from: string, email: string, count: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push((await basicFrom(from, email, `wrong-${i}`)).status);
  return out;
}

describe('login protection: one account from one address', () => {
  test('after 5 failures the address is locked out of the account (429, Retry-After), even with the right password; the owner elsewhere is not', async () => {
    const u = await srv.user();
    const attacker = address();
    const statuses = await failBasic(attacker, u.email, LOGIN_LIMITS.pair);
    // Four plain refusals, and the failure that sets the lock already answers 429.
    assert.deepEqual(statuses, [401, 401, 401, 401, 429]);
    assertLocked(await basicFrom(attacker, u.email, 'wrong-again'), 'wrong password during the lock');
    assertLocked(await basicFrom(attacker, u.email, u.password), 'right password during the lock');
    assertLocked(await loginFrom(attacker, u.email, u.password), 'cookie login during the lock');
    // The owner, from another address, is not affected.
    assert.equal((await basicFrom(address(), u.email, u.password)).status, 200);
    assert.equal((await u.get('profile/')).status, 200);
  });

  test('Digest failures count the same way', async () => {
    const u = await srv.user();
    const attacker = address();
    const anon = new Client(srv.base);
    const challenge = async () => digestChallenge(await anon.request('GET', PROFILE, { localAddress: attacker }));
    const c = await challenge();
    const statuses: number[] = [];
    for (let i = 1; i <= LOGIN_LIMITS.pair; i++) {
      const header = digestHeader({ username: u.email, password: `wrong-${i}`, method: 'GET', uri: PROFILE, nonce: c.nonce, opaque: c.opaque, nc: i });
      statuses.push((await anon.request('GET', PROFILE, { headers: { authorization: header }, localAddress: attacker })).status);
    }
    assert.deepEqual(statuses, [401, 401, 401, 401, 429]);
    const right = digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce: c.nonce, opaque: c.opaque, nc: 10 });
    assertLocked(await anon.request('GET', PROFILE, { headers: { authorization: right }, localAddress: attacker }), 'right Digest during the lock');
    const elsewhere = address();
    const d = digestChallenge(await anon.request('GET', PROFILE, { localAddress: elsewhere }));
    const ok = digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce: d.nonce, opaque: d.opaque, nc: 1 });
    assert.equal((await anon.request('GET', PROFILE, { headers: { authorization: ok }, localAddress: elsewhere })).status, 200);
  });

  test('cookie login failures count the same way, and the lock ends', async () => {
    const u = await srv.user();
    const attacker = address();
    const statuses: number[] = [];
    for (let i = 0; i < LOGIN_LIMITS.pair; i++) statuses.push((await loginFrom(attacker, u.email, `wrong-${i}`)).status);
    assert.deepEqual(statuses, [401, 401, 401, 401, 429]);
    const locked = await loginFrom(attacker, u.email, u.password);
    assertLocked(locked, 'right cookie login during the lock');
    assert.equal(setCookies(locked).size, 0);
    srv.clock.advance(LOGIN_LOCK_MS + 1_000);
    const ok = await loginFrom(attacker, u.email, u.password);
    assert.equal(ok.status, 200);
    assert.ok(setCookies(ok).get('sessionid'));
  });

  test('a burst of parallel guesses learns nothing past the first few: later ones all get 429', async () => {
    const u = await srv.user();
    const attacker = address();
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => basicFrom(attacker, u.email, `parallel-${i}`)));
    const plain = results.filter((r) => r.status === 401).length;
    assert.ok(plain <= LOGIN_LIMITS.pair - 1, `${plain} guesses answered 401`);
    assert.equal(results.filter((r) => r.status === 429).length, 30 - plain);
  });
});

describe('login protection: one address, many accounts', () => {
  test('20 failures from one address lock that address out of every account, but no other address', async () => {
    const u = await srv.user();
    const sprayer = address();
    const statuses: number[] = [];
    for (let i = 0; i < LOGIN_LIMITS.address; i++) statuses.push((await basicFrom(sprayer, `victim-${i}-${Date.now()}@example.com`, 'guess')).status);
    assert.deepEqual(statuses.slice(0, -1), Array(LOGIN_LIMITS.address - 1).fill(401));
    assert.equal(statuses.at(-1), 429);
    assertLocked(await basicFrom(sprayer, u.email, u.password), 'an uninvolved account from the sprayer');
    assert.equal((await basicFrom(address(), u.email, u.password)).status, 200);
    srv.clock.advance(LOGIN_LOCK_MS + 1_000);
    assert.equal((await basicFrom(sprayer, u.email, u.password)).status, 200);
  });
});

describe('login protection: one account, many addresses', () => {
  test('50 failures from ten addresses lock the account everywhere for 15 minutes; one address alone never can', async () => {
    const u = await srv.user();
    const attackers = Array.from({ length: LOGIN_LIMITS.account / LOGIN_LIMITS.pair }, address);
    for (const [i, from] of attackers.entries()) {
      const statuses = await failBasic(from, u.email, LOGIN_LIMITS.pair);
      assert.equal(statuses.at(-1), 429, `address ${i}`);
      if (i < attackers.length - 1) assert.equal((await basicFrom(address(), u.email, u.password)).status, 200, `owner after address ${i}`);
    }
    assertLocked(await basicFrom(address(), u.email, u.password), 'the owner from a fresh address');
    srv.clock.advance(LOGIN_LOCK_MS + 1_000);
    assert.equal((await basicFrom(address(), u.email, u.password)).status, 200);
  });
});

describe('login protection: shared by API processes', () => {
  test('a lock set through one process holds in another on the same database', async () => {
    // Two real `stratus serve` processes: nothing shared but the database (the failure counters).
    const two = await twoServeProcesses();
    try {
      const attacker = address();
      const fromA: number[] = [];
      for (let i = 0; i < LOGIN_LIMITS.pair; i++) fromA.push((await basicFrom(attacker, two.email, `wrong-${i}`, two.a.base)).status);
      // Refused every time through the first process (the last failure sets the lock and answers it).
      assert.ok(fromA.every((st) => st === 401 || st === 429) && fromA[0] === 401, `wrong passwords through the first process: ${fromA}`);
      assertLocked(await basicFrom(attacker, two.email, two.password, two.b.base), 'through the other process');
      assert.equal((await basicFrom(address(), two.email, two.password, two.b.base)).status, 200, 'another address is not locked');
    } finally {
      await two.close();
    }
  });

  test('counters are stored without e-mails or addresses in clear', async () => {
    const rows = await srv.services.store.db.selectFrom('login_failures').select('key').execute();
    assert.ok(rows.length > 0);
    for (const r of rows) assert.match(r.key, /^[0-9a-f]{64}$/);
  });
});
