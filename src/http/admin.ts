import { isIP } from 'node:net';
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';
import { resetAccount, resetAll } from '../admin/reset.js';
import { clockState, moveClock, parseDuration } from '../admin/clock.js';
import { seed } from '../admin/seed.js';
import { checkLimits } from '../admin/limits.js';
import { exportState, importState } from '../admin/state-file.js';
import { setAccountLimits } from '../resources/accounts/rate-limits.js';
import { ADMIN_TOKEN_BACKOFF, FailureBackoff } from './auth/backoff.js';
import type { Caller, Services } from '../core/context.js';
import type { ResourceDecl } from '../core/resource.js';
import { ApiError, validation } from '../core/errors.js';
import { randomPassword, safeEqual } from '../core/passwords.js';
import { schedule } from '../core/timers.js';
import { unlockLogins } from '../resources/accounts/login-guard.js';
import { createUser, ensureDemoLogin, findUserByEmail, savedDemoLogin, setPassword, setState } from '../resources/users/users.js';
import { registerPath, type Handler, type JsonSchema, type OperationDoc, type PathSpec } from './routes.js';
import { OPS_BASE } from './ops.js';

/**
 * The admin plane, `/_stratus/admin/`, for test pipelines and operators: reset, users, the clock, faults.
 *
 * Guarded twice: the admin token (`--admin-token`, generated and printed at start when unset; sent as
 * `Authorization: Bearer TOKEN`), and, unless `--admin-access any`, the client address must be loopback.
 * Wrong tokens back off per client address (http/auth/backoff.ts): after 5, a 429 lock that doubles.
 * `--admin-token off` removes the plane (404). Every call is logged at `info` as `admin action` with what
 * it did (never a password), so the service log is its audit trail. Bodies are JSON (or XML), answers in the
 * API's conventions; bad input is a 400 `validation` that changes nothing.
 *
 *   POST   reset                     {} | {email}              every account and everything in it (the library,
 *                                                              settings, clock and demo login stay), or one account
 *                                                              emptied (its login, state and limits stay)
 *   POST   users                     {email, password?, state?, rate_limits?}
 *                                                              create (a password is generated when absent;
 *                                                              rate_limits "off" or rules as `users limits --set`)
 *   POST   users/EMAIL/password      {password?}               set (generated when absent)
 *   POST   users/EMAIL/state         {state}                   REGULAR, TRIAL, GUEST, NEW_USER
 *   POST   users/EMAIL/limits        {rate_limits}             "off", rules, or null (the deployment's apply)
 *   POST   unlock                    {email?, address?, all?}  clear login-protection counters
 *   POST   seed                      a seed document           users and what they hold (src/admin/seed.ts); idempotent
 *   GET    state                                               the whole state as one document (src/admin/state-file.ts)
 *   POST   state                     a state document          replace the whole state with it
 *   GET    clock                                               {now, offset_ms}
 *   POST   clock                     {advance_ms} | {advance: "1h30m"} | {set: ISO}
 *                                                              move the deployment's shared clock forward; due
 *                                                              work runs at once here (in every location this
 *                                                              process serves), at the next tick elsewhere
 *   GET    faults                                              the HTTP fault rules in force
 *   POST   faults                    {type: "boot", server}    the server's next boot fails
 *                                    {type: "clone", drive?}   the next clone of the drive (of any drive) fails
 *                                    {type: "http", method, path, count?, error?}
 *                                                              the next `count` (1) requests of METHOD (or *) whose
 *                                                              path starts with `path` answer 503 `concurrency` or
 *                                                              500 `backend` (`error`, default concurrency)
 *   DELETE faults                                              drop the HTTP fault rules
 *
 * Every action but the HTTP fault rules has the same operator command (`stratus reset|seed|export|import|
 * clock|faults|users`), acting on the database directly.
 *
 * The HTTP fault rules belong to the process asked (on PostgreSQL with several processes, ask each); the
 * clock and everything else is in the database.
 */
