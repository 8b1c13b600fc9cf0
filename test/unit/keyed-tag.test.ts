import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { keyedTag } from '../../src/core/passwords.js';

test('keyedTag is SHA-256 of key and message: equal for equal passwords, apart for different ones or keys', () => {
  const key = randomBytes(64).toString('base64');
  const tag = keyedTag(key);
  const other = keyedTag(randomBytes(64).toString('base64'));
  const messages = ['', 'bench-solo-password', 'pässwörd €', 'x'.repeat(1000), randomBytes(40).toString('latin1')];
  for (const message of messages) {
    const expected = createHash('sha256').update(key).update(message, 'utf8').digest('binary');
    assert.deepEqual(tag(message), expected, `message ${JSON.stringify(message.slice(0, 20))}`);
    assert.deepEqual(tag(message), tag(message));
    assert.notDeepEqual(other(message), expected);
  }
  assert.equal(new Set(messages.map((m) => tag(m))).size, messages.length);
  assert.equal(tag('x').length, 32, 'a character a byte');
  assert.throws(() => keyedTag('kéy'), /printable ASCII/);
});
