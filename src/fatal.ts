/**
 * A fatal error in `stratus serve`: an exception nothing caught, or a rejected promise nobody awaited. The process
 * cannot tell what state it is left in (a half-done write, a socket without an owner), so it logs one `fatal`
 * event in the service's own log format and exits 1 at once, rather than limping on or holding its port without
 * answering. Whoever runs it starts a fresh one: the primary of `--workers` replaces a worker; a single process
 * runs under a supervisor (systemd `Restart=on-failure`, a container restart policy: docs/operating.md).
 */

export type FatalLog = (err: unknown, kind: string) => void;

/** Until the service's logger exists: one line on stderr, as the command line's own errors. */
let log: FatalLog = (err, kind) => process.stderr.write(`stratus: fatal: ${kind}: ${(err as Error)?.stack ?? String(err)}\n`);
let installed = false;

/** Exit 1 on a fatal error; `logWith` (the service's logger, once it exists) says what happened. */
export function exitOnFatalErrors(logWith?: FatalLog): void {
  if (logWith) log = logWith;
  if (installed) return;
  installed = true;
  const die = (kind: string) => (err: unknown) => {
    try {
      log(err, kind);
    } finally {
      process.exit(1);
    }
  };
  process.on('uncaughtException', die('uncaught exception'));
  process.on('unhandledRejection', die('unhandled rejection'));
}
