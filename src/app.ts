import { randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyRequest } from 'fastify';
import compress from '@fastify/compress';
import type { Services } from './core/context.js';
import { ApiError } from './core/errors.js';
import { registry, startKinds } from './registry.js';
import type { ResourceDecl } from './core/resource.js';
import { registerBodyParsers } from './http/body.js';
import { clientErrorHandler, frameworkErrors, guardUnusedBodies, hostMissing } from './http/edges.js';
import { locationRefusal } from './http/locations.js';
import { negotiate } from './http/negotiate.js';
import { send } from './http/respond.js';
import { fromDatabaseError } from './store/errors.js';
import { MAX_PARAM_LENGTH, quickAnswers, registerPath, trackRoutes, type QuickAnswerer } from './http/routes.js';
import { lazyChildLogger } from './http/lazy-logger.js';
import { AnswerCache } from './http/answer-cache.js';
import { ENCODINGS, ZLIB_OPTIONS } from './http/compression.js';
import { resourcePaths } from './http/resource-routes.js';
import { driveDataPaths } from './http/drive-data.js';
import { Auth } from './http/auth/index.js';
import { accountPaths } from './http/accounts/routes.js';
import { registerConfirmPage } from './http/accounts/confirm-page.js';
import { createMailer } from './notify/mailer.js';
import { Notifier } from './notify/worker.js';
import { EventStream } from './http/event-stream.js';
import type { RawQuery } from './http/query.js';
import { RateLimiter } from './http/ratelimit/limiter.js';
import { registerOps } from './http/ops.js';
import { registerConsole } from './http/console.js';
import { registerOpenApi } from './http/openapi.js';
import { Faults, registerAdmin } from './http/admin.js';
import { syncClock } from './admin/clock.js';
import { prettyStream } from './http/log-format.js';
import { LOGIN_LOCK_MESSAGE } from './resources/accounts/login-guard.js';
import { registerMetrics, type Metrics, type RejectionReason } from './http/metrics.js';

/** Turn anything thrown into an ApiError: our own pass through, Fastify's keep their status, the rest is a 500. */
function toApiError(err: unknown, req: FastifyRequest): ApiError {
  if (err instanceof ApiError) return err;
  const db = fromDatabaseError(err);
  if (db) return db;
  const fe = err as FastifyError;
  const status = typeof fe?.statusCode === 'number' ? fe.statusCode : 500;
  if (status === 413) return new ApiError('toolarge', 'Request body is too large');
  if (status >= 400 && status < 500) return new ApiError('validation', fe.message || 'Bad request');
  req.log.error({ err }, 'unhandled error');
  return new ApiError('backend', 'Internal error; the request id identifies it in the service log');
}

/**
 * Builds the HTTP app. The API's conventions (negotiation, body parsing, compression, errors, 404,
 * OPTIONS/405, request ids, authentication, rate limits) are installed here once; routes come from the registry.
 */