export const ADMIN_BASE = `${OPS_BASE}admin/`;

/** Bytes a state import may have (a whole deployment's state). */
const STATE_BODY_LIMIT = 512 * 1024 * 1024;

export interface AdminDeps {
  /** The deployment's kinds (seeding creates drives, servers and tags through their services). */
  kinds: readonly ResourceDecl[];
  /** Runs the timers that fell due (the process's scheduler); absent in a process without one. */
  runDue: () => Promise<number>;
  /** Drops the credentials the process has verified (after a reset or a password change). */
  forgetCredentials: () => void;
  /** Copies the state an import brought (the shared clock) into this process. */
  afterImport: () => Promise<void>;
  log: FastifyBaseLogger;
}

interface HttpFault {
  method: string;
  path: string;
  remaining: number;
  error: 'concurrency' | 'backend';
}

/** HTTP fault rules of this process: checked by one boolean per request while none is in force. */
export class Faults {
  private rules: HttpFault[] = [];
  active = false;

  add(rule: HttpFault): void {
    this.rules.push(rule);
    this.active = true;
  }
  list(): HttpFault[] {
    return this.rules.map((r) => ({ ...r }));
  }
  clear(): number {
    const n = this.rules.length;
    this.rules = [];
    this.active = false;
    return n;
  }
  /** Throws the fault for a request that matches a rule (spending one of its count). */
  check(method: string, url: string): void {
    const path = url.split('?')[0];
    if (path.startsWith(OPS_BASE)) return;
    const rule = this.rules.find((r) => (r.method === '*' || r.method === method) && path.startsWith(r.path));
    if (!rule) return;
    if (--rule.remaining <= 0) {
      this.rules = this.rules.filter((r) => r !== rule);
      this.active = this.rules.length > 0;
    }
    throw rule.error === 'backend'
      ? new ApiError('backend', 'Internal error (a fault injected through the admin plane)')
      : new ApiError('concurrency', 'The service is busy (a fault injected through the admin plane); retry the request');
  }
}

const ADMIN: Caller = { uuid: 'admin', email: 'admin', state: 'ADMIN' };

const isLoopback = (ip: string) => /^(127\.|::1$|::ffff:127\.)/.test(ip);

function body(req: { body: unknown }): Record<string, unknown> {
  const b = req.body ?? {};
  if (typeof b !== 'object' || Array.isArray(b)) throw validation('body', 'The body must be a JSON object');
  return b as Record<string, unknown>;
}

function str(b: Record<string, unknown>, key: string, required = false): string | undefined {
  const v = b[key];
  if (v === undefined || v === null) {
    if (required) throw validation(key, `${key} is required`);
    return undefined;
  }
  if (typeof v !== 'string' || v === '') throw validation(key, `${key} must be a non-empty string`);
  return v;
}

