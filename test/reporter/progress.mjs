/**
 * A node:test reporter (`--test-reporter=./test/reporter/progress.mjs`) for people watching a run: one line
 * per test file when it finishes (tests passed, failed, skipped; seconds) and under it the names of the
 * file's failing tests. The failures' details and the totals come from test/run.ts at the end.
 */
import { relative } from 'node:path';

const files = new Map();
const stateOf = (file) => {
  let s = files.get(file);
  if (!s) files.set(file, (s = { pass: 0, fail: 0, skip: 0, todo: 0, stacks: [], failures: [] }));
  return s;
};
const rel = (file) => relative(process.cwd(), file);
const isFileWrapper = (data) => data.nesting === 0 && data.name === data.file;

export default async function* progress(source) {
  for await (const { type, data } of source) {
    if (!data?.file) continue;
    if (type === 'test:start') {
      stateOf(data.file).stacks[data.nesting] = data.name;
    } else if (type === 'test:pass' || type === 'test:fail') {
      const s = stateOf(data.file);
      if (data.details?.type === 'suite') {
        if (type === 'test:fail' && data.details.error?.failureType !== 'subtestsFailed') {
          s.fail++;
          s.failures.push([...s.stacks.slice(0, data.nesting), data.name].join(' > ') + ' (hook)');
        }
        continue;
      }
      if (data.todo) s.todo++;
      else if (data.skip) s.skip++;
      else if (type === 'test:pass') s.pass++;
      else {
        s.fail++;
        s.failures.push(isFileWrapper(data) ? '(the file itself: see its output below)' : [...s.stacks.slice(0, data.nesting), data.name].join(' > '));
      }
      if (isFileWrapper(data)) yield s.printed ? `      ✖ ${s.failures.at(-1)}\n` : line(data);
    } else if (type === 'test:complete' && isFileWrapper(data) && !(data.details?.passed === false && stateOf(data.file).pass + stateOf(data.file).fail === 0)) {
      yield line(data);
    }
  }
}

function line(data) {
  const s = files.get(data.file);
  if (!s || s.printed) return '';
  s.printed = true;
  const counts = [`${s.pass} passed`, s.fail && `${s.fail} failed`, s.skip && `${s.skip} skipped`, s.todo && `${s.todo} todo`].filter(Boolean).join(', ');
  const secs = ((data.details?.duration_ms ?? 0) / 1000).toFixed(1);
  const mark = s.fail || data.details?.passed === false ? '✖' : '✔';
  return `  ${mark} ${rel(data.file)}  ${counts}  ${secs}s\n` + s.failures.map((f) => `      ✖ ${f}\n`).join('');
}
