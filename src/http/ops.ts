import type { FastifyInstance } from 'fastify';
import type { Services } from '../core/context.js';
import type { ResourceDecl } from '../core/resource.js';
import { VERSION } from '../version.js';
import { registerPath, type JsonSchema, type PathSpec } from './routes.js';
import { API_BASE } from './resource-routes.js';

/**
 * The service's own endpoints for operators and orchestrators, outside the API namespace (`/_stratus/`):
 * unauthenticated, never rate-limited, cheap, and in the API's conventions (JSON or XML as negotiated,
 * OPTIONS/405, the error array).
 *
 *   /_stratus/health    liveness: the process answers (200 while it runs; 503 once it is shutting down)
 *   /_stratus/ready     readiness: the database answers, its schema is this version's, the scheduler runs
 *                       and is less than READY_MAX_LAG_MS behind (200, else 503 with the failing checks)
 *   With several locations (`--locations`) health and readiness also name the location that answers
 *   (`location`) and report every served location (`locations`); ready means every location is.
 *   /_stratus/version   this release, the API version, Node, the database engine and its schema
 *
 * And the API's own index: `GET /api/2.0/` lists the resource kinds with their list and schema URLs (as
 * tastypie's top level does), without credentials; `GET /` points at the API and these endpoints.
 */
export const OPS_BASE = '/_stratus/';
/** A scheduler further behind than this is not ready (its due work has waited a minute of the injected clock). */
export const READY_MAX_LAG_MS = 60_000;

/** What the readiness check asks of the scheduler (src/core/scheduler.ts); set by whoever runs one. */
export interface SchedulerProbe {
  readonly polling: boolean;
  backlog(): Promise<{ due: number; lagMs: number }>;
  /** Runs the timers due now (the admin clock moves time, then this; a write that scheduled work due at once). */
  runDue?(): Promise<number>;
  /** core/timers.ts dueAtOnceCount of this process's store: a write that raised it waits for runDue before answering. */
  dueAtOnce?(): number;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The scheduler of this process, once started (src/serve.ts); readiness reports on it. */
    schedulerProbe: SchedulerProbe | null;
    /**
     * Every served location's app by its code when this process serves several (src/serve-locations.ts sets
     * it on each), else null: health, readiness and metrics report each location, the admin clock runs each one's due work.
     */
    locationApps: ReadonlyMap<string, FastifyInstance> | null;
    /** This app's own readiness (its store, schema and scheduler), what `/_stratus/ready` reports for it. */
    readiness(): Promise<Readiness>;
  }
}

export interface Readiness {
  status: 'ready' | 'not ready';
  checks: Record<'database' | 'schema' | 'scheduler', { ok: boolean } & Record<string, unknown>>;
}

/** An object with exactly these keys (all present). */
const obj = (properties: Record<string, JsonSchema>): JsonSchema => ({
  type: 'object',
  properties,
  required: Object.keys(properties),
  additionalProperties: false,
});
const check = (extra: Record<string, JsonSchema>): JsonSchema => ({ type: 'object', properties: { ok: { type: 'boolean' }, ...extra }, required: ['ok'] });
const ONE_READINESS = obj({
  status: { enum: ['ready', 'not ready'] },
  checks: obj({
    database: check({ ms: { type: 'number' }, error: { type: 'string' } }),
    schema: check({ version: { type: ['string', 'null'] }, expected: { type: ['string', 'null'] } }),
    scheduler: check({ running: { type: 'boolean' }, due_timers: { type: ['integer', 'null'] }, lag_ms: { type: ['number', 'null'] } }),
  }),
});
/** With several locations: `status` is every location's, `checks` the answering location's, and each one's beside them. */
const READINESS: JsonSchema = {
  ...ONE_READINESS,
  properties: {
    ...(ONE_READINESS.properties as Record<string, JsonSchema>),
    location: { type: 'string' },
    locations: { type: 'object', additionalProperties: ONE_READINESS },
  },
};
const HEALTH: JsonSchema = {
  type: 'object',
  properties: { status: { const: 'ok' }, location: { type: 'string' }, locations: { type: 'object', additionalProperties: { const: 'ok' } } },
  required: ['status'],
  additionalProperties: false,
};

