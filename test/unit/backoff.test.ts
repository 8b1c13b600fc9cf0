import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { AdjustableClock } from '../../src/core/clock.js';
import { ApiError } from '../../src/core/errors.js';
import { FailureBackoff } from '../../src/http/auth/backoff.js';

const RULES = { free: 3, baseMs: 1000, maxMs: 8000, forgetMs: 60_000, maxSources: 4 };

/** The Retry-After (seconds) of a 429, or null when the call did not throw. */
function retryAfter(fn: () => void): number | null {
  try {
    fn();
    return null;
  } catch (e) {
    assert.ok(e instanceof ApiError && e.status === 429, String(e));
    return Number(e.headers['Retry-After']);
  }
}

describe('FailureBackoff (wrong admin tokens)', () => {
  test('free guesses, then a lock that doubles up to the cap; refused attempts are not counted', () => {
    const clock = new AdjustableClock();
    const b = new FailureBackoff(clock, RULES, 'Too many');
    assert.equal(
      retryAfter(() => b.failed('a')),
      null,
    );
    assert.equal(
      retryAfter(() => b.failed('a')),
      null,
    );
    const locks: (number | null)[] = [];
    for (let i = 0; i < 5; i++) {
      locks.push(retryAfter(() => b.failed('a')));
      assert.ok(retryAfter(() => b.check('a'))! > 0);
      clock.advance(8000);
    }
    assert.deepEqual(locks, [1, 2, 4, 8, 8]);
    assert.equal(
      retryAfter(() => b.check('b')),
      null,
      'other sources are not slowed',
    );
    b.succeeded('a');
    assert.equal(
      retryAfter(() => b.failed('a')),
      null,
      'the right secret starts over',
    );
  });

  test('a quiet source is forgotten; memory is bounded (least recently failed forgotten first)', () => {
    const clock = new AdjustableClock();
    const b = new FailureBackoff(clock, RULES, 'Too many');
    for (let i = 0; i < 3; i++) retryAfter(() => b.failed('quiet'));
    clock.advance(60_000);
    assert.equal(
      retryAfter(() => b.check('quiet')),
      null,
    );
    assert.equal(
      retryAfter(() => b.failed('quiet')),
      null,
      'counted afresh',
    );
    for (let i = 0; i < 100; i++) retryAfter(() => b.failed(`10.0.0.${i}`));
    assert.equal(b.size, RULES.maxSources);
  });
});
