/**
 * Progress of long operator work (`stratus seed`, `export`, `import`) on stderr, so stdout stays the
 * command's result (an export without FILE is the state itself). Shown on a terminal, as one line rewritten
 * in place; elsewhere only with `--progress`, as whole lines, about twenty per run whatever its size. Quiet
 * otherwise: a pipeline's or a test's stderr holds only errors.
 */
export type Progress = (done: number, total: number, item: string) => void;

export function progressOn(err: (s: string) => void, what: string, opts: { tty: boolean; asked: boolean }): Progress | undefined {
  if (!opts.tty && !opts.asked) return undefined;
  let shown = -1;
  return (done, total, item) => {
    const last = done >= total;
    // Steps of 1% on a terminal, 5% as lines: a seed of 100,000 users writes at most ~100 or ~20 updates.
    const step = total > 0 ? Math.floor((done * (opts.tty ? 100 : 20)) / total) : 0;
    if (step === shown && !last) return;
    shown = step;
    const text = `${what}: ${done}/${total} ${item}`;
    if (opts.tty) err(`\r${text}\x1b[K${last ? '\n' : ''}`);
    else err(`${text}\n`);
  };
}
