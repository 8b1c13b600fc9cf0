import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Services } from '../core/context.js';
import { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import { documentPath, routeLabel } from './routes.js';

/**
 * Prometheus metrics at `/_stratus/metrics` (prom-client's text format), public and never rate-limited like
 * the other operator endpoints (http/ops.ts):
 *
 *   stratus_http_request_duration_seconds{route,method,status}  histogram of every answered request (its
 *                                          _count is the request count); `route` is the route's pattern
 *                                          (`/api/2.0/servers/:uuid/`), `unmatched` for a 404 of no route
 *   stratus_http_rejections_total{reason}  rate_limit, login_protection, auth (401)
 *   stratus_scheduler_due_timers           durable timers due by the injected clock and not yet run
 *   stratus_scheduler_lag_seconds          how long the oldest of them has been due
 *   stratus_scheduler_running              1 while this process's scheduler loop runs
 *   stratus_db_pool_connections{state}     PostgreSQL pool: total, idle, waiting (absent on SQLite)
 *   stratus_servers{status}                simulated servers by status (all accounts)
 *   stratus_answer_cache_answers{outcome}  GET answers of reusable routes since start: reused, kept (made and
 *                                          kept), timed (made from the clock: not kept), verified (reused
 *                                          ones made again under STRATUS_ANSWER_CACHE_VERIFY=1); answer-cache.ts
 *   stratus_http_early_answers             GET answers given before Fastify routed the request (http/routes.ts quickAnswers)
 *   stratus_answer_cache_bytes             what the kept answers take (bounded by --answer-cache-mib)
 *   stratus_object_cache_bytes             what the kept presented objects take (bounded by --cache-mib)
 *   process_*, nodejs_*                    prom-client's default process metrics
 *
 * With several locations (`--locations`) every metric carries a `location` label (each location's app has its
 * registry, labelled), and `/_stratus/metrics` of any location answers for all of them: one exposition with
 * every location's series (the process_* ones are the process's, the same under each label).
 *
 * The request path pays for one histogram observation: an `onResponse` hook looks the labelled child up in
 * nested maps (no string is built per request) and observes the elapsed time Fastify already measured.
 * Everything else is read when Prometheus scrapes. prom-client is bundled into the `serve` chunk: loaded
 * from node_modules it cost start-up ~25 ms of resolving and compiling its files.
 */

const BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export type RejectionReason = 'rate_limit' | 'login_protection' | 'auth';

export class Metrics {
  private readonly children = new Map<string, Map<string, Map<number, Histogram.Internal<string>>>>();
  private readonly registry = new Registry();
  private readonly duration;
  private readonly rejections;
  /** Requests answered before Fastify (http/routes.ts quickAnswers). */
  early = 0;

  constructor(services: Services, app: FastifyInstance) {
    const registers = [this.registry];
    if (services.config.locations.length > 1) this.registry.setDefaultLabels({ location: services.config.location });
    this.duration = new Histogram({
      name: 'stratus_http_request_duration_seconds',
      help: 'Answered HTTP requests by route pattern, method and status, and how long each took',
      labelNames: ['route', 'method', 'status'],
      buckets: BUCKETS,
      registers,
    });
    this.rejections = new Counter({
      name: 'stratus_http_rejections_total',
      help: 'Requests refused by rate limits, login protection, or for missing or wrong credentials',
      labelNames: ['reason'],
      registers,
    });
    const { store } = services;
    const due = new Gauge({ name: 'stratus_scheduler_due_timers', help: 'Durable timers due and not yet run', registers });
    const lag = new Gauge({ name: 'stratus_scheduler_lag_seconds', help: 'How long the oldest due timer has waited', registers });
    new Gauge({
      name: 'stratus_scheduler_running',
      help: "1 while this process's scheduler loop runs",
      registers,
      async collect() {
        const probe = app.schedulerProbe;
        this.set(probe?.polling ? 1 : 0);
        const backlog = await (probe ?? { backlog: () => ({ due: 0, lagMs: 0 }) }).backlog();
        due.set(backlog.due);
        lag.set(backlog.lagMs / 1000);
      },
    });
    new Gauge({
      name: 'stratus_db_pool_connections',
      help: 'PostgreSQL connection pool: total, idle, and requests waiting for a connection',
      labelNames: ['state'],
      registers,
      collect() {
        const pool = store.poolStats();
        if (!pool) return;
        for (const [state, n] of Object.entries(pool)) this.labels(state).set(n);
      },
    });
    new Gauge({
      name: 'stratus_servers',
      help: 'Simulated servers by status',
      labelNames: ['status'],
      registers,
      async collect() {
        const rows = await store.operator.serversByStatus(store.db);
        this.reset();
        for (const r of rows) this.labels(r.status ?? 'unknown').set(r.n);
      },
    });
    new Gauge({
      name: 'stratus_answer_cache_answers',
      help: 'GET answers of reusable routes since start: reused, kept, timed (read the clock: not kept), verified (made again in verify mode)',
      labelNames: ['outcome'],
      registers,
      collect() {
        for (const [outcome, n] of Object.entries(app.answerCache?.counts ?? {})) this.labels(outcome).set(n);
      },
    });
    const early = () => this.early;
    new Gauge({
      name: 'stratus_http_early_answers',
      help: 'GET answers of reusable routes given before the framework routed the request (kept or made; the rest of its conventions the same)',
      registers,
      collect() {
        this.set(early());
      },
    });
    new Gauge({
      name: 'stratus_answer_cache_bytes',
      help: 'Bytes the kept GET answers take',
      registers,
      collect() {
        this.set(app.answerCache?.size.bytes ?? 0);
      },
    });
    new Gauge({
      name: 'stratus_object_cache_bytes',
      help: 'Bytes the kept presented objects (as objects and as served text) take, as estimated (bounded by --cache-mib)',
      registers,
      collect() {
        this.set(store.presented.size.bytes + store.fragments.size.bytes);
      },
    });
    collectDefaultMetrics({ register: this.registry });
  }

  /** One answered request (the onResponse hook). */
  observe(route: string, method: string, status: number, seconds: number): void {
    let byMethod = this.children.get(route);
    if (!byMethod) this.children.set(route, (byMethod = new Map()));
    let byStatus = byMethod.get(method);
    if (!byStatus) byMethod.set(method, (byStatus = new Map()));
    let child = byStatus.get(status);
    if (!child) byStatus.set(status, (child = this.duration.labels(route, method, String(status))));
    child.observe(seconds);
  }

  rejected(reason: RejectionReason): void {
    this.rejections.labels(reason).inc();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  json(): Promise<MetricObjectWithValues<MetricValue<string>>[]> {
    return this.registry.getMetricsAsJSON();
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Metrics;
  }
}

/** Every location's metrics as one exposition: series of one name from several registries side by side (their `location` labels differ). */
async function allLocations(apps: ReadonlyMap<string, FastifyInstance>): Promise<string> {
  const each = await Promise.all([...apps.values()].map((a) => a.metrics.json()));
  return AggregatorRegistry.aggregate(each).metrics();
}

/** Installs the request hook and `/_stratus/metrics`. */
export function registerMetrics(app: FastifyInstance, services: Services): Metrics {
  const metrics = new Metrics(services, app);
  app.decorate('metrics', metrics);
  // The callback form: no promise per request.
  app.addHook('onResponse', (req: FastifyRequest, reply: FastifyReply, done: () => void) => {
    metrics.observe(routeLabel(req), req.method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
  documentPath(app, {
    url: '/_stratus/metrics',
    public: true,
    doc: { GET: { summary: 'Prometheus metrics (text exposition format)', responses: { 200: { contentType: 'text/plain' } } } },
  });
  app.route({
    method: ['GET', 'HEAD'],
    url: '/_stratus/metrics',
    handler: async (_req, reply) =>
      reply.header('content-type', metrics.contentType).send(await (app.locationApps ? allLocations(app.locationApps) : metrics.text())),
  });
  return metrics;
}
