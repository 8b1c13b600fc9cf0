/**
 * The steps `stratus serve` takes with one location (src/serve.ts) and with several (src/serve-locations.ts).
 */
import { accessSync, constants, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ConfigError, type Config } from './config.js';
import type { Services } from './core/context.js';
import { registry } from './registry.js';
import { findUserByEmail } from './resources/users/users.js';
import { getAccountLimitsText, setAccountLimits } from './resources/accounts/rate-limits.js';
import { seed, type SeedReport } from './admin/seed.js';
import type { TlsMaterial } from './http/tls.js';
import { VERSION } from './version.js';
import { ApiError } from './core/errors.js';

/** Why the server could not listen, as one line naming the setting (exit code 2); anything unexpected as it is. */
export function listenError(config: Config, err: unknown): unknown {
  const at = `${config.host.includes(':') ? `[${config.host}]` : config.host}:${config.port}`;
  switch ((err as NodeJS.ErrnoException)?.code) {
    case 'EADDRINUSE':
      return new ConfigError(`port: ${at} is already in use (another Stratus?): stop it or choose another --port (0 = any free port)`);
    case 'EACCES':
      return new ConfigError(`port: no permission to listen on ${at} (ports below 1024 need privileges): choose --port 1024 or above`);
    case 'EADDRNOTAVAIL':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new ConfigError(`host: ${config.host} is not an address of this machine: use 127.0.0.1, 0.0.0.0 or one of its addresses`);
  }
  return err;
}

/** Removes a stale ready file and checks that its folder takes a new one, before anything else starts. */
export function clearReadyFile(path: string): void {
  try {
    rmSync(path, { force: true });
    accessSync(dirname(resolve(path)), constants.W_OK);
  } catch (e) {
    throw new ConfigError(`ready-file: cannot write ${path} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); give a path in a writable folder`);
  }
}

/**
 * Written once the server answers, readable only by its owner (it holds a password), and atomically (a
 * temporary file renamed over it), so a pipeline polling for it never reads half of it.
 */
export function writeReadyFile(path: string, content: Record<string, unknown>): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(content, null, 2) + '\n', { mode: 0o600 });
  renameSync(tmp, path);
}

/** `--seed FILE` at start: an unreadable or refused seed stops start-up with one line naming the setting (exit code 2). */
export async function seedAtStart(s: Parameters<typeof seed>[0], path: string, runDue: () => Promise<unknown>): Promise<SeedReport> {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new ConfigError(`seed: cannot read ${path} as JSON (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    return await seed(s, registry, doc, runDue);
  } catch (e) {
    if (e instanceof ApiError) throw new ConfigError(`seed: ${path}: ${e.point ? `${e.point}: ` : ''}${e.message}`);
    throw e;
  }
}

/**
 * The generated demo account (`npm start` without `--demo-login`) is for a person and a console clicking around,
 * which the spec's 100 GETs a minute would meet with 429s: it gets these limits, unless an operator has set its own
 * (`stratus users limits`). Every other account keeps the deployment's (`--rate-limits`).
 */
export const DEMO_LIMITS = 'GET=10000/min,POST=1000/min,PUT=1000/min,DELETE=10000/min';

export async function demoLimits(services: Services, email: string): Promise<void> {
  const user = await findUserByEmail(services, email);
  if (user && (await getAccountLimitsText(services, user.uuid)) === undefined) await setAccountLimits(services, email, DEMO_LIMITS);
}

/**
 * The ready file's contents (one location or several): where the API is, the demo login, the admin token (a
 * generated one exists nowhere else), this process, the local CA to trust; `locations` with several.
 */
export function readyContent(o: {
  url: string;
  locations?: Record<string, string>;
  demo: { email: string; password: string } | null;
  adminToken: string;
  tls: { caFile?: string | null } | null;
}): Record<string, unknown> {
  return {
    url: o.url,
    ...(o.locations ? { locations: o.locations } : {}),
    email: o.demo?.email ?? null,
    password: o.demo?.password ?? null,
    admin_token: o.adminToken === 'off' ? null : o.adminToken,
    pid: process.pid,
    ...(o.tls?.caFile ? { ca: o.tls.caFile } : {}),
  };
}

/**
 * SIGTERM/SIGINT, once: the ready file goes first (a pipeline must not find a server that is leaving), then
 * `stop` (stop accepting, let in-flight requests finish, stop the schedulers, close the stores), then `exit`
 * (exit 0; a worker leaves its channel to the primary first). `shutdown` is also the primary's `stop`.
 */
export function onSignals(
  log: { info: (obj: object, msg: string) => void },
  readyFile: string | null,
  stop: () => Promise<unknown>,
  exit: () => void = () => process.exit(0),
): { shutdown: (signal: string) => Promise<void>; readonly closing: boolean } {
  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    log.info({ signal }, 'shutting down');
    if (readyFile) rmSync(readyFile, { force: true });
    await stop();
    exit();
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
  return {
    shutdown,
    get closing() {
      return closing;
    },
  };
}

/**
 * The start banner's fields: where the service listens, the demo login, a first request, TLS, the admin
 * plane and what was seeded (src/serve.ts, and the primary of several workers, src/serve-workers.ts).
 */
export function startBanner(o: {
  config: Config;
  address: string;
  database: string;
  demo: { email: string; password: string } | null;
  tls: TlsMaterial | null;
  adminToken: string;
  seeded: SeedReport | null;
  workers?: number;
}) {
  const { config, address, demo, tls, adminToken } = o;
  const base = `${address}/api/2.0/`;
  return {
    event: 'start',
    version: VERSION,
    url: base,
    database: o.database,
    ...(o.workers ? { workers: o.workers } : {}),
    demo_login: demo ? { email: demo.email, password: demo.password } : null,
    try: demo ? `curl -u '${demo.email}:${demo.password}' ${base}capabilities/` : null,
    tls: tls
      ? tls.caFile
        ? `HTTPS for ${tls.names.join(', ')}; trust the local CA ${tls.caFile} (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS) and map the name, e.g. curl --cacert ${tls.caFile} --resolve ${config.location}.cloudsigma.com:<port>:127.0.0.1`
        : `HTTPS with ${config.tlsCert} (${tls.names.join(', ')})`
      : null,
    // A generated token is printed (it exists nowhere else); a configured one is the operator's already.
    admin:
      adminToken === 'off'
        ? null
        : { url: `${address}/_stratus/admin/`, access: config.adminAccess, token: config.adminToken === null ? adminToken : 'from --admin-token' },
    seeded: o.seeded ?? null,
    // The web console (http/console.ts), where the demo login signs in too.
    console: config.consoleDir ? `${address}/ui/` : null,
  };
}