export function registerOps(app: FastifyInstance, services: Services, kinds: ResourceDecl[]): void {
  app.decorate('schedulerProbe', null);
  app.decorate('locationApps', null);
  const { store } = services;
  app.decorate('readiness', async (): Promise<Readiness> => {
    const database = await timed(() => store.ping());
    const schema = database.ok ? await timed(() => store.schemaStatus()) : { ok: false, ms: 0, error: 'database unreachable' };
    const probe = app.schedulerProbe;
    const backlog = probe && database.ok ? await timed(() => probe.backlog()) : null;
    const status = schema.ok ? (schema as { value?: Awaited<ReturnType<typeof store.schemaStatus>> }).value : undefined;
    const checks = {
      database: { ok: database.ok, ms: database.ms, ...(database.error ? { error: database.error } : {}) },
      schema: {
        ok: !!status && status.pending.length === 0 && status.unknown.length === 0,
        version: status?.applied.at(-1) ?? null,
        expected: status?.known.at(-1) ?? null,
      },
      scheduler: {
        ok: !!probe?.polling && !!backlog?.ok && (backlog.value?.lagMs ?? 0) <= READY_MAX_LAG_MS,
        running: !!probe?.polling,
        due_timers: backlog?.value?.due ?? null,
        lag_ms: backlog?.value?.lagMs ?? null,
      },
    };
    return { status: Object.values(checks).every((c) => c.ok) ? 'ready' : 'not ready', checks };
  });
  const here = services.config.location;
  const noAuth = async () => {
    throw new Error('never called: the operator endpoints are public');
  };
  const paths: PathSpec[] = [
    {
      url: `${OPS_BASE}health`,
      public: true,
      methods: {
        GET: async () => {
          const apps = app.locationApps;
          // Several locations: each one's app answers (a location's app that is closing would not be 'ok').
          if (!apps) return { status: 200, body: { status: 'ok' } };
          return { status: 200, body: { status: 'ok', location: here, locations: Object.fromEntries([...apps.keys()].map((code) => [code, 'ok'])) } };
        },
      },
      doc: { GET: { summary: 'Liveness (with several locations: each one listed)', responses: { 200: HEALTH } } },
    },
    {
      url: `${OPS_BASE}ready`,
      public: true,
      doc: {
        GET: {
          summary: 'Readiness: database, schema version, scheduler',
          responses: { 200: READINESS, 503: READINESS },
        },
      },
      methods: {
        GET: async () => {
          const own = await app.readiness();
          const apps = app.locationApps;
          if (!apps) return { status: own.status === 'ready' ? 200 : 503, body: own };
          // Several locations: the process is ready when every location is (an orchestrator routes to the process).
          const each = Object.fromEntries(await Promise.all([...apps].map(async ([code, a]) => [code, a === app ? own : await a.readiness()] as const)));
          const ready = Object.values(each).every((r) => r.status === 'ready');
          return { status: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not ready', checks: own.checks, location: here, locations: each } };
        },
      },
    },
    {
      url: `${OPS_BASE}version`,
      public: true,
      doc: {
        GET: {
          summary: 'This release',
          responses: {
            200: obj({
              version: { type: 'string' },
              api: { type: 'string' },
              node: { type: 'string' },
              database: { type: 'string' },
              schema: { type: ['string', 'null'] },
            }),
          },
        },
      },
      methods: {
        GET: async () => {
          const { known } = await store.schemaStatus();
          return { status: 200, body: { version: VERSION, api: '2.0', node: process.version, database: store.dialect, schema: known.at(-1) } };
        },
      },
    },
    {
      url: API_BASE,
      public: true,
      methods: { GET: async () => ({ status: 200, body: apiIndex(kinds) }) },
      doc: {
        GET: {
          summary: 'The API index: every kind with its list and schema URLs',
          responses: { 200: { type: 'object', additionalProperties: { type: 'object' } } },
        },
      },
    },
    {
      url: '/',
      public: true,
      doc: {
        GET: { summary: 'Where the API and the operator endpoints are', responses: { 200: { type: 'object', additionalProperties: { type: 'string' } } } },
      },
      methods: {
        GET: async () => ({
          status: 200,
          body: { api: API_BASE, health: `${OPS_BASE}health`, ready: `${OPS_BASE}ready`, version: `${OPS_BASE}version`, metrics: `${OPS_BASE}metrics` },
        }),
      },
    },
  ];
  for (const spec of paths) registerPath(app, spec, noAuth, null);
}

/** tastypie's top level: `{kind: {list_endpoint, schema}}` for every kind, plus the account actions. */
function apiIndex(kinds: ResourceDecl[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const d of kinds) out[d.kind] = { list_endpoint: `${API_BASE}${d.kind}/`, schema: `${API_BASE}${d.kind}/schema/` };
  out.accounts = { actions: `${API_BASE}accounts/action/` };
  return out;
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ok: boolean; ms: number; value?: T; error?: string }> {
  const started = performance.now();
  try {
    const value = await fn();
    return { ok: true, ms: Math.round((performance.now() - started) * 100) / 100, value };
  } catch (err) {
    return { ok: false, ms: Math.round((performance.now() - started) * 100) / 100, error: String((err as Error)?.message ?? err).split('\n')[0] };
  }
}
