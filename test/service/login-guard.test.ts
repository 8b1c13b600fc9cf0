import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Services } from '../../src/core/context.js';
import { ApiError } from '../../src/core/errors.js';
import { DEFAULT_LOGIN_PROTECTION, type LoginProtection } from '../../src/core/login-rules.js';
import { checkLogin, loginFailed, loginKeys, loginSucceeded, unlockLogins } from '../../src/resources/accounts/login-guard.js';
import { openServices, type ServiceFixture } from '../helpers/services.js';

/**
 * Login protection (resources/accounts/login-guard.ts), called directly: failures counted per account and
 * address, the lock that follows, its end on the injected clock, and what clears the counters.
 */
let fx: ServiceFixture;
before(async () => {
  fx = await openServices();
});
after(() => fx.close());

const LOCK_MS = 60_000;
/** The services with one rule of login protection (the others off), a 10-minute window and a 1-minute lock. */
const guarded = (rule: Partial<Pick<LoginProtection, 'pair' | 'address' | 'account'>>): Services => ({
  ...fx.services,
  config: {
    ...fx.services.config,
    loginProtection: { ...DEFAULT_LOGIN_PROTECTION, pair: null, address: null, account: null, windowMs: 600_000, lockMs: LOCK_MS, ...rule },
  },
});

let n = 0;
const fresh = () => `guard${++n}-${process.pid}@example.com`;
const isLockout = (e: unknown) => e instanceof ApiError && e.type === 'ratelimit' && Number(e.headers?.['Retry-After']) > 0;

/** Counts `times` failed logins, each expected to be answered without a lock. */
async function fail(s: Services, email: string, address: string, times: number): Promise<void> {
  for (let i = 0; i < times; i++) await loginFailed(s, loginKeys(email, address));
}

describe('lockout after N failures', () => {
  test('the failure that reaches the limit locks that account from that address: right password refused too, others not', async () => {
    const s = guarded({ pair: 3 });
    const email = fresh();
    await fail(s, email, '192.0.2.1', 2);
    await checkLogin(s, loginKeys(email, '192.0.2.1'));
    await assert.rejects(loginFailed(s, loginKeys(email, '192.0.2.1')), isLockout);
    await assert.rejects(checkLogin(s, loginKeys(email, '192.0.2.1')), isLockout);
    await assert.rejects(loginSucceeded(s, loginKeys(email, '192.0.2.1')), isLockout);
    // The same account from another address, and another account from the same address, are not locked.
    await checkLogin(s, loginKeys(email, '192.0.2.2'));
    await checkLogin(s, loginKeys(fresh(), '192.0.2.1'));
  });

  test('the account counter adds up failures from every address, per account', async () => {
    const s = guarded({ account: 3 });
    const email = fresh();
    const other = fresh();
    await fail(s, email, '198.51.100.1', 1);
    await fail(s, email, '198.51.100.2', 1);
    await fail(s, other, '198.51.100.3', 2);
    await assert.rejects(loginFailed(s, loginKeys(email, '198.51.100.3')), isLockout);
    await assert.rejects(checkLogin(s, loginKeys(email, '198.51.100.9')), isLockout);
    await checkLogin(s, loginKeys(other, '198.51.100.9'));
  });

  test('the lock ends when its time has passed on the injected clock, and is not extended by refused attempts', async () => {
    const s = guarded({ pair: 2 });
    const email = fresh();
    const keys = loginKeys(email, '203.0.113.1');
    await fail(s, email, '203.0.113.1', 1);
    await assert.rejects(loginFailed(s, keys), isLockout);
    fx.clock.advance(LOCK_MS - 1000);
    // Retry-After counts down to the lock's end: the refused attempts meanwhile did not move it.
    await assert.rejects(checkLogin(s, keys), (e) => isLockout(e) && (e as ApiError).headers?.['Retry-After'] === '1');
    fx.clock.advance(1000);
    await checkLogin(s, keys);
    await loginSucceeded(s, keys);
  });

  test('failures older than the window do not add up', async () => {
    const s = guarded({ pair: 3 });
    const email = fresh();
    await fail(s, email, '203.0.113.20', 2);
    fx.clock.advance(600_000 + 1000);
    await fail(s, email, '203.0.113.20', 2);
    await checkLogin(s, loginKeys(email, '203.0.113.20'));
  });

  test('off: no counting, no lock', async () => {
    const s: Services = { ...fx.services, config: { ...fx.services.config, loginProtection: null } };
    const email = fresh();
    await fail(s, email, '203.0.113.7', 20);
    await checkLogin(s, loginKeys(email, '203.0.113.7'));
  });
});

describe('reset', () => {
  test('a successful login forgets the pair failures so far', async () => {
    const s = guarded({ pair: 3 });
    const email = fresh();
    const keys = loginKeys(email, '192.0.2.50');
    await fail(s, email, '192.0.2.50', 2);
    await loginSucceeded(s, keys);
    await fail(s, email, '192.0.2.50', 2);
    await checkLogin(s, keys);
  });

  test('unlocking an account ends its locks from every address; another account stays locked', async () => {
    const s = guarded({ pair: 1 });
    const email = fresh();
    const other = fresh();
    await assert.rejects(loginFailed(s, loginKeys(email, '192.0.2.60')), isLockout);
    await assert.rejects(loginFailed(s, loginKeys(email, '192.0.2.61')), isLockout);
    await assert.rejects(loginFailed(s, loginKeys(other, '192.0.2.60')), isLockout);
    assert.equal(await unlockLogins(s, { email }), 2);
    await checkLogin(s, loginKeys(email, '192.0.2.60'));
    await checkLogin(s, loginKeys(email, '192.0.2.61'));
    await assert.rejects(checkLogin(s, loginKeys(other, '192.0.2.60')), isLockout);
  });

  test('unlocking an address (either spelling of IPv4) ends its locks for every account', async () => {
    const s = guarded({ address: 2 });
    await fail(s, fresh(), '::ffff:192.0.2.70', 1);
    await assert.rejects(loginFailed(s, loginKeys(fresh(), '::ffff:192.0.2.70')), isLockout);
    await assert.rejects(checkLogin(s, loginKeys(fresh(), '::ffff:192.0.2.70')), isLockout);
    assert.equal(await unlockLogins(s, { address: '192.0.2.70' }), 1);
    await checkLogin(s, loginKeys(fresh(), '::ffff:192.0.2.70'));
  });
});
