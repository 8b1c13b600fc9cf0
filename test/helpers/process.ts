import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { after } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { engine, freshDatabase } from './db.js';

const BIN = fileURLToPath(new URL('../../bin/stratus.js', import.meta.url));

// Servers a test left running (it failed before stopping them) would keep this file's process, and with
// it the whole run, alive: they go when the file's tests are over.
const live = new Set<ChildProcess>();
after(() => {
  for (const child of live) child.kill('SIGKILL');
  if (codeCache) rmSync(codeCache, { recursive: true, force: true });
});

/**
 * Development checks a whole run is made under (`npm run test:verify`): unlike settings, they change no
 * answer, only check them, so every server a test starts runs with them as the in-process ones do.
 */
const RUN_WIDE = new Set(['STRATUS_ANSWER_CACHE_VERIFY']);

/**
 * The environment of a `stratus` child: this process's without any STRATUS_* setting (the caller's shell
 * or the test runner's must not change what a test starts) but the run-wide checks, plus exactly what the
 * test sets.
 */
export function childEnv(env: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('STRATUS_') || RUN_WIDE.has(k))),
    // The compiled program's code cache in this file's temporary folder, not in the clone's dist/.
    STRATUS_CODE_CACHE_DIR: codeCacheDir(),
    ...env,
  };
}

let codeCache: string | undefined;
function codeCacheDir(): string {
  if (codeCache) return codeCache;
  return (codeCache = mkdtempSync(join(tmpdir(), 'stratus-test-code-cache-')));
}

/** Run a `stratus` command to completion. */
export function stratus(args: string[], env: NodeJS.ProcessEnv = {}) {
  const res = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: childEnv(env), timeout: 60_000 });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

/** Run a `stratus` command as its own process, without blocking this one's event loop meanwhile. */
export function stratusAsync(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return stratusChild(args, env).done;
}

/** As stratusAsync, with the child process itself (a test that watches what it is doing). */
export function stratusChild(args: string[], env: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, [BIN, ...args], { env: childEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  const done = new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (status) => {
      live.delete(child);
      resolve({ status, stdout, stderr });
    });
  });
  return { child, done };
}

export interface Running {
  child: ChildProcess;
  base: string;
  stdout: () => string;
  exited: Promise<number | null>;
  /** Resolves once the output so far matches (a condition, not a duration); rejects if the process exits first. */
  printed: (pattern: RegExp, timeoutMs?: number) => Promise<RegExpExecArray>;
}

/**
 * Start `stratus serve` as a real process (`env` adds environment variables) and wait until it prints where it
 * listens. Its log is the readable form (`--log-format pretty`: the banner as lines) unless `args` choose json.
 */
export function serveProcess(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Running> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--log-level', 'warn', '--log-format', 'pretty', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: childEnv(env),
  });
  let out = '';
  let err = '';
  live.add(child);
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      live.delete(child);
      resolve(code);
    }),
  );
  const printed = async (pattern: RegExp, timeoutMs = 30_000) => {
    for (const started = Date.now(); ;) {
      const m = pattern.exec(out);
      if (m) return m;
      if (child.exitCode !== null || Date.now() - started > timeoutMs) throw new Error(`not printed: ${pattern} (exit ${child.exitCode}): ${out}${err}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  return new Promise((resolve, reject) => {
    // Generous: on a loaded machine a cold tsx start takes long. A server that did not start is killed, so
    // no orphan keeps this test file's process (and the whole run) alive.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not start within 90 s: ${out}${err}`));
    }, 90_000);
    child.stderr!.on('data', (d) => (err += d));
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening at (https?:\/\/[^\s/]+)\/api\/2\.0\//.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, base: m[1], stdout: () => out, exited, printed });
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}: ${out}${err}`));
    });
  });
}

/**
 * Two real `stratus serve` processes on one database, as several API processes share one: a SQLite file in
 * a temporary folder, or a fresh PostgreSQL schema. The database is migrated and holds one user (`stratus
 * users add`) before both start with `args`; `close` stops both and removes the folder.
 */
export async function twoServeProcesses(args: string[] = []): Promise<{ a: Running; b: Running; email: string; password: string; close: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-two-'));
  const db = engine === 'sqlite' ? join(dir, 'stratus.db') : (await freshDatabase()).url;
  const email = `two-processes-${process.pid}-${Date.now()}@example.com`;
  const password = 'two-processes-secret';
  for (const cmd of [
    ['migrate', '--db', db],
    ['users', 'add', email, '--password', password, '--db', db],
  ]) {
    const res = await stratusAsync(cmd);
    if (res.status !== 0) throw new Error(`stratus ${cmd.join(' ')}: ${res.status} ${res.stdout}${res.stderr}`);
  }
  const all = ['--db', db, '--rate-limits', 'off', ...args];
  const a = await serveProcess(all);
  const b = await serveProcess(all).catch(async (e) => {
    a.child.kill('SIGKILL');
    throw e;
  });
  return {
    a,
    b,
    email,
    password,
    async close() {
      for (const p of [a, b]) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGTERM');
      await Promise.all([a.exited, b.exited]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
