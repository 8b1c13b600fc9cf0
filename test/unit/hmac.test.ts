import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { hmacSha256 } from '../../src/core/passwords.js';

test('hmacSha256 gives the tag createHmac gives, for keys shorter, as long as and longer than a block', () => {
  for (const keyLength of [0, 16, 32, 63, 64, 65, 200]) {
    const key = randomBytes(keyLength);
    const tag = hmacSha256(key);
    for (const message of ['', 'bench-solo-password', 'pässwörd €', 'x'.repeat(1000), randomBytes(40).toString('latin1')])
      assert.deepEqual(
        tag(message),
        createHmac('sha256', key).update(message).digest(),
        `key of ${keyLength} bytes, message ${JSON.stringify(message.slice(0, 20))}`,
      );
  }
});