export async function buildApp(
  services: Services,
  kinds: ResourceDecl[] = registry,
  /** Serve HTTPS with this key and certificate (http/tls.ts); plain HTTP without. */
  opts: {
    tls?: { key: string; cert: string } | null;
    /**
     * One location of several (http/locations.ts): its server never listens, the front server hands it the
     * requests for its location (and does TLS); `baseUrl` is the front's, for e-mailed links.
     */
    detached?: { baseUrl: () => string };
  } = {},
): Promise<FastifyInstance> {
  const { config } = services;
  let quick: QuickAnswerer | null = null;
  // The kinds' start-up work (the library catalogue into the database): idempotent, safe for several processes.
  await startKinds(services, kinds);
  const app = Fastify<http.Server>({
    logger: { level: config.logLevel, ...(config.logFormat === 'pretty' ? { stream: prettyStream() } : {}) },
    bodyLimit: config.bodyLimit,
    // Our own node:http server, because slow-client protection needs options Fastify does not pass on:
    // Node checks request deadlines only every `connectionsCheckingInterval` (30 s by default).
    serverFactory: (fastify) => {
      // A repeated GET whose answer is kept is answered before Fastify (http/routes.ts quickAnswers), once the routes are in.
      const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
        if (quick === null || !quick(req, res, fastify)) fastify(req, res);
      };
      const options = {
        requestTimeout: config.requestTimeoutMs,
        headersTimeout: config.requestTimeoutMs,
        keepAliveTimeout: config.keepAliveTimeoutMs,
        connectionsCheckingInterval: Math.max(100, Math.min(1000, config.requestTimeoutMs / 2)),
        // Its refusal of a request without Host is an empty 400: hostMissing (http/edges.ts) answers instead.
        requireHostHeader: false,
      };
      // An https.Server is an http.Server to Fastify (same request events); `req.protocol` reads the socket.
      return opts.tls && !opts.detached
        ? (https.createServer({ ...options, key: opts.tls.key, cert: opts.tls.cert }, handler) as unknown as http.Server)
        : http.createServer(options, handler);
    },
    // While closing, requests still arriving on open connections get a 503 in the API's format (below),
    // not Fastify's own JSON object.
    return503OnClosing: false,
    genReqId: () => randomUUID(),
    // The request's logger is made when it first logs (http/lazy-logger.ts).
    childLoggerFactory: lazyChildLogger,
    // No route declares a Fastify schema (requests are checked by the declarations, answers serialised by
    // http/respond.ts): Fastify's ajv and fast-json-stringify compilers would be loaded and built at every
    // start (~8 ms) for nothing. A schema added some day fails loudly at start-up instead.
    schemaController: { compilersFactory: { buildValidator: noFastifySchemas, buildSerializer: noFastifySchemas } },
    // Connection-level failures (garbage instead of HTTP, headers over Node's limit, a client too slow to
    // send its request) and router failures (a bad %-escape, an overlong path segment) still answer in
    // the API's error format (http/edges.ts).
    clientErrorHandler,
    frameworkErrors: frameworkErrors(config.bodyLimit),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    logController: new LogController({ disableRequestLogging: config.logLevel !== 'debug' && config.logLevel !== 'trace' }),
  });

  trackRoutes(app);
  await app.register(compress, { global: true, threshold: 0, encodings: [...ENCODINGS], zlibOptions: ZLIB_OPTIONS });
  registerBodyParsers(app);
  guardUnusedBodies(app, config.bodyLimit);

  // Several workers (`--workers`): which process answered, for an operator (and the tests) to see the spread.
  const workerPid = config.workers > 1 ? String(process.pid) : null;
  app.decorateRequest('format', 'json');
  const faults = new Faults();
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // The callback form (no promise per request); Fastify catches what it throws.
  // The headers every answer starts with (also those answered before Fastify: http/routes.ts quickAnswers).
  const firstHeaders = (id: string): string[] => (workerPid ? ['x-request-id', id, 'x-stratus-worker', workerPid] : ['x-request-id', id]);
  app.addHook('onRequest', (req, reply, done) => {
    const first = firstHeaders(req.id);
    for (let i = 0; i < first.length; i += 2) reply.header(first[i], first[i + 1]);
    const q = req.query as RawQuery;
    req.format = negotiate(q.format, req.headers.accept);
    const noHost = hostMissing(req.raw);
    if (noHost) throw noHost;
    // A host naming a location this service does not serve (several locations: http/locations.ts).
    const refused = locationRefusal(req.raw);
    if (refused) throw refused;
    // One of several workers draining (a restart, src/serve-workers.ts): the others take new connections, and
    // what still arrives on this one's is answered and its connection closed, so no request is dropped.
    if (closing && config.workers > 1) reply.header('Connection', 'close');
    else if (closing) throw new ApiError('concurrency', 'The service is shutting down; retry the request', null, { Connection: 'close' });
    // Faults injected through the admin plane: one boolean per request while none is in force.
    if (faults.active) faults.check(req.method, req.url);
    done();
  });

  // `--access-log`: one line per answered request at info, whatever the log level of the rest.
  const access = config.accessLog ? app.log.child({}, { level: 'info' }) : null;
  const logAccess = (id: string, method: string, url: string, status: number, ms: number, user: string | null) =>
    access?.info({ req_id: id, method, path: url.split('?')[0], status, duration_ms: Math.round(ms * 10) / 10, user }, 'request');
  if (access)
    app.addHook('onResponse', (req, reply, done) => {
      logAccess(req.id, req.method, req.url, reply.statusCode, reply.elapsedTime, req.caller?.uuid ?? null);
      done();
    });

  // Set once the routes are in (below); the error handler counts refusals on it.
  let metrics: Metrics | null = null;
  app.setErrorHandler((err, req, reply) => {
    const e = toApiError(err, req);
    if (metrics && (e.type === 'ratelimit' || e.type === 'auth')) metrics.rejected(rejectionReason(e));
    return send(reply, req.format ?? 'json', { status: e.status, body: [e.toWire()], root: 'objects', headers: withoutBrowserChallenge(req, e.headers) });
  });
  app.setNotFoundHandler((req, reply) => {
    const e = new ApiError('notexist', `No resource at ${req.url.split('?')[0]}`);
    return send(reply, req.format ?? 'json', { status: 404, body: [e.toWire()], root: 'objects' });
  });

  // Basic, Digest and cookie sessions behind one Authenticator (http/auth/index.ts).
  const auth = await Auth.create(services);
  const mailer = createMailer(config, services.clock);
  app.addHook('onClose', async () => mailer.close());
  // Notifications (outbox fan-out and delivery) and the websocket event stream (src/notify/).
  const notifier = new Notifier(services, mailer, app.log);
  app.decorate('notifier', notifier);
  app.addHook('onClose', async () => notifier.stop());
  await new EventStream(services, auth.asyncAuth, app.log).attach(app);
  const publicUrl = () => config.publicUrl ?? (opts.detached ? opts.detached.baseUrl() : listeningUrl(app, config.host, opts.tls ? 'https' : 'http'));
  const accounts = accountPaths(services, auth, { mailer, publicUrl, log: app.log });
  await registerConfirmPage(app, services, () => `${publicUrl()}/api/2.0/`);
  const limiter = RateLimiter.create(services, app.log);
  app.decorate('rateLimiter', limiter);
  if (limiter) app.addHook('onClose', () => limiter.close());
  // Kept GET answers (http/answer-cache.ts), on the store's answer token (on PostgreSQL a LISTEN connection).
  if (config.answerCacheMiB > 0) await services.store.enableAnswerReuse();
  const answers =
    config.answerCacheMiB > 0
      ? new AnswerCache(
          config.answerCacheMiB * 1024 * 1024,
          services.store.answerToken,
          services.store.settleAnswers,
          services.clock,
          process.env.STRATUS_ANSWER_CACHE_VERIFY === '1',
          services.store.scopedAnswers,
        )
      : null;
  app.decorate('answerCache', answers);
  // Drive data (uploads, downloads) where the drives kind is served.
  const data = kinds.some((k) => k.kind === 'drives') ? driveDataPaths(services) : [];
  for (const spec of [...resourcePaths(kinds, services), ...accounts, ...data]) registerPath(app, spec, auth.authenticate, limiter, answers);
  // Health, readiness, version and the API index: public, never limited (http/ops.ts).
  registerOps(app, services, kinds);
  // The web console (http/console.ts): a client of the routes above, served as files.
  if (config.consoleDir) registerConsole(app, config.consoleDir);
  // The contract of every route above (and of the admin plane below, read on the first request).
  registerOpenApi(app, kinds);
  metrics = registerMetrics(app, services);
  // Kept answers of reusable GETs, answered before Fastify where nothing else applies (http/routes.ts).
  const answeredMetrics = metrics;
  quick = quickAnswers(app, {
    plain: (raw) => !closing && !faults.active && hostMissing(raw) === null && locationRefusal(raw) === undefined,
    caller: (raw) => auth.freshCaller(raw),
    firstHeaders,
    answered: (a) => {
      const ms = performance.now() - a.startMs;
      answeredMetrics.early++;
      answeredMetrics.observe(a.route, a.method, a.status, ms / 1000);
      logAccess(a.id, a.method, a.url, a.status, ms, a.user);
    },
  });
  // The admin plane (http/admin.ts): absent with --admin-token off, or when no token was given to this app.
  if (config.adminToken && config.adminToken !== 'off')
    registerAdmin(app, services, config.adminToken, config.adminAccess, faults, {
      kinds,
      // The clock is the deployment's: with several locations a move makes every location's work due, and each runs it.
      runDue: async () => {
        let ran = 0;
        for (const a of app.locationApps?.values() ?? [app]) {
          ran += (await a.schedulerProbe?.runDue?.()) ?? 0;
          // Moving the clock may make retries due: the admin plane runs those too.
          await a.notifier.runDue();
        }
        return ran;
      },
      forgetCredentials: () => auth.cache.clear(),
      // The imported state's clock (real time when it has none).
      afterImport: () => syncClock(services, 0),
      log: app.log,
    });

  return app;
}

