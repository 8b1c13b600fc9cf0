import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../../bin/stratus.js', import.meta.url));

/** Run a `stratus` command to completion. */
export function stratus(args: string[], env: NodeJS.ProcessEnv = {}) {
  const res = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

export interface Running {
  child: ChildProcess;
  base: string;
  stdout: () => string;
  exited: Promise<number | null>;
}

/** Start `stratus serve` as a real process and wait until it prints where it listens. */
export function serveProcess(args: string[]): Promise<Running> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--log-level', 'warn', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${out}${err}`)), 30_000);
    child.stderr!.on('data', (d) => (err += d));
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening at (http:\/\/[^\s/]+)\/api\/2\.0\//.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, base: m[1], stdout: () => out, exited });
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code}: ${out}${err}`));
    });
  });
}
