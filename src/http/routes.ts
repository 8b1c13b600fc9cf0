import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '../core/context.js';
import type { Clock } from '../core/clock.js';
import { ApiError } from '../core/errors.js';
import { negotiate, type Format } from './negotiate.js';
import type { RawQuery } from './query.js';
import { send, serialise, type Result } from './respond.js';
import { AnswerCache, type CachedAnswer } from './answer-cache.js';
import type { AnswerScope, AnswerScopeKind } from '../store/answer-scopes.js';
import { truncateAtNul } from './json.js';
import { MALFORMED, PathTable, type PathMatch } from './path-table.js';
import { malformedUrl } from './edges.js';
import { requestInfo } from './auth/index.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

/** What a handler sees: plain data, no Fastify objects. */
export interface ApiRequest {
  caller: Caller;
  params: Record<string, string>;
  query: RawQuery;
  body: unknown;
  /** `scheme://host` the client addressed, for absolute `Location` headers. */
  origin: string;
  /** The request line, client address and headers, for the few handlers that need them (login, sessions). */
  http: RequestInfo;
  /** The clock the request's services read, where its answer may be reused (answer-cache.ts watches it). */
  clock?: Clock;
  /** The answer's format (negotiated from `format=` and `Accept`). */
  format: Format;
}

export interface RequestInfo {
  method: string;
  /** The raw request target (path and query), as Digest signs it. */
  url: string;
  ip: string;
  headers: IncomingHttpHeaders;
}

export type Handler = (req: ApiRequest) => Promise<Result>;

/** A JSON Schema (2020-12, the dialect of OpenAPI 3.1). */
export type JsonSchema = Record<string, unknown>;

/**
 * The contract of one method of a route, for the OpenAPI document (http/openapi.ts). Error answers (the error
 * array, per status) are added for every operation there; only what succeeds is described here.
 */
export interface OperationDoc {
  summary: string;
  /** Success answers: status -> the JSON body's schema; `null` for an empty body (204), `{contentType}` for another type. */
  responses: Record<number, JsonSchema | null | { contentType: string }>;
  /** Query parameters besides `format` (which every route takes): name -> description. */
  query?: Record<string, string>;
  /** The JSON request body, when the method reads one. */
  body?: JsonSchema;
  /** The answer's schema when `fields=` cuts its objects to some keys (any declared key may then be absent). */
  projected?: JsonSchema;
}

export type PathDoc = Partial<Record<HttpMethod, OperationDoc>>;

export interface PathSpec {
  url: string;
  methods: Partial<Record<HttpMethod, Handler>>;
  /** Reachable without credentials (sign-up, login). */
  public?: boolean;
  /** A larger body limit than the deployment's (the admin plane's state import). */
  bodyLimit?: number;
  /**
   * The handler reads the body itself, as a stream (`body` is the request's byte stream, whatever its
   * type): drive uploads, which must never be held in memory whole. Such a route checks its own limits.
   */
  rawBody?: boolean;
  /** The contract of each method; a route without one is missing from the OpenAPI document (and a test says so). */
  doc?: PathDoc;
  /**
   * Its GET answer depends only on the caller, the URL, the stored rows and the request's `clock`: it may be
   * reused while the rows stay the same (answer-cache.ts).
   */
  reusable?: boolean;
  /**
   * Its reusable GET answer is made only of the objects of the owners whose rows the caller can see (their
   * own, those an ACL shares with them, ownerless ones), with those owners' tags and ACLs: it is kept under
   * those owners' scopes (store/answer-scopes.ts) instead of every write's token; `own`: of the caller's
   * rows alone (a kind never shared).
   */
  answerScope?: AnswerScopeKind;
}

/** What a route contributes to the OpenAPI document. */
export interface DocumentedPath {
  url: string;
  public: boolean;
  doc?: PathDoc;
}

const documented = new WeakMap<FastifyInstance, DocumentedPath[]>();
const served = new WeakMap<FastifyInstance, { url: string; methods: string[] }[]>();

/**
 * Records every route `app` (and its child scopes) will serve, with the methods it answers (registerPath's
 * allowed list, not the catch-all it registers): the test that every route is in the contract reads it.
 */
