import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hashPassword, KEPT_IN_CLEAR, verifyPassword } from '../../src/core/passwords.js';

/**
 * Costly scrypt checks run on one thread of their own (glibc keeps each pool thread's 16 MiB block), cheap
 * ones on libuv's pool: both must give the same answers, several at once, and a bad hash still fails.
 */
test('passwords hash and verify on the hashing thread and on the pool alike', async () => {
  const costly = await hashPassword('right-password-1');
  const cheap = await hashPassword('right-password-2', KEPT_IN_CLEAR);
  assert.match(costly, /^scrypt\$16384\$8\$1\$/);
  // Hashes this process made are remembered (no scrypt for their right password): 64 newer ones push them out.
  for (let i = 0; i < 64; i++) await hashPassword(`filler-${i}`, KEPT_IN_CLEAR);
  const checks = await Promise.all([
    verifyPassword('right-password-1', costly),
    verifyPassword('wrong-password', costly),
    verifyPassword('right-password-2', cheap),
    verifyPassword('wrong-password', cheap),
    verifyPassword('wrong-password', costly),
  ]);
  assert.deepEqual(checks, [true, false, true, false, false]);
  // N must be a power of two: the thread's error comes back as the check's.
  await assert.rejects(verifyPassword('x', costly.replace('$16384$', '$16385$')));
});
