/**
 * `stratus serve`: the API server in this process (src/main.ts loads this module only for `serve`), with
 * its scheduler loop and signal handling.
 */
import { rmSync } from 'node:fs';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { randomAlnum, randomPassword } from './core/passwords.js';
import { syncClock } from './admin/clock.js';
import { openServices as open } from './cli/index.js';
import { timerHandlers } from './registry.js';
import { Scheduler } from './core/scheduler.js';
import { ensureDemoLogin } from './resources/users/users.js';
import { loadTls, type TlsMaterial } from './http/tls.js';
import { VERSION } from './version.js';
import { serveLocations } from './serve-locations.js';
export { DEMO_LIMITS } from './serve-steps.js';
import { clearReadyFile, demoLimits, listenError, seedAtStart, writeReadyFile } from './serve-steps.js';

export async function serve(config: Config): Promise<void> {
  // Several locations: one app per location behind a front server that picks by host (src/serve-locations.ts).
  if (config.locations.length > 1) return serveLocations(config);
  // A ready file left by an earlier run must not tell a pipeline this one is up: it goes first.
  if (config.readyFile) clearReadyFile(config.readyFile);
  const services = await open(config, 'migrate');
  // An admin token, generated for this run when none is configured (printed below, and in the ready file).
  const adminToken = config.adminToken ?? randomAlnum(32);
  services.config = { ...config, adminToken };
  // The demo login's password hash or check (scrypt, ~60 ms on the thread pool) runs while the app is built.
  let tls: TlsMaterial | null;
  try {
    tls = await loadTls(config);
  } catch (err) {
    await services.store.close();
    throw err;
  }
  const [demo, app] = await Promise.all([ensureDemoLogin(services, randomPassword(), config.demoLogin), buildApp(services, undefined, { tls })]);
  if (demo && !config.demoLogin) await demoLimits(services, demo.email);
  // Simulated infrastructure and recurring work (boots, clones, the reconciler, ...): durable timers
  // declared by the kinds, run by this process's scheduler (several processes share them).
  // Each pass first copies in the deployment's shared clock (moved by another process or `stratus clock`).
  const scheduler = new Scheduler(services, timerHandlers(), app.log, () => syncClock(services));
  // `--seed FILE`: applied before the service answers (a pipeline's ready file means seeded); idempotent.
  const seeded = config.seed
    ? await seedAtStart(services, config.seed, () => scheduler.runDue()).catch(async (e: unknown) => {
        await app.close();
        await services.store.close();
        throw e;
      })
    : null;
  let address: string;
  try {
    address = await app.listen({ host: config.host, port: config.port });
  } catch (err) {
    await app.close();
    await services.store.close();
    throw listenError(config, err);
  }
  scheduler.start();
  app.notifier.start();
  app.schedulerProbe = scheduler;
  // Fastify names the scheme from its own `https` option, which a server factory bypasses.
  if (tls) address = address.replace(/^http:/, 'https:');
  const base = `${address}/api/2.0/`;
  // The start banner: one structured event (a log collector reads its fields; --log-format pretty shows
  // it as lines), written whatever the log level: it is how an operator learns where and how to log in.
  const banner = {
    event: 'start',
    version: VERSION,
    url: base,
    database: `${services.store.dialect} ${services.store.location}`,
    demo_login: demo ? { email: demo.email, password: demo.password } : null,
    try: demo ? `curl -u '${demo.email}:${demo.password}' ${base}capabilities/` : null,
    // The web console (http/console.ts), where the demo login signs in too.
    console: config.consoleDir ? `${address}/ui/` : null,
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
    seeded: seeded ?? null,
  };
  app.log
    .child({}, { level: 'info' })
    .info(banner, `Stratus listening at ${base} (database: ${banner.database})${banner.console ? `, console at ${banner.console}` : ''}`);
  if (config.readyFile) {
    writeReadyFile(config.readyFile, {
      url: base,
      email: demo?.email ?? null,
      password: demo?.password ?? null,
      admin_token: adminToken === 'off' ? null : adminToken,
      pid: process.pid,
      ...(tls?.caFile ? { ca: tls.caFile } : {}),
    });
  }

  // SIGTERM/SIGINT: stop accepting, let in-flight requests finish, then close the database.
  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    if (config.readyFile) rmSync(config.readyFile, { force: true });
    await app.close();
    await scheduler.stop();
    await services.store.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}
