/**
 * Reads the JSON lines test/reporter/events.mjs wrote for one run and tells what happened: counts, per-file
 * durations, and every failure with its full name (suite > test), place and error. Used by test/run.ts.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

interface ErrorData {
  message: string;
  failureType?: string;
  cause?: { name?: string; message?: string; stack?: string; actual?: unknown; expected?: unknown; operator?: string };
}
interface TestEvent {
  type: string;
  name?: string;
  nesting?: number;
  file?: string;
  line?: number;
  column?: number;
  skip?: boolean | string;
  todo?: boolean | string;
  message?: string;
  details?: { duration_ms?: number; type?: string; passed?: boolean; error?: ErrorData };
}

export interface Failure {
  name: string;
  where: string;
  error?: ErrorData;
  /** For a file that failed as a whole (a crash, an exit): what it printed. */
  output?: string;
  /** The runner's own word on it (e.g. which tests were still running when a hung file was killed). */
  note?: string;
}
export interface Skip {
  name: string;
  where: string;
  /** The test's `skip` option or `t.skip()` message: `true` when it gave none. */
  reason: string | true;
}
export interface FileResult {
  file: string;
  ms: number;
  passed: number;
  failed: number;
}
export interface RunResult {
  passed: number;
  failed: number;
  skipped: number;
  todo: number;
  files: FileResult[];
  failures: Failure[];
  skips: Skip[];
  /** Lines a file printed as `report: …` (what a suite tried and how many), shown whether it passed or not. */
  reports: string[];
}

/**
 * Where a failure happened, as `file:line:column` of the source. The runner's own positions are those of
 * tsx's compiled output (not the source), so: the first frame of the error's stack inside the test file
 * (source-mapped: the failing line), else the line of the source that names the test, else the runner's.
 */
function locate(file: string, ev: TestEvent, sources: Map<string, string[]>): string {
  const stack = ev.details?.error?.cause?.stack ?? '';
  for (const m of stack.matchAll(/\(?(?:file:\/\/)?(\/[^\s()]+?):(\d+):(\d+)\)?$/gm)) {
    if (m[1] === file) return `${m[2]}:${m[3]}`;
  }
  let lines = sources.get(file);
  if (!lines) {
    try {
      lines = readFileSync(file, 'utf8').split('\n');
    } catch {
      lines = [];
    }
    sources.set(file, lines);
  }
  const quoted = [`'${ev.name}'`, `"${ev.name}"`, `\`${ev.name}\``];
  const at = lines.findIndex((l) => quoted.some((q) => l.includes(q)));
  if (at >= 0) return `${at + 1}:${lines[at].search(/\S/) + 1}`;
  return `${ev.line ?? 1}:${ev.column ?? 1}`;
}

const readEvents = (eventsFile: string): string => {
  try {
    return readFileSync(eventsFile, 'utf8');
  } catch {
    return ''; // no events: the file's runner did not start (its own error is in its output)
  }
};

/**
 * The tests of a (killed) file's events that began and never ended: where a hung file hung. A test's
 * `test:dequeue` comes when it begins; its `test:start` only with its result.
 */
export function unfinished(eventsFile: string): string[] {
  const open: string[] = [];
  const stack: string[] = [];
  for (const raw of readEvents(eventsFile).split('\n')) {
    let ev: TestEvent;
    try {
      ev = JSON.parse(raw);
    } catch {
      continue;
    }
    if (ev.nesting === undefined || ev.name === ev.file) continue;
    const name = [...stack.slice(0, ev.nesting), ev.name].join(' > ');
    if (ev.type === 'test:dequeue') {
      stack[ev.nesting] = ev.name!;
      open.push(name);
    } else if (ev.type === 'test:complete') {
      const at = open.lastIndexOf(name);
      if (at >= 0) open.splice(at, 1);
    }
  }
  return open;
}

/** The prefix of a line a test file prints for the run's summary. */
export const REPORT = 'report: ';

