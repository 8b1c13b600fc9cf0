/**
 * `stratus serve --locations zrh,sjc`: several locations in one process, each its own cloud. Every location
 * gets what a one-location `serve` has (src/serve.ts): its services on its own store (openLocations), an app
 * (buildApp) with its notifier, caches and rate limiter, and a scheduler; they share the clock. One front
 * server listens and hands each request to its location's app by the request's host (http/locations.ts).
 */
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config.js';
import type { Services } from './core/context.js';
import { randomAlnum, randomPassword } from './core/passwords.js';
import { clockSyncer } from './admin/clock.js';
import { openLocations } from './cli/index.js';
import { timerHandlers } from './registry.js';
import { Scheduler } from './core/scheduler.js';
import { ensureDemoLogin } from './resources/users/users.js';
import { loadTls, type TlsMaterial } from './http/tls.js';
import { frontServer } from './http/locations.js';
import type { SeedReport } from './admin/seed.js';
import { VERSION } from './version.js';
import { clearReadyFile, demoLimits, listenError, onSignals, readyContent, seedAtStart, writeReadyFile } from './serve-steps.js';

interface Served {
  code: string;
  services: Services;
  app: FastifyInstance;
  scheduler: Scheduler;
}

export async function serveLocations(config: Config): Promise<void> {
  if (config.readyFile) clearReadyFile(config.readyFile);
  const all = await openLocations(config, 'migrate');
  const closeStores = () => Promise.allSettled(all.map((s) => s.store.close()));
  const adminToken = config.adminToken ?? randomAlnum(32);
  for (const s of all) s.config = { ...s.config, adminToken };
  let tls: TlsMaterial | null;
  try {
    tls = await loadTls(config);
  } catch (err) {
    await closeStores();
    throw err;
  }
  let base = '';
  const served: Served[] = [];
  // The demo login: the same account (e-mail and password) in every location that has none of its own.
  const generated = randomPassword();
  const demos: Record<string, { email: string; password: string } | null> = {};
  const seeded: Record<string, SeedReport> = {};
  try {
    for (const s of all) {
      const code = s.config.location;
      const app = await buildApp(s, undefined, { detached: { baseUrl: () => base } });
      const scheduler = new Scheduler(s, timerHandlers(), app.log, clockSyncer(s));
      served.push({ code, services: s, app, scheduler });
      await app.ready();
      const demo = await ensureDemoLogin(s, generated, config.demoLogin);
      if (demo && !config.demoLogin) await demoLimits(s, demo.email);
      demos[code] = demo;
      // `--seed FILE`: every location (a user's `locations` in the file names some only).
      if (config.seed) seeded[code] = await seedAtStart(s, config.seed, () => scheduler.runDue());
    }
  } catch (err) {
    await Promise.allSettled(served.map((x) => x.app.close()));
    await closeStores();
    throw err;
  }
  const apps = new Map(served.map((x) => [x.code, x.app]));
  const front = frontServer(config, apps, config.location, tls);
  const log = apps.get(config.location)!.log;
  try {
    await new Promise<void>((resolve, reject) => {
      front.once('error', reject);
      front.listen({ host: config.host, port: config.port }, () => resolve());
    });
  } catch (err) {
    await Promise.allSettled(served.map((x) => x.app.close()));
    await closeStores();
    throw listenError(config, err);
  }
  const port = (front.address() as AddressInfo).port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const scheme = tls ? 'https' : 'http';
  base = `${scheme}://${host}:${port}`;
  for (const x of served) {
    x.scheduler.start();
    x.app.notifier.start();
    x.app.schedulerProbe = x.scheduler;
    // Health, readiness and metrics report every location; the admin clock runs every location's due work.
    x.app.locationApps = apps;
  }
  const urls = Object.fromEntries(
    served.map((x) => [
      x.code,
      {
        api: `${base}/${x.code}/api/2.0/`,
        local: `${scheme}://${x.code}.localhost:${port}/api/2.0/`,
        name: `https://${x.code}.cloudsigma.com/api/2.0/`,
        ...(config.consoleDir ? { console: `${base}/${x.code}/ui/` } : {}),
      },
    ]),
  );
  const url = `${base}/api/2.0/`;
  const demo = demos[config.location] ?? null;
  const banner = {
    event: 'start',
    version: VERSION,
    url,
    locations: urls,
    default_location: config.location,
    database: Object.fromEntries(all.map((s) => [s.config.location, `${s.store.dialect} ${s.store.location}`])),
    demo_login: demo ? { email: demo.email, password: demo.password } : null,
    try: demo ? `curl -u '${demo.email}:${demo.password}' ${urls[served[1].code].api}capabilities/` : null,
    // The web console of the default location (each location's is in `locations`).
    console: config.consoleDir ? `${base}/ui/` : null,
    tls: tls
      ? tls.caFile
        ? `HTTPS for ${tls.names.join(', ')}; trust the local CA ${tls.caFile} (SSL_CERT_FILE, REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS) and map the names, e.g. curl --cacert ${tls.caFile} --resolve ${served[1].code}.cloudsigma.com:<port>:127.0.0.1`
        : `HTTPS with ${config.tlsCert} (${tls.names.join(', ')})`
      : null,
    admin:
      adminToken === 'off'
        ? null
        : {
            url: `${base}/_stratus/admin/ (${served.map((x) => `${base}/${x.code}/_stratus/admin/`).join(', ')})`,
            access: config.adminAccess,
            token: config.adminToken === null ? adminToken : 'from --admin-token',
          },
    seeded: config.seed ? seeded : null,
  };
  log.child({}, { level: 'info' }).info(banner, `Stratus listening at ${url} for ${served.map((x) => x.code).join(', ')} (default ${config.location})`);
  if (config.readyFile)
    writeReadyFile(
      config.readyFile,
      readyContent({ url, locations: Object.fromEntries(served.map((x) => [x.code, urls[x.code].api])), demo, adminToken, tls }),
    );

  onSignals(log, config.readyFile, async () => {
    const stopped = new Promise((resolve) => front.close(resolve));
    front.closeIdleConnections();
    // The apps answer 503 to requests still arriving on open connections while in-flight ones finish.
    await Promise.allSettled(served.map((x) => x.app.close()));
    front.closeAllConnections();
    await stopped;
    await Promise.allSettled(served.map((x) => x.scheduler.stop()));
    await closeStores();
  });
}
