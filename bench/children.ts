/**
 * The bench's server processes (bench/serve-child.ts): start one, wait until it listens, ask for its
 * counters, wait until it is idle, read its resident memory from /proc, stop it. The child runs compiled
 * as users run Stratus: bundled into dist/ beside dist/stratus.js by scripts/build.js (once per bench run),
 * so its memory and start are those of the shipped build, not of tsx compiling sources at run time.
 */
import { fork, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ChildMessage, ParentMessage, RawReply, Stats } from './serve-child.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
let compiled: string | undefined;
function childScript(): string {
  if (compiled) return compiled;
  // BENCH_CHILD=<file>: a server process built from another commit (A/B in alternation, bench/write-waits.ts).
  if (process.env.BENCH_CHILD) return (compiled = process.env.BENCH_CHILD);
  const out = spawnSync(
    process.execPath,
    // BENCH_NO_MINIFY=1: readable function names in profiles (bench/profile.ts).
    ['scripts/build.js', '--beside', 'bench/serve-child.ts', 'bench-serve-child.mjs', ...(process.env.BENCH_NO_MINIFY === '1' ? ['--no-minify'] : [])],
    { cwd: ROOT, encoding: 'utf8' },
  );
  if (out.status !== 0) throw new Error(`building the bench's server process failed: ${out.stderr || out.stdout}`);
  return (compiled = fileURLToPath(new URL('../dist/bench-serve-child.mjs', import.meta.url)));
}

export interface Child {
  pid: number;
  base: string;
  stats(): Promise<Stats>;
  /**
   * Wait until the server has answered every request it was sent, every connection is gone (a run ends
   * with requests still queued in its sockets) and its statement count stands still for one poll (a
   * handler whose client left may still be finishing), and `dbBusy` (PostgreSQL) says no query of such a
   * handler still runs. The bench's own requests use no keep-alive.
   */
  drain(maxMs?: number): Promise<void>;
  /** Resident set size now, and the peak since the process started (VmHWM), in MiB. */
  memory(): { rssMiB: number; peakMiB: number };
  close(): Promise<void>;
}

function next(proc: ChildProcess, type: ChildMessage['type']): Promise<ChildMessage> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: ChildMessage) => {
      if (m.type !== type) return;
      proc.off('message', onMessage).off('exit', onExit);
      resolve(m);
    };
    const onExit = (code: number | null) => reject(new Error(`bench server process exited (${code}) before "${type}"`));
    proc.on('message', onMessage).once('exit', onExit);
  });
}

/** The process's user + system CPU time so far, ms (Linux: /proc/<pid>/stat, in clock ticks of 10 ms). */
export function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** `cpuMs` summed over processes; one that ended meanwhile (a backend, a worker) counts nothing. */
export function cpuMsOf(pids: readonly number[]): number {
  let ms = 0;
  for (const pid of pids) {
    try {
      ms += cpuMs(pid);
    } catch {
      // Gone meanwhile.
    }
  }
  return ms;
}

/** `/proc/<pid>/status` fields in kB, as MiB. Linux only; 0 elsewhere. */
function procMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** Stratus over `db` (a SQLite file or a PostgreSQL URL), or the raw replay server for `replies`. */
export async function startChild(
  spec:
    | { mode: 'stratus'; db: string; dbBusy?: () => Promise<boolean>; answerCacheMiB?: number; execArgv?: string[]; execPath?: string }
    | { mode: 'raw'; replies: RawReply[]; execPath?: string },
): Promise<Child> {
  // Stratus as configured by default, or with --answer-cache-mib set (0: every answer made afresh).
  const args = spec.mode === 'stratus' ? ['stratus', spec.db, ...(spec.answerCacheMiB === undefined ? [] : [String(spec.answerCacheMiB)])] : ['raw'];
  // stdout is the parent's report: the child's output (Fastify warnings) goes to stderr.
  // execArgv: node's own flags for the child (bench/profile.ts passes --cpu-prof). execPath: a program that
  // runs node (bench/cpu.ts's valgrind wrapper).
  const proc = fork(childScript(), args, {
    execArgv: spec.mode === 'stratus' ? (spec.execArgv ?? []) : [],
    stdio: ['ignore', 2, 2, 'ipc'],
    ...(spec.execPath ? { execPath: spec.execPath } : {}),
  });
  const ready = next(proc, 'ready');
  if (spec.mode === 'raw') proc.send({ type: 'replies', replies: spec.replies } satisfies ParentMessage);
  const { base } = (await ready) as { base: string };
  const pid = proc.pid!;
  const stats = async (): Promise<Stats> => {
    const reply = next(proc, 'stats');
    proc.send({ type: 'stats' } satisfies ParentMessage);
    return (await reply) as Stats & { type: 'stats' };
  };
  return {
    pid,
    base,
    stats,
    async drain(maxMs = 180_000) {
      let previous: number | null = -1;
      for (const t0 = Date.now(); ;) {
        const s = await stats();
        if (s.inflight === 0 && s.connections === 0 && s.statements === previous && !(spec.mode === 'stratus' && (await spec.dbBusy?.()))) return;
        previous = s.statements;
        if (Date.now() - t0 > maxMs) throw new Error(`the server is still busy ${maxMs} ms after a run (${JSON.stringify(s)})`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    memory: () => ({ rssMiB: procMiB(pid, 'VmRSS'), peakMiB: procMiB(pid, 'VmHWM') }),
    async close() {
      if (proc.exitCode !== null) return;
      const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
      proc.send({ type: 'close' } satisfies ParentMessage);
      await exited;
    },
  };
}
