import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stratus } from '../helpers/process.js';

/**
 * Tests run the clone's compiled program (dist/), whose first run writes V8's code cache (src/bundle-loader.ts):
 * a test must write only in temporary folders, so the test helpers point STRATUS_CODE_CACHE_DIR at one.
 */
const DIST = fileURLToPath(new URL('../../dist/', import.meta.url));

/** Every file under dist/ with its size and modification time. */
function listing(dir: string, prefix = ''): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return listing(path, `${prefix}${e.name}/`);
    const s = statSync(path);
    return [`${prefix}${e.name} ${s.size} ${s.mtimeMs}`];
  });
}

test('a command started by a test writes its code cache in the folder it is given, and dist/ stays as built', () => {
  const before = listing(DIST);
  const cache = mkdtempSync(join(tmpdir(), 'stratus-test-cache-'));
  try {
    const res = stratus(['--help'], { STRATUS_CODE_CACHE_DIR: cache });
    assert.equal(res.status, 0, res.stderr);
    assert.equal(readdirSync(cache).filter((f) => f.endsWith('.bin')).length, 1, 'the cache was written where it was asked');
    // The helpers' default: a folder of their own, not dist/.
    assert.equal(stratus(['--help']).status, 0);
    assert.deepEqual(listing(DIST), before);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
});
