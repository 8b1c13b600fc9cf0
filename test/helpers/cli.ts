import { runCli } from '../../src/cli/index.js';
import { childEnv } from './process.js';

/**
 * Run a `stratus` command line in this process (src/cli): the same parsing, messages and exit codes as
 * bin/stratus.js without a process start-up each time. `env` adds environment variables for the settings (the caller's own STRATUS_* are not seen).
 * (test/helpers/process.ts runs the real process where the process itself is under test.)
 */
export async function cli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ status: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const status = await runCli(args, { out: (s) => (stdout += s), err: (s) => (stderr += s) }, { env: childEnv(env) });
  return { status, stdout, stderr };
}
