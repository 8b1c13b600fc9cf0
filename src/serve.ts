/**
 * `stratus serve`: the API server in this process (src/main.ts loads this module only for `serve`), with
 * its scheduler loop and signal handling. With `--workers N` this process is the primary of N such
 * processes (src/serve-workers.ts), and each of them runs `serve` as a worker: the primary has done the
 * one-time steps (schema, demo login, seed, ready file), the worker serves, runs its scheduler loop when the
 * primary makes it the owner, and drains when told to.
 */
import cluster from 'node:cluster';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { randomAlnum, randomPassword } from './core/passwords.js';
import { clockSyncer } from './admin/clock.js';
import { openServices as open } from './cli/index.js';
import { timerHandlers } from './registry.js';
import { Scheduler } from './core/scheduler.js';
import { ensureDemoLogin } from './resources/users/users.js';
import { loadTls, type TlsMaterial } from './http/tls.js';
import { serveLocations } from './serve-locations.js';
import { drain, type Drain } from './http/drain.js';
import { exitOnFatalErrors } from './fatal.js';
import { servePrimary, type ToPrimary, type ToWorker } from './serve-workers.js';
export { DEMO_LIMITS } from './serve-steps.js';
import { clearReadyFile, demoLimits, listenError, onSignals, readyContent, seedAtStart, startBanner, writeReadyFile } from './serve-steps.js';

export async function serve(config: Config): Promise<void> {
  // From here on an error nothing catches stops the process with exit code 1 (src/fatal.ts).
  exitOnFatalErrors();
  // Several locations: one app per location behind a front server that picks by host (src/serve-locations.ts).
  if (config.locations.length > 1) return serveLocations(config);
  if (config.workers > 1 && cluster.isPrimary) return servePrimary(config);
  const worker = cluster.isWorker;
  // The primary's messages (ToWorker) may come while this worker still starts (a stop during a restart):
  // kept until it listens, then acted on.
  const asked: ToWorker[] = [];
  let act: ((msg: ToWorker) => void) | null = null;
  if (worker) process.on('message', (msg: ToWorker) => (act ? act(msg) : asked.push(msg)));
  // A ready file left by an earlier run must not tell a pipeline this one is up: it goes first.
  if (config.readyFile && !worker) clearReadyFile(config.readyFile);
  const services = await open(config, 'migrate');
  // Several workers on one SQLite file: their changes reach each other's event streams (store/changes.ts).
  if (worker) services.store.changes.origin = `${cluster.worker!.id}:${process.pid}`;
  services.store.waitForWritesOnEventLoop();
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
  const [demo, app] = await Promise.all([
    worker ? null : ensureDemoLogin(services, randomPassword(), config.demoLogin),
    buildApp(services, undefined, { tls }),
  ]);
  if (demo && !config.demoLogin) await demoLimits(services, demo.email);
  if (config.logLevel !== 'silent') exitOnFatalErrors((err, kind) => app.log.fatal({ err, kind }, `fatal error (${kind}): exiting`));
  // Simulated infrastructure and recurring work (boots, clones, the reconciler, ...): durable timers
  // declared by the kinds, run by this process's scheduler (several processes share them).
  // Each pass first copies in the deployment's shared clock (moved by another process or `stratus clock`).
  const scheduler = new Scheduler(services, timerHandlers(), app.log, clockSyncer(services));
  // `--seed FILE`: applied before the service answers (a pipeline's ready file means seeded); idempotent.
  const seeded =
    config.seed && !worker
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
  // A worker's loops (timers, notifications) run once the primary makes it the scheduler's owner (one at a
  // time: the others do no background work at all); any worker still runs the work its own requests made
  // due at once (http/routes.ts), claimed as every timer is.
  if (!worker) {
    scheduler.start();
    app.notifier.start();
  }
  // A worker that does not own the loop reports the deployment's: the owner's loop runs while the primary
  // lives (it makes another worker the owner when one ends); the backlog's lag says whether work is stuck.
  app.schedulerProbe = worker
    ? {
        get polling() {
          return scheduler.polling || process.connected === true;
        },
        backlog: () => scheduler.backlog(),
        runDue: () => scheduler.runDue(),
        dueAtOnce: () => scheduler.dueAtOnce(),
      }
    : scheduler;
  // Fastify names the scheme from its own `https` option, which a server factory bypasses.
  if (tls) address = address.replace(/^http:/, 'https:');
  const base = `${address}/api/2.0/`;
  if (worker) {
    app.log.info({ worker: cluster.worker!.id, url: base }, 'worker listening');
    process.send!({ type: 'listening', address } satisfies ToPrimary);
  } else {
    // The start banner: one structured event (a log collector reads its fields; --log-format pretty shows
    // it as lines), written whatever the log level: it is how an operator learns where and how to log in.
    const banner = startBanner({ config, address, database: `${services.store.dialect} ${services.store.location}`, demo, tls, adminToken, seeded });
    // Its `console` field is the web console's URL (a line of its own in the pretty form).
    app.log.child({}, { level: 'info' }).info(banner, `Stratus listening at ${base} (database: ${banner.database})`);
    if (config.readyFile) writeReadyFile(config.readyFile, readyContent({ url: base, demo, adminToken, tls }));
  }
  // Started: the compiled build's loader keeps the code compiled so far for the next start (src/bundle-loader.ts).
  (process as NodeJS.EventEmitter).emit('stratus:started');

  // SIGTERM/SIGINT: stop accepting, let in-flight requests finish, then close the database. A worker is told by
  // the primary instead (a `drain`): a restart's keeps its idle keep-alive connections until they time out
  // (http/drain.ts), and says when it no longer accepts.
  let draining: Drain | null = null;
  let restart = false;
  const signals = onSignals(app.log, worker ? null : config.readyFile, async () => {
    if (worker) {
      draining = drain(app, { keepIdle: restart, limitMs: drainLimitMs(config, restart) });
      // (A primary gone meanwhile needs no telling: the callback takes the send's failure.)
      void draining.stopped.then(() => process.connected && process.send!({ type: 'stopped' } satisfies ToPrimary, undefined, {}, () => {}));
      await draining.closed;
    } else await app.close();
    await scheduler.stop();
    await services.store.close();
  });
  if (worker) {
    act = (msg) => {
      if (msg.type === 'scheduler' && !signals.closing) {
        scheduler.start();
        app.notifier.start();
      }
      if (msg.type === 'drain') {
        // A stop while a restart's drain runs (the whole service stops): idle connections end now.
        if (draining && !msg.restart) draining.hurry();
        restart = msg.restart;
        void signals.shutdown(msg.restart ? 'restart' : 'stop');
      }
    };
    for (const msg of asked) act(msg);
    // The primary gone (killed): nothing restarts or routes to this worker any more.
    process.once('disconnect', () => void signals.shutdown('disconnected'));
  }
}

/**
 * How long a worker's drain may take: a request still arriving has the request timeout; in a restart, an idle
 * keep-alive connection lasts its keep-alive timeout first.
 */
function drainLimitMs(config: Config, restart: boolean): number {
  return (restart ? config.keepAliveTimeoutMs : 0) + config.requestTimeoutMs + 1000;
}