export function trackRoutes(app: FastifyInstance): void {
  const list: { url: string; methods: string[] }[] = [];
  served.set(app, list);
  app.addHook('onRoute', (route) => {
    // registerPath lists its own paths.
    if ((route.config as { registered?: boolean } | undefined)?.registered) return;
    list.push({ url: route.url, methods: [route.method].flat().filter((m) => m !== 'HEAD' && m !== 'OPTIONS') });
  });
}

/** The routes `app` serves (after trackRoutes). */
export const servedRoutes = (app: FastifyInstance): readonly { url: string; methods: string[] }[] => served.get(app) ?? [];

/** Routes registered on `app` with their contracts, in registration order (the OpenAPI document reads them). */
export const documentedPaths = (app: FastifyInstance): readonly DocumentedPath[] => documented.get(app) ?? [];

/** Adds a route to `app`'s contract; registerPath does it for its routes, routes registered otherwise call it. */
export function documentPath(app: FastifyInstance, path: DocumentedPath): void {
  let list = documented.get(app);
  if (!list) documented.set(app, (list = []));
  list.push(path);
}

declare module 'fastify' {
  interface FastifyRequest {
    format: Format;
    caller?: Caller;
  }
  interface FastifyContextConfig {
    /** A route of registerPath's (trackRoutes lists those itself). */
    registered?: boolean;
  }
}

/** Longer path parameters match no route (a 404 before any work). */
export const MAX_PARAM_LENGTH = 200;

const ALL = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;

/** Authenticates a request or throws 401; injected so the auth schemes stay in their own module. */
export type Authenticator = (req: FastifyRequest) => Promise<Caller>;

/**
 * Rate limits (http/ratelimit): wraps authentication so a request is counted against its user, or, on a
 * public route or when authentication fails, against its client address. Absent when limits are off.
 */
export interface Limiter {
  /** `later`: the request only reads, so its count may be settled later, through `req.rateCheck` (limiter.ts). */
  guard(req: FastifyRequest, reply: FastifyReply, authenticate: Authenticator | null, later?: boolean): Promise<Caller | undefined>;
  /** Whether `guard` would count nothing and set no header for this caller's request now (false when unsure). */
  uncounted(userUuid: string, method: string, url: string): boolean;
}

/** A path registered with registerPath, and the guards it was registered with. */
interface Registered {
  spec: PathSpec;
  /** The methods it answers, `GET,PUT` (OPTIONS and the 405's `Allow`). */
  allowed: string;
  authenticate: Authenticator;
  limiter: Limiter | null;
  answers: AnswerCache | null;
}

type Matched = PathMatch<Registered>;

declare module 'fastify' {
  interface FastifyRequest {
    /** The registerPath route this request is for (set in its onRequest). */
    matched: Matched | null;
  }
}

const tables = new WeakMap<FastifyInstance, PathTable<Registered>>();
const CATCH_ALL = '*';

/**
 * `app`'s table of registerPath routes (path-table.ts), created with the one Fastify route that serves them
 * all: any method, any path no other Fastify route claims (the router prefers static routes to a wildcard).
 */
function tableOf(app: FastifyInstance): PathTable<Registered> {
  let table = tables.get(app);
  if (table) return table;
  const t = (table = new PathTable<Registered>(MAX_PARAM_LENGTH));
  tables.set(app, t);
  app.decorateRequest('matched', null);
  app.decorateRequest('rateCheck', null);
  app.route({
    method: [...ALL],
    url: CATCH_ALL,
    config: { registered: true },
    onRequest: async (req: FastifyRequest, reply: FastifyReply) => {
      const path = pathOf(req.url);
      const m = t.match(path);
      if (m === MALFORMED) throw malformedUrl(path);
      if (!m) throw new ApiError('notexist', `No resource at ${path}`);
      req.matched = m;
      return admit(m.value, req, reply);
    },
    handler: (req: FastifyRequest, reply: FastifyReply) => answer(req.matched!, req, reply),
  });
  return table;
}

const pathOf = (url: string): string => {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
};

/** The route label of a request for metrics: its pattern, `unmatched` when no route took it. */
export function routeLabel(req: FastifyRequest): string {
  if (req.matched) return req.matched.pattern;
  const url = req.routeOptions.url;
  return url === undefined || url === CATCH_ALL ? 'unmatched' : url;
}

