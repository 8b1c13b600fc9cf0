import type { Skip } from './summary.js';

/**
 * The runner's verdict on a skip (test/run.ts): declared ones (test/helpers/skips.ts) are fine, and under CI
 * any other fails the run. The forms are the ones `onlyOn` and `needs` write (test/runner/skip-verdict.test.ts
 * holds the two to each other).
 */
const DECLARED_SKIP = /^only on (sqlite|postgres)$/;
const MISSING_TOOL = /^needs (\S+)/;

/** Null for an expected skip; otherwise what is wrong with it. */
export function skipProblem(s: Pick<Skip, 'reason'>, engine: string): string | null {
  const reason = typeof s.reason === 'string' ? s.reason : '';
  const store = DECLARED_SKIP.exec(reason)?.[1];
  if (store) return store === engine ? `declared "only on ${store}" but skipped on ${engine}` : null;
  if (MISSING_TOOL.test(reason)) return `${reason}: .ci/run must install it`;
  return `undeclared skip (${reason || 'no reason'}): declare it with onlyOn()/needs() (test/helpers/skips.ts)`;
}
