import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Caller } from '../core/context.js';
import type { Clock } from '../core/clock.js';
import { ApiError } from '../core/errors.js';
import type { Format } from './negotiate.js';
import type { RawQuery } from './query.js';
import { send, serialise, type Result } from './respond.js';
import { AnswerCache } from './answer-cache.js';
import { truncateAtNul } from './json.js';

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
  /** The contract of each method; a route without one is missing from the OpenAPI document (and a test says so). */
  doc?: PathDoc;
  /**
   * Its GET answer depends only on the caller, the URL, the stored rows and the request's `clock`: it may be
   * reused while the rows stay the same (answer-cache.ts).
   */
  reusable?: boolean;
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
    const allowed = (route.config as { allowed?: string } | undefined)?.allowed;
    const methods = allowed !== undefined ? allowed.split(',').filter(Boolean) : [route.method].flat().filter((m) => m !== 'HEAD' && m !== 'OPTIONS');
    list.push({ url: route.url, methods });
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
    allowed?: string;
    public?: boolean;
  }
}

const ALL = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;

/** Authenticates a request or throws 401; injected so the auth schemes stay in their own module. */
export type Authenticator = (req: FastifyRequest) => Promise<Caller>;

/**
 * Rate limits (http/ratelimit): wraps authentication so a request is counted against its user, or, on a
 * public route or when authentication fails, against its client address. Absent when limits are off.
 */
export interface Limiter {
  guard(req: FastifyRequest, reply: FastifyReply, authenticate: Authenticator | null): Promise<Caller | undefined>;
}

/**
 * Registers one URL for every HTTP method. Before the body is even read, OPTIONS is answered with the
 * allowed list, a method not in it gets 405 with `Allow`, and the caller is authenticated — the same
 * order tastypie uses (method check, then authentication) — and counted against the rate limits.
 * HEAD follows GET.
 */
export function registerPath(app: FastifyInstance, spec: PathSpec, authenticate: Authenticator, limiter?: Limiter | null, answers?: AnswerCache | null): void {
  const allowed = (Object.keys(spec.methods) as HttpMethod[]).join(',');
  documentPath(app, { url: spec.url, public: spec.public ?? false, doc: spec.doc });
  app.route({
    method: [...ALL],
    url: spec.url,
    ...(spec.bodyLimit ? { bodyLimit: spec.bodyLimit } : {}),
    config: { allowed, public: spec.public ?? false },
    onRequest: async (req: FastifyRequest, reply: FastifyReply) => {
      const method = req.method === 'HEAD' ? 'GET' : req.method;
      if (method === 'OPTIONS') {
        reply.code(200).header('allow', allowed).header('content-type', 'text/plain; charset=utf-8').send(allowed);
        return reply;
      }
      if (!spec.methods[method as HttpMethod])
        throw new ApiError('method', `Method ${req.method} is not allowed on this URL; allowed: ${allowed}`, null, { Allow: allowed });
      if (limiter) req.caller = await limiter.guard(req, reply, spec.public ? null : authenticate);
      else if (!spec.public) req.caller = await authenticate(req);
    },
    handler: async (req: FastifyRequest, reply: FastifyReply) => {
      const method = (req.method === 'HEAD' ? 'GET' : req.method) as HttpMethod;
      const reuse = method === 'GET' && spec.reusable ? answers : undefined;
      // Read before anything the answer is made of: a change after it makes the entry unreachable.
      const token = reuse?.token();
      const key = token === undefined ? '' : AnswerCache.key(req.caller?.uuid ?? '', req.format, req.host, req.url);
      const hit = token === undefined ? undefined : reuse!.get(key, token);
      if (hit && !reuse!.verify) return AnswerCache.send(reply, req.headers, hit);
      const read = { clock: false };
      const result = await spec.methods[method]!({
        caller: req.caller!,
        // Strings end at `\0`, as in bodies (http/body.ts): neither engine stores or compares a NUL.
        params: truncateAtNul({ ...(req.params as Record<string, string>) }) as Record<string, string>,
        query: truncateAtNul(req.query) as RawQuery,
        body: req.body,
        origin: `${req.protocol}://${req.host}`,
        http: { method: req.method, url: req.url, ip: req.ip, headers: req.headers },
        clock: reuse?.watch(read),
      });
      if (token === undefined || result.status !== 200 || result.headers || result.body === undefined) return send(reply, req.format, result);
      const answer = serialise(req.format, result);
      if (hit && hit.payload !== answer.payload)
        throw new Error(`answer cache: the reused answer of ${req.url} differs from a fresh one: ${hit.payload} / ${answer.payload}`);
      reuse!.made(key, token, answer, read.clock);
      return AnswerCache.send(reply, req.headers, answer);
    },
  });
}