/**
 * Registers one URL for every HTTP method. Before the body is even read, OPTIONS is answered with the
 * allowed list, a method not in it gets 405 with `Allow`, and the caller is authenticated — the same
 * order tastypie uses (method check, then authentication) — and counted against the rate limits.
 * HEAD follows GET. The path goes into the app's path table; one with a body limit of its own (the
 * admin plane's state import) is a Fastify route of its own, since Fastify applies the limit per route.
 */
export function registerPath(app: FastifyInstance, spec: PathSpec, authenticate: Authenticator, limiter?: Limiter | null, answers?: AnswerCache | null): void {
  const allowed = (Object.keys(spec.methods) as HttpMethod[]).join(',');
  documentPath(app, { url: spec.url, public: spec.public ?? false, doc: spec.doc });
  served.get(app)?.push({ url: spec.url, methods: allowed.split(',').filter(Boolean) });
  const entry: Registered = { spec, allowed, authenticate, limiter: limiter ?? null, answers: answers ?? null };
  if (!spec.bodyLimit && !spec.rawBody) {
    tableOf(app).add(spec.url, entry);
    return;
  }
  const route = (scope: FastifyInstance) =>
    scope.route({
      method: [...ALL],
      url: spec.url,
      ...(spec.bodyLimit ? { bodyLimit: spec.bodyLimit } : {}),
      // Raw bytes go out as they are (a download's ranges count bytes of the drive, not of a gzip stream).
      ...(spec.rawBody ? { compress: false } : {}),
      config: { registered: true },
      onRequest: async (req: FastifyRequest, reply: FastifyReply) => {
        req.matched = { value: entry, pattern: spec.url, params: req.params as Record<string, string> };
        return admit(entry, req, reply);
      },
      handler: (req: FastifyRequest, reply: FastifyReply) => answer(req.matched!, req, reply),
    });
  if (!spec.rawBody) {
    route(app);
    return;
  }
  // A scope of its own whose only body parser hands the handler the byte stream, unread.
  void app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, payload, done) => done(null, payload));
    route(scope);
  });
}

/** OPTIONS, 405, then authentication and rate limits: all before the body is read. */
async function admit(r: Registered, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  if (method === 'OPTIONS') {
    reply.code(200).header('allow', r.allowed).header('content-type', 'text/plain; charset=utf-8').send(r.allowed);
    return reply;
  }
  if (!r.spec.methods[method as HttpMethod])
    throw new ApiError('method', `Method ${req.method} is not allowed on this URL; allowed: ${r.allowed}`, null, { Allow: r.allowed });
  // A reusable GET only reads: its count may travel with its read, and is checked before it answers.
  if (r.limiter) req.caller = await r.limiter.guard(req, reply, r.spec.public ? null : r.authenticate, method === 'GET' && r.spec.reusable === true);
  else if (!r.spec.public) req.caller = await r.authenticate(req);
  return undefined;
}

/**
 * Runs the handler, or reuses its answer (answer-cache.ts). A rate-limit count left for later (Limiter
 * `later`) is settled before anything is sent, the handler's own failure included: over its budget, the
 * request is answered 429 whatever the handler made of it.
 */
function answer(m: Matched, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const check = req.rateCheck;
  if (!check) return made(m, req, reply, null);
  return made(m, req, reply, check).catch(async (err: unknown) => {
    await check();
    throw err;
  });
}

/** What a handler sees of a request. */
function apiRequest(
  caller: Caller,
  params: Record<string, string>,
  query: RawQuery,
  body: unknown,
  protocol: string,
  host: string,
  http: RequestInfo,
  clock: Clock | undefined,
  format: Format,
): ApiRequest {
  return {
    caller,
    // Strings end at `\0`, as in bodies (http/body.ts): neither engine stores or compares a NUL.
    params: truncateAtNul({ ...params }) as Record<string, string>,
    query: truncateAtNul(query) as RawQuery,
    body,
    origin: `${protocol}://${host}`,
    http,
    clock,
    format,
  };
}

/** Where a reusable GET's answer is kept: its key, and the scope of its token (none: the store's global token). */
function keptAs(r: Registered, caller: Caller | undefined, format: Format, host: string, url: string, params: Record<string, string>) {
  const key = AnswerCache.key(caller?.uuid ?? '', format, host, url);
  const scope: AnswerScope | undefined = r.spec.answerScope && caller ? { caller: caller.uuid, scope: r.spec.answerScope, uuid: params.uuid } : undefined;
  return { key, scope };
}

