/**
 * A node:test reporter (`--test-reporter=./test/reporter/progress.mjs`) for people watching a run: one line
 * per test file (tests passed, failed, skipped; seconds) and under it the names of the file's failing
 * tests. The failures' details and the totals come from test/run.ts at the end.
 *
 * The runner reports files one after another (a file's tests once it is the one being reported), while a
 * file's own `test:complete` (its duration) comes when it finishes, possibly earlier: a file's line is
 * written when the reports move on to the next file, or when the run ends.
 */
import { relative } from 'node:path';
import { fileURLToPath, URL } from 'node:url';
import { withSourcePath } from './paths.mjs';

// Test files run in scratch folders (test/run.ts): paths are shown from the clone's root.
const root = fileURLToPath(new URL('../..', import.meta.url));
const files = new Map();
const stateOf = (file) => {
  let s = files.get(file);
  if (!s) files.set(file, (s = { pass: 0, fail: 0, skip: 0, todo: 0, ms: undefined, stack: [], failures: [], printed: false }));
  return s;
};
const isFileWrapper = (data) => data.nesting === 0 && data.name === data.file;

export default async function* progress(source) {
  let current;
  for await (const { type, data: raw } of source) {
    const data = withSourcePath(raw);
    if (!data?.file) continue;
    if (type === 'test:complete') {
      if (isFileWrapper(data)) stateOf(data.file).ms = data.details?.duration_ms;
      continue;
    }
    if (type !== 'test:start' && type !== 'test:pass' && type !== 'test:fail') continue;
    if (current && current !== data.file) yield line(current);
    current = data.file;
    const s = stateOf(data.file);
    if (type === 'test:start') {
      s.stack[data.nesting] = data.name;
      continue;
    }
    const name = [...s.stack.slice(0, data.nesting), data.name].join(' > ');
    if (data.details?.type === 'suite') {
      // A suite fails with its tests (counted there), or on its own hooks (counted here).
      if (type === 'test:fail' && data.details.error?.failureType !== 'subtestsFailed') {
        s.fail++;
        s.failures.push(`${name} (suite hook)`);
      }
    } else if (data.todo) s.todo++;
    else if (data.skip) s.skip++;
    else if (type === 'test:pass') s.pass++;
    else {
      s.fail++;
      s.failures.push(isFileWrapper(data) ? '(the file as a whole: its output is shown at the end)' : name);
    }
  }
  if (current) yield line(current);
}

function line(file) {
  const s = files.get(file);
  if (s.printed) return '';
  s.printed = true;
  const counts = [`${s.pass} passed`, s.fail && `${s.fail} failed`, s.skip && `${s.skip} skipped`, s.todo && `${s.todo} todo`].filter(Boolean).join(', ');
  const secs = s.ms === undefined ? '' : `  ${(s.ms / 1000).toFixed(1)}s`;
  return `  ${s.fail ? '✖' : '✔'} ${relative(root, file)}  ${counts}${secs}\n` + s.failures.map((f) => `      ✖ ${f}\n`).join('');
}