export function registerAdmin(app: FastifyInstance, s: Services, token: string, access: 'loopback' | 'any', faults: Faults, deps: AdminDeps): void {
  const guesses = new FailureBackoff(s.clock, ADMIN_TOKEN_BACKOFF, 'Too many wrong admin tokens from this address');
  const authenticate = async (req: FastifyRequest): Promise<Caller> => {
    if (access === 'loopback' && !isLoopback(req.ip))
      throw new ApiError('permission', 'The admin plane answers only on loopback addresses (--admin-access any opens it)');
    // Before the token is compared: a locked-out address learns nothing, not even from the right token.
    guesses.check(req.ip);
    const header = req.headers.authorization ?? '';
    const given = /^Bearer\s+(\S+)$/i.exec(header)?.[1];
    if (given && safeEqual(given, token)) {
      guesses.succeeded(req.ip);
      return ADMIN;
    }
    if (given) guesses.failed(req.ip);
    throw new ApiError('auth', given ? 'Wrong admin token' : 'The admin plane needs Authorization: Bearer <admin token>', null, {
      'WWW-Authenticate': 'Bearer realm="stratus-admin"',
    });
  };
  const audit = (action: string, details: Record<string, unknown>, req: { http: { ip: string } }) =>
    deps.log.info({ admin: action, ...details, client: req.http.ip }, 'admin action');

  const STR: JsonSchema = { type: 'string' };
  /** An object with these keys, and these optional ones, nothing else. */
  const obj = (required: Record<string, JsonSchema>, optional: Record<string, JsonSchema> = {}) => ({
    type: 'object',
    properties: { ...required, ...optional },
    required: Object.keys(required),
    additionalProperties: false,
  });
  const op = (summary: string, answer: JsonSchema, status = 200): OperationDoc => ({
    summary,
    body: { type: ['object', 'null'] },
    responses: { [status]: answer },
  });
  const CLOCK = {
    type: 'object',
    properties: { now: STR, offset_ms: { type: 'integer' }, ran: { type: 'integer' } },
    required: ['now', 'offset_ms'],
    additionalProperties: false,
  };
  const post = (fn: Handler): Partial<Record<'POST', Handler>> => ({ POST: fn });
  const paths: PathSpec[] = [
    {
      url: ADMIN_BASE,
      doc: { GET: op('The admin actions', obj({ actions: { type: 'array', items: { type: 'string' } } })) },
      methods: {
        GET: async () => ({
          status: 200,
          body: {
            actions: ['reset', 'users', 'users/EMAIL/password', 'users/EMAIL/state', 'users/EMAIL/limits', 'unlock', 'seed', 'state', 'clock', 'faults'].map(
              (a) => `${ADMIN_BASE}${a}`,
            ),
          },
        }),
      },
    },
    {
      url: `${ADMIN_BASE}reset`,
      doc: {
        POST: op('Empty every account, or one ({"email"})', {
          anyOf: [obj({ deleted: { type: 'object' }, demo_login: { type: ['string', 'null'] } }), obj({ deleted: { type: 'object' }, email: STR })],
        }),
      },
      methods: post(async (req) => {
        const b = body(req);
        const extra = Object.keys(b).find((k) => k !== 'email');
        if (extra) throw validation(extra, 'reset takes nothing (every account) or {"email"} (one account)');
        const email = str(b, 'email');
        if (email) {
          const user = await findUserByEmail(s, email);
          if (!user) throw new ApiError('notexist', `No user with e-mail ${email}`, 'email');
          const deleted = await resetAccount(s, user.uuid);
          audit('reset.account', { email: user.email, deleted }, req);
          return { status: 200, body: { deleted, email: user.email } };
        }
        // The demo login survives a reset with the same credentials (a pipeline's ready file stays true).
        const keep = s.config.demoLogin ?? (await savedDemoLogin(s));
        const deleted = await resetAll(s);
        deps.forgetCredentials();
        const demo = await ensureDemoLogin(s, randomPassword(), keep);
        audit('reset', { deleted }, req);
        return { status: 200, body: { deleted, demo_login: demo?.email ?? null } };
      }),
    },
    {
      url: `${ADMIN_BASE}users`,
      doc: { POST: op('Create a user', obj({ uuid: STR, email: STR, state: STR }, { password: STR }), 201) },
      methods: post(async (req) => {
        const b = body(req);
        const email = str(b, 'email', true)!;
        const given = str(b, 'password');
        const password = given ?? randomPassword();
        const limits = b.rate_limits === undefined ? undefined : checkLimits(b.rate_limits, 'rate_limits');
        const user = await createUser(s, { email, password, state: str(b, 'state')?.toUpperCase() });
        if (limits !== undefined) await setAccountLimits(s, user.email, limits);
        audit('users.create', { email: user.email, state: user.state, rate_limits: limits }, req);
        return { status: 201, body: { uuid: user.uuid, email: user.email, state: user.state, ...(given ? {} : { password }) } };
      }),
    },
    {
      url: `${ADMIN_BASE}users/:email/password`,
      doc: { POST: op("Set a user's password (random when not given)", obj({ email: STR }, { password: STR })) },
      methods: post(async (req) => {
        const b = body(req);
        const given = str(b, 'password');
        const password = given ?? randomPassword();
        await setPassword(s, req.params.email, password);
        audit('users.password', { email: req.params.email }, req);
        return { status: 200, body: { email: req.params.email.toLowerCase(), ...(given ? {} : { password }) } };
      }),
    },
    {
      url: `${ADMIN_BASE}users/:email/state`,
      doc: { POST: op("Set a user's state", obj({ email: STR, state: STR })) },
      methods: post(async (req) => {
        const state = str(body(req), 'state', true)!.toUpperCase();
        const user = await setState(s, req.params.email, state);
        audit('users.state', { email: user.email, state }, req);
        return { status: 200, body: { email: user.email, state } };
      }),
    },
    {
      url: `${ADMIN_BASE}users/:email/limits`,
      doc: { POST: op("Set an account's rate limits (off, rules, or null: the deployment's)", obj({ email: STR, rate_limits: { type: ['string', 'null'] } })) },
      methods: post(async (req) => {
        const b = body(req);
        if (!('rate_limits' in b) || (b.rate_limits !== null && typeof b.rate_limits !== 'string'))
          throw validation('rate_limits', 'rate_limits must be "off", rules like "GET=1000/min", or null (the deployment\'s rules apply)');
        const user = await setAccountLimits(s, req.params.email, b.rate_limits as string | null);
        audit('users.limits', { email: user.email, rate_limits: b.rate_limits }, req);
        return { status: 200, body: { email: user.email, rate_limits: b.rate_limits } };
      }),
    },
    {
      url: `${ADMIN_BASE}seed`,
      doc: { POST: op('Seed users and what they hold from a seed document (idempotent)', { type: 'object' }) },
      methods: post(async (req) => {
        const report = await seed(s, deps.kinds, req.body, deps.runDue);
        audit('seed', { ...report }, req);
        return { status: 200, body: report };
      }),
    },
    {
      url: `${ADMIN_BASE}state`,
      // A whole deployment's state is larger than any API body.
      bodyLimit: STATE_BODY_LIMIT,
      doc: {
        GET: op('Export the whole state as one document', { type: 'object', required: ['format', 'format_version', 'schema', 'tables'] }),
        POST: op('Replace the whole state with an exported document', { type: 'object', required: ['imported', 'now', 'offset_ms'] }),
      },
      methods: {
        GET: async (req) => {
          const doc = await exportState(s);
          audit('export', { tables: Object.keys(doc.tables).length, schema: doc.schema }, req);
          return { status: 200, body: doc };
        },
        POST: async (req) => {
          const imported = await importState(s, req.body);
          deps.forgetCredentials();
          await deps.afterImport();
          audit('import', { imported }, req);
          return { status: 200, body: { imported, ...clockState(s) } };
        },
      },
    },
    {
      url: `${ADMIN_BASE}unlock`,
      doc: { POST: op('Lift login protection', obj({ cleared: { type: 'integer' } })) },
      methods: post(async (req) => {
        const b = body(req);
        const email = str(b, 'email');
        const address = str(b, 'address');
        const all = b.all === true;
        if (address !== undefined && isIP(address) === 0) throw validation('address', 'address must be an IPv4 or IPv6 address');
        if (all === !!(email || address)) throw validation('all', 'give email and/or address, or all: true alone');
        if (email && !(await findUserByEmail(s, email))) throw new ApiError('notexist', `No user with e-mail ${email}`, 'email');
        const cleared = await unlockLogins(s, all ? 'all' : { email, address });
        audit('unlock', { email, address, all, cleared }, req);
        return { status: 200, body: { cleared } };
      }),
    },
    {
      url: `${ADMIN_BASE}clock`,
      doc: {
        GET: op('The injected clock', CLOCK),
        POST: op('Move the clock forward and run what fell due', { ...CLOCK, required: [...CLOCK.required, 'ran'] }),
      },
      methods: {
        GET: async () => ({ status: 200, body: clockState(s) }),
        POST: async (req) => {
          const b = body(req);
          const keys = Object.keys(b);
          if (keys.length !== 1 || !['advance_ms', 'advance', 'set'].includes(keys[0]))
            throw validation(keys[0] ?? 'body', 'give exactly one of advance_ms, advance ("1h30m") or set (ISO-8601)');
          if (keys[0] === 'advance_ms') {
            if (typeof b.advance_ms !== 'number') throw validation('advance_ms', 'advance_ms must be a whole number of milliseconds');
            await moveClock(s, { advanceMs: b.advance_ms });
          } else if (keys[0] === 'advance') {
            const ms = typeof b.advance === 'string' ? parseDuration(b.advance) : null;
            if (ms === null) throw validation('advance', 'advance must be a duration like 90s, 30m, 1h or 1h30m');
            await moveClock(s, { advanceMs: ms });
          } else {
            await moveClock(s, { to: new Date(typeof b.set === 'string' ? Date.parse(b.set) : NaN) });
          }
          const ran = await deps.runDue();
          audit('clock', { ...b, ran }, req);
          return { status: 200, body: { ...clockState(s), ran } };
        },
      },
    },
    {
      url: `${ADMIN_BASE}faults`,
      doc: {
        GET: op('Injected faults in force', obj({ objects: { type: 'array', items: { type: 'object' } } })),
        DELETE: op('Clear the injected faults', obj({ cleared: { type: 'integer' } })),
        POST: op('Inject a fault (a failing boot, or failing HTTP answers)', { type: 'object', required: ['type'] }, 201),
      },
      methods: {
        GET: async () => ({ status: 200, body: { objects: faults.list() } }),
        DELETE: async (req) => {
          const cleared = faults.clear();
          audit('faults.clear', { cleared }, req);
          return { status: 200, body: { cleared } };
        },
        POST: async (req) => {
          const b = body(req);
          const type = str(b, 'type', true);
          if (type === 'boot') {
            const server = str(b, 'server', true)!;
            if (!(await s.store.resources.get(s.store.db, 'servers', server))) throw new ApiError('notexist', `No server ${server}`, 'server');
            await s.store.transaction((tx) => schedule(tx, s, { kind: 'server.event', subject: server, inMs: 0, payload: { event: 'fail_next_boot' } }));
            await deps.runDue();
            audit('faults.boot', { server }, req);
            return { status: 201, body: { type, server } };
          }
          if (type === 'clone') {
            const drive = str(b, 'drive') ?? null;
            if (drive && !(await s.store.resources.get(s.store.db, 'drives', drive))) throw new ApiError('notexist', `No drive ${drive}`, 'drive');
            await s.store.transaction((tx) => s.sim.storage.failNextClone(tx, drive));
            audit('faults.clone', { drive }, req);
            return { status: 201, body: { type, drive } };
          }
          if (type !== 'http') throw validation('type', 'type must be boot, clone or http');
          const method = (str(b, 'method', true) ?? '').toUpperCase();
          if (!['GET', 'POST', 'PUT', 'DELETE', '*'].includes(method)) throw validation('method', 'method must be GET, POST, PUT, DELETE or *');
          const path = str(b, 'path', true)!;
          if (!path.startsWith('/api/')) throw validation('path', 'path must be an API path prefix, e.g. /api/2.0/servers/');
          const count = b.count ?? 1;
          if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > 1_000_000)
            throw validation('count', 'count must be a whole number from 1 to 1000000');
          const error = b.error ?? 'concurrency';
          if (error !== 'concurrency' && error !== 'backend') throw validation('error', 'error must be concurrency (503) or backend (500)');
          faults.add({ method, path, remaining: count, error });
          audit('faults.http', { method, path, count, error }, req);
          return { status: 201, body: { type, method, path, count, error } };
        },
      },
    },
  ];
  for (const spec of paths) registerPath(app, spec, authenticate, null);
}
