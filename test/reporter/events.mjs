/**
 * A node:test reporter (`--test-reporter=./test/reporter/events.mjs`) that writes the run's events as
 * JSON lines to its destination, for test/run.ts to summarise once the run is over. Errors are reduced
 * to plain data (message, stack, assertion operands); enqueue noise is dropped; a test's `dequeue` (it
 * begins) and `complete` (it ended) are kept as bare names, for naming the tests a hung file was running; a file's stdout and stderr are kept (test/run.ts shows them
 * when the file itself failed, e.g. a crash at import).
 */
const plain = (v) => {
  if (v === undefined) return undefined;
  try {
    return typeof v === 'string' ? v : (JSON.parse(JSON.stringify(v)) ?? String(v));
  } catch {
    return String(v);
  }
};

function errorData(err) {
  if (!err) return undefined;
  const cause = err.cause && typeof err.cause === 'object' ? err.cause : err.cause !== undefined ? { message: String(err.cause) } : undefined;
  return {
    message: String(err.message ?? err),
    failureType: err.failureType,
    code: err.code,
    cause: cause && {
      name: cause.name,
      message: String(cause.message ?? ''),
      code: cause.code,
      stack: cause.stack,
      operator: cause.operator,
      ...('actual' in cause && cause.name === 'AssertionError' && typeof cause.message === 'string' && !cause.generatedMessage
        ? { actual: plain(cause.actual), expected: plain(cause.expected) }
        : {}),
    },
  };
}

import { withSourcePath } from './paths.mjs';

export default async function* events(source) {
  for await (const { type, data: raw } of source) {
    const data = withSourcePath(raw);
    if (type === 'test:enqueue' || type === 'test:watch:drained') continue;
    // A test's `complete` repeats its pass/fail (only a file's own, its duration, is new): kept bare.
    if (type === 'test:dequeue' || (type === 'test:complete' && !(data.nesting === 0 && data.name === data.file))) {
      yield JSON.stringify({ type, name: data.name, nesting: data.nesting, file: data.file }) + '\n';
      continue;
    }
    const out = { type, ...data };
    if (data?.details) out.details = { ...data.details, error: errorData(data.details.error) };
    yield JSON.stringify(out) + '\n';
  }
}