/** The results of one run of files, from the events each file's reporter wrote. */
export function summarize(eventsFiles: string[], root: string): RunResult {
  const text = eventsFiles.map(readEvents).join('\n');
  const rel = (f: string) => relative(root, f);
  const result: RunResult = { passed: 0, failed: 0, skipped: 0, todo: 0, files: [], failures: [], skips: [], reports: [] };
  const stacks = new Map<string, string[]>();
  const output = new Map<string, string[]>();
  const perFile = new Map<string, FileResult>();
  const sources = new Map<string, string[]>();
  const fileResult = (f: string) => {
    let r = perFile.get(f);
    if (!r) perFile.set(f, (r = { file: rel(f), ms: 0, passed: 0, failed: 0 }));
    return r;
  };
  for (const raw of text.split('\n')) {
    if (!raw) continue;
    let ev: TestEvent;
    try {
      ev = JSON.parse(raw);
    } catch {
      continue; // a line cut short by an interrupted run
    }
    const file = ev.file;
    if (!file) continue;
    const isFile = ev.nesting === 0 && ev.name === file;
    if (ev.type === 'test:stdout' || ev.type === 'test:stderr') {
      const lines = output.get(file) ?? [];
      lines.push(ev.message ?? '');
      output.set(file, lines);
      for (const line of (ev.message ?? '').split('\n')) if (line.startsWith(REPORT)) result.reports.push(`${rel(file)}: ${line.slice(REPORT.length)}`);
    } else if (ev.type === 'test:start') {
      const stack = stacks.get(file) ?? [];
      stack[ev.nesting!] = ev.name!;
      stacks.set(file, stack);
    } else if (ev.type === 'test:complete' && isFile) {
      fileResult(file).ms = ev.details?.duration_ms ?? 0;
    } else if (ev.type === 'test:pass' || ev.type === 'test:fail') {
      const failed = ev.type === 'test:fail';
      const name = [...(stacks.get(file) ?? []).slice(0, ev.nesting), ev.name].join(' > ');
      const failure = (label: string): Failure => ({
        name: label,
        where: `${rel(file)}:${isFile ? '1:1' : locate(file, ev, sources)}`,
        error: ev.details?.error,
        output: isFile ? (output.get(file) ?? []).join('') : undefined,
      });
      if (ev.details?.type === 'suite') {
        // A suite fails with its tests (already counted), or on its own hooks (counted here).
        if (failed && ev.details.error?.failureType !== 'subtestsFailed') {
          result.failed++;
          fileResult(file).failed++;
          result.failures.push(failure(`${name} (suite hook)`));
        }
      } else if (ev.todo) result.todo++;
      else if (ev.skip) {
        result.skipped++;
        result.skips.push({ name, where: `${rel(file)}:${locate(file, ev, sources)}`, reason: ev.skip });
      } else if (!failed) {
        result.passed++;
        fileResult(file).passed++;
      } else {
        result.failed++;
        fileResult(file).failed++;
        result.failures.push(failure(isFile ? `${rel(file)} (the file as a whole)` : name));
      }
    }
  }
  result.files = [...perFile.values()];
  return result;
}

/** A failure as a reader wants it: name, place, the error without the runner's own stack frames. */
export function describeFailure(f: Failure, index: number, root: string): string {
  const lines = [`${index}) ${f.name}`, `   at ${f.where}`, ...(f.note ? [`   ${f.note}`] : [])];
  const e = f.error;
  if (e) {
    const cause = e.cause;
    if (e.failureType && e.failureType !== 'testCodeFailure') lines.push(`   ${e.failureType}: ${e.message}`);
    const body = cause?.stack ?? (cause?.message ? `${cause.name ?? 'Error'}: ${cause.message}` : e.message);
    const kept = body
      .split('\n')
      .filter((l) => !/^\s+at /.test(l) || (l.includes(root) && !l.includes('node_modules')))
      .slice(0, 40);
    lines.push(...kept.map((l) => `   ${l}`));
    if (cause && 'actual' in cause) {
      lines.push(`   actual:   ${JSON.stringify(cause.actual)?.slice(0, 2000)}`);
      lines.push(`   expected: ${JSON.stringify(cause.expected)?.slice(0, 2000)}`);
    }
  }
  if (f.output?.trim()) {
    const out = f.output.trimEnd().split('\n');
    lines.push(`   output of the file${out.length > 60 ? ` (last 60 of ${out.length} lines)` : ''}:`, ...out.slice(-60).map((l) => `   | ${l}`));
  }
  return lines.join('\n');
}
