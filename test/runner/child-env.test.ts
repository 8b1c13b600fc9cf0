import { test } from 'node:test';
import assert from 'node:assert/strict';
import { childEnv } from '../helpers/process.js';

// The caller's STRATUS_* settings (a shell's, the runner's) never reach a `stratus` a test starts: a stray
// STRATUS_DATABASE_URL=mysql://… made every served process exit with 2 when childEnv passed them on.
test('a stratus child gets no STRATUS_* of the caller, only what the test sets', () => {
  process.env.STRATUS_DATABASE_URL = 'mysql://from-the-caller';
  try {
    const env = childEnv({ STRATUS_LOG_LEVEL: 'debug' });
    assert.deepEqual(
      Object.keys(env).filter((k) => k.startsWith('STRATUS_')),
      // The helpers' own: the compiled program's code cache in a temporary folder (not the clone's dist/).
      ['STRATUS_CODE_CACHE_DIR', 'STRATUS_LOG_LEVEL'],
    );
    assert.notEqual(env.STRATUS_CODE_CACHE_DIR, undefined);
    assert.equal(env.PATH, process.env.PATH, 'the rest of the environment is kept');
  } finally {
    delete process.env.STRATUS_DATABASE_URL;
  }
});