/**
 * A page's script (the web console, src/ui/) marks its requests `X-Requested-With: XMLHttpRequest` (the
 * convention of Django, Rails, Spring): its 401s come without `WWW-Authenticate`, else the browser answers
 * the Basic challenge with a password dialog of its own over the page (and a headless one waits for it
 * forever). Every other client gets the challenges as before.
 */
function withoutBrowserChallenge(req: FastifyRequest, headers: Record<string, string | string[]> | undefined): Record<string, string | string[]> | undefined {
  if (!headers || !('WWW-Authenticate' in headers) || req.headers['x-requested-with'] !== 'XMLHttpRequest') return headers;
  const { 'WWW-Authenticate': _challenge, ...rest } = headers;
  return rest;
}

function noFastifySchemas(): never {
  throw new Error('Fastify route schemas are not used here: check requests in the declarations (core/validate) instead');
}

/** Which guard refused a request: rate limits and login protection both answer 429 `ratelimit`. */
function rejectionReason(e: ApiError): RejectionReason {
  if (e.type === 'auth') return 'auth';
  return e.message.startsWith(LOGIN_LOCK_MESSAGE) ? 'login_protection' : 'rate_limit';
}

/** `http(s)://<host>:<port>` of this server as configured (the actual port when it was 0): the default base of e-mailed links. */
function listeningUrl(app: FastifyInstance, host: string, scheme: 'http' | 'https'): string {
  const addr = app.server.address();
  const port = addr && typeof addr === 'object' ? addr.port : 0;
  return `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
