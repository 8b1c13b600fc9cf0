import { spawnSync } from 'node:child_process';
import { engine } from './db.js';

/**
 * Declared skips: a test that runs on one store only, or needs a tool outside Node, says so through these,
 * as its `skip` option (`{ skip: onlyOn('postgres') || needs('curl') }`). Each returns false (run it) or a
 * reason in a fixed form that test/run.ts reads: `only on <store>` is an expected skip; `needs <tool>` is
 * a tool missing, which fails the run under CI (.ci/run installs every tool); any other skip reason is
 * undeclared and fails under CI too.
 */
export const onlyOn = (store: 'sqlite' | 'postgres'): false | string => engine !== store && `only on ${store}`;

/** The tools tests shell out to, each with the command that tells whether it is there (.ci/run installs them). */
const TOOLS = {
  curl: ['curl', '--version'],
  jq: ['jq', '--version'],
  'ssh-keygen': ['ssh-keygen', '-?'],
  'python3-libcloud': ['/usr/bin/python3', '-c', 'import libcloud'],
  'python3-requests': ['/usr/bin/python3', '-c', 'import requests'],
  // Debian's Chromium, which the console's browser tests drive (test/helpers/browser.ts); its --version
  // starts the browser (seconds on a loaded machine), so the executable's presence is what is asked.
  chromium: ['test', '-x', '/usr/bin/chromium'],
} as const;
export type Tool = keyof typeof TOOLS;

const found = new Map<Tool, boolean>();
/** Whether `tool` is installed (asked once per process). */
export function has(tool: Tool): boolean {
  let ok = found.get(tool);
  if (ok === undefined) {
    const [cmd, ...args] = TOOLS[tool];
    const res = spawnSync(cmd, args, { stdio: 'ignore', timeout: 10_000 });
    // ssh-keygen answers `-?` with its usage and exit 1: being started at all is what counts.
    ok = !res.error && (res.status === 0 || tool === 'ssh-keygen');
    found.set(tool, ok);
  }
  return ok;
}

export const needs = (tool: Tool): false | string => !has(tool) && `needs ${tool} (not installed)`;
