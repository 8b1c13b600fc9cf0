import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { skipProblem } from '../reporter/skip-verdict.js';
import { engine } from '../helpers/db.js';
import { onlyOn } from '../helpers/skips.js';

/**
 * The runner's skip verdicts (test/run.ts fails a CI run on each problem) and the forms test/helpers/skips.ts
 * writes, held to each other: a declared skip must read as declared, anything else as a problem.
 */
describe('the runner judges skips', () => {
  const other = engine === 'sqlite' ? 'postgres' : 'sqlite';

  test('a store-only test skipped on the other store is expected; on its own store it is a problem', () => {
    const declared = onlyOn(other);
    assert.equal(declared, `only on ${other}`, 'onlyOn writes the form the runner reads');
    assert.equal(skipProblem({ reason: declared as string }, engine), null);
    assert.match(skipProblem({ reason: `only on ${engine}` }, engine)!, /declared "only on .*" but skipped on/);
  });

  test('a missing tool is a problem (CI installs every tool), named', () => {
    assert.equal(skipProblem({ reason: 'needs curl (not installed)' }, engine), 'needs curl (not installed): .ci/run must install it');
  });

  test('any other reason, or none, is an undeclared skip', () => {
    assert.match(skipProblem({ reason: 'python3 requests is not installed' }, engine)!, /^undeclared skip \(python3 requests is not installed\)/);
    assert.match(skipProblem({ reason: true }, engine)!, /^undeclared skip \(no reason\)/);
  });
});