async function made({ value: r, params }: Matched, req: FastifyRequest, reply: FastifyReply, check: (() => Promise<void>) | null): Promise<FastifyReply> {
  const { spec, answers } = r;
  const method = (req.method === 'HEAD' ? 'GET' : req.method) as HttpMethod;
  const reuse = method === 'GET' && spec.reusable ? answers : null;
  const { key, scope } = reuse ? keptAs(r, req.caller, req.format, req.host, req.url, params) : { key: '', scope: undefined };
  // Read before anything the answer is made of: a change after it makes the entry unreachable.
  const { hit, token } = reuse ? await reuse.lookup(key, scope) : {};
  if (hit && !reuse!.verify) {
    if (check) await check();
    return AnswerCache.send(reply, req.headers, hit);
  }
  const read = { clock: false };
  // A write whose transitions take no time (durations of 0, as under --ci) finishes them before it answers.
  const settle = method === 'GET' ? null : req.server.schedulerProbe;
  const dueBefore = settle?.dueAtOnce?.() ?? 0;
  const result = await spec.methods[method]!(
    apiRequest(req.caller!, params, req.query as RawQuery, req.body, req.protocol, req.host, requestInfo(req), reuse?.watch(read), req.format),
  );
  if (settle?.runDue && (settle.dueAtOnce?.() ?? 0) !== dueBefore) await settle.runDue();
  if (check) await check();
  if (token === undefined || result.status !== 200 || result.headers || result.body === undefined || result.raw) {
    // (Verify mode: a kept 200 where a fresh answer is something else is as stale as one with other bytes.)
    if (hit && (await reuse!.unchangedSince(token!, scope)))
      throw new Error(`answer cache: the reused answer of ${req.url} is a 200, a fresh one a ${result.status}: ${hit.payload}`);
    return send(reply, req.format, result);
  }
  const answer = serialise(req.format, result);
  // (A write committed while the fresh answer was made explains a difference: then it proves nothing.)
  if (hit && hit.payload !== answer.payload && (await reuse!.unchangedSince(token, scope)))
    throw new Error(`answer cache: the reused answer of ${req.url} differs from a fresh one: ${hit.payload} / ${answer.payload}`);
  if (hit) reuse!.counts.verified++;
  reuse!.made(key, token, answer, read.clock);
  return AnswerCache.send(reply, req.headers, answer);
}

/** What the app's own hooks contribute to an answer given before Fastify sees the request (app.ts). */
export interface QuickEnv {
  /** Nothing the app's onRequest checks (Host, location, shutting down, injected faults) would refuse the request or mark its answer. */
  plain(req: IncomingMessage): boolean;
  /** The caller of credentials verified within the last moments, else null (Auth.freshCaller). */
  caller(req: Pick<RequestInfo, 'headers' | 'ip'>): Caller | null;
  /** The headers every answer starts with, as the app's onRequest sets them on Fastify's replies, for request `id`. */
  firstHeaders(id: string): string[];
  /** A request answered (the app's onResponse hooks: metrics and the access log); `startMs` from performance.now(). */
  answered(a: { id: string; route: string; method: string; url: string; status: number; startMs: number; user: string }): void;
}

/** Answers a request before Fastify (true), or leaves it to Fastify (false; or `fallback` called later). */
export type QuickAnswerer = (req: IncomingMessage, res: ServerResponse, fallback: (req: IncomingMessage, res: ServerResponse) => void) => boolean;

/**
 * The query of a URL when it is plain (`k=v` pairs of distinct keys, no escapes, no `+`): what Fastify's parser
 * makes of it, without Fastify. Null for anything else (Fastify parses it).
 */
function plainQuery(search: string): RawQuery | null {
  const out = Object.create(null) as RawQuery;
  if (search === '') return out;
  for (const part of search.split('&')) {
    const eq = part.indexOf('=');
    if (eq <= 0) return null;
    const k = part.slice(0, eq);
    const v = part.slice(eq + 1);
    if (!PLAIN_KEY.test(k) || !PLAIN_VALUE.test(v) || k in out || k === '__proto__') return null;
    out[k] = v;
  }
  return out;
}
const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PLAIN_VALUE = /^[A-Za-z0-9_.,:~-]*$/;

/**
 * A reusable GET answered before Fastify builds a request, runs its router and hooks: on a small answer those
 * cost more than the answer (bench/cpu.ts: ~70 µs of CPU for a kept `/capabilities/` against ~30 µs for
 * node:http alone). It is taken only where every convention gives what it gives the same request through
 * Fastify, by the same functions: a registerPath route that declares its GET reusable (the path table; a URL
 * whose answer is kept was routed there by Fastify when it was made), nothing the app's onRequest would refuse
 * or add (QuickEnv.plain), a plain query (plainQuery) and the format it and `Accept` choose (negotiate), Basic
 * credentials verified moments ago (Auth.freshCaller: nothing for login protection to count), no rate limit
 * that counts the request (Limiter.uncounted: nothing to count, no header to set), no request body. The answer
 * is the kept one while current (AnswerCache.lookup, settled as for Fastify), else the handler's, kept as
 * Fastify's route keeps it. Anything else goes on through Fastify unchanged (`fallback`), nothing counted or
 * sent: a handler's error or an answer other than a plain 200 included (a reusable GET only reads, so making it
 * again there changes nothing). Verify mode sends every request through Fastify, which checks kept answers.
 */
export function quickAnswers(app: FastifyInstance, env: QuickEnv): QuickAnswerer | null {
  const table = tables.get(app);
  if (!table) return null;
  return (req, res, fallback) => {
    const method = req.method;
    if (method !== 'GET' && method !== 'HEAD') return false;
    const headers = req.headers;
    if (headers.authorization === undefined || headers['content-length'] !== undefined || headers['transfer-encoding'] !== undefined) return false;
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const m = table.match(q < 0 ? url : url.slice(0, q));
    if (m === undefined || m === MALFORMED) return false;
    const r = m.value;
    const get = r.spec.methods.GET;
    const answers = r.answers;
    if (!get || !r.spec.reusable || r.spec.public || answers?.verify || !env.plain(req)) return false;
    const query = q < 0 ? plainQuery('') : plainQuery(url.slice(q + 1));
    if (query === null) return false;
    let format: Format;
    try {
      format = negotiate(query.format, headers.accept);
    } catch {
      return false;
    }
    // Fastify's `req.ip` (no trusted proxies) and `req.host`.
    const ip = req.socket.remoteAddress ?? '';
    const host = headers.host ?? '';
    const caller = env.caller({ headers, ip });
    if (caller === null || (r.limiter !== null && !r.limiter.uncounted(caller.uuid, method, url))) return false;
    const { key, scope } = keptAs(r, caller, format, host, url, m.params);
    const startMs = performance.now();
    const answer = async (): Promise<CachedAnswer | null> => {
      // Read before anything the answer is made of: a change after it makes the entry unreachable.
      const { hit, token } = answers ? await answers.lookup(key, scope) : {};
      if (hit) return hit;
      const read = { clock: false };
      const info: RequestInfo = { method, url, ip, headers };
      const protocol = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
      const result = await get(apiRequest(caller, m.params, query, undefined, protocol, host, info, answers?.watch(read), format));
      if (result.status !== 200 || result.headers || result.body === undefined || result.raw) return null;
      const made = serialise(format, result);
      if (token !== undefined) answers!.made(key, token, made, read.clock);
      return made;
    };
    const failed = (err: unknown) => {
      if (!res.headersSent) fallback(req, res);
      else res.destroy(err as Error);
    };
    answer().then((found) => {
      if (!found) return fallback(req, res);
      try {
        const id = randomUUID();
        const { encoding, bytes } = AnswerCache.encoded(headers, found);
        const out = env.firstHeaders(id);
        if (encoding) out.push('vary', 'accept-encoding', 'content-encoding', encoding);
        out.push('content-type', found.contentType, 'content-length', String(typeof bytes === 'string' ? Buffer.byteLength(bytes) : bytes.length));
        // One write: node:http corks the socket for end(), and a string payload is joined to the head.
        res.writeHead(200, out).end(bytes);
        env.answered({ id, route: m.pattern, method, url, status: 200, startMs, user: caller.uuid });
      } catch (err) {
        failed(err);
      }
    }, failed);
    return true;
  };
}
