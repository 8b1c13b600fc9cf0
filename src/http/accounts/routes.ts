import type { Services } from '../../core/context.js';
import { permission, validation } from '../../core/errors.js';
import { objectBody } from '../../core/input.js';
import { ASYNC_AUTH_COOKIE } from '../auth/async-auth.js';
import { readCookie, setCookie } from '../auth/cookies.js';
import { SESSION_COOKIE, type Auth } from '../auth/index.js';
import { API_BASE } from '../resource-routes.js';
import type { Result } from '../respond.js';
import type { ApiRequest, PathSpec } from '../routes.js';
import { endSession, startSession } from '../../resources/accounts/sessions.js';
import { requestPasswordReset, signUp, type SignupDeps } from '../../resources/accounts/signup.js';

const ACTIONS = ['create', 'login', 'logout', 'check_login', 'check_login_with_return_uuid', 'authenticate_asynchronous', 'reset_password'] as const;
type Action = (typeof ACTIONS)[number];

const ok = (body: unknown, headers?: Record<string, string | string[]>): Result => ({ status: 200, body, root: 'object', headers });

function actionOf(req: ApiRequest): Action {
  const raw = req.query.do;
  const value = Array.isArray(raw) ? raw[raw.length - 1] : raw;
  if (typeof value !== 'string' || !(ACTIONS as readonly string[]).includes(value)) throw validation('do', `do must be one of ${ACTIONS.join(', ')}`);
  return value as Action;
}

function stringField(body: Record<string, unknown>, name: string): string {
  const v = body[name];
  if (v === undefined || v === null) throw validation(name, 'This field is required');
  if (typeof v !== 'string') throw validation(name, 'Value must be a string');
  return v;
}

/**
 * `POST /api/2.0/accounts/action/?do=…`, reachable without credentials (the route is public; each action
 * decides what it needs). Bodies arrive as JSON or XML through the common parsers.
 *
 * - `create` `{email, promo}`: sign-up, 200 `{success: true, uuid}` (see signup.ts).
 * - `login` `{username, password}`: 200 `{uuid}` with the `csrftoken` and `sessionid` cookies; 401 on bad
 *   credentials; 429 while login protection holds the account or address.
 * - `logout`: ends the cookie session and clears both cookies; 200 `{}`. With a live session it needs
 *   `X-CSRFToken` like any unsafe request of the session (403 otherwise), and ends the `async_auth` cookie
 *   the request also carries (the websocket opened with it closes).
 * - `authenticate_asynchronous` (authenticated): sets the `async_auth` cookie (good for 120 s) the websocket at
 *   `/websocket` takes to connect; 200 `{}`.
 * - `reset_password` `{email}`: a one-time link to choose a new password by e-mail; always 200 `{success: true}`.
 * - `check_login`: 200 `{}` while the request is authenticated (cookie session, or Basic/Digest), else 401.
 *   `check_login_with_return_uuid`: the same with `{uuid}`.
 *
 * The real API documents logout and check_login as answering an empty body, but pycloudsigma calls
 * `.json()` on every 200, so they answer `{}`.
 */
export function accountPaths(s: Services, auth: Auth, signup: SignupDeps): PathSpec[] {
  return [
    {
      url: `${API_BASE}accounts/action/`,
      public: true,
      doc: {
        POST: {
          summary: `Account actions: ${ACTIONS.join(', ')}`,
          query: { do: `The action: ${ACTIONS.join(', ')}.` },
          body: { type: ['object', 'null'] },
          // create: {success, uuid}; login and check_login_with_return_uuid: {uuid}; logout and check_login: {}.
          responses: { 200: { type: 'object', properties: { success: { type: 'boolean' }, uuid: { type: 'string' } }, additionalProperties: false } },
        },
      },
      methods: {
        POST: async (req) => {
          const action = actionOf(req);
          switch (action) {
            case 'create':
              return ok(await signUp(s, signup, req.body));
            case 'login': {
              const body = objectBody(req.body);
              const username = stringField(body, 'username');
              const password = stringField(body, 'password');
              const caller = await auth.passwordLogin(username, password, req.http.ip);
              if (!caller) throw auth.unauthorized('Invalid e-mail or password');
              const started = await startSession(s, caller.uuid);
              return ok({ uuid: caller.uuid }, { 'Set-Cookie': auth.loginCookies(started) });
            }
            case 'logout': {
              const session = await auth.session(req.http);
              if (session && !auth.csrfOk(req.http, session)) throw permission('Logging out of a cookie session needs the X-CSRFToken header', 'X-CSRFToken');
              const id = readCookie(req.http.headers.cookie, SESSION_COOKIE) ?? undefined;
              // The event stream's credential goes with the session (its socket closes), but only behind
              // the CSRF check above: a cross-site form must not end a socket.
              const cookie = session ? (readCookie(req.http.headers.cookie, ASYNC_AUTH_COOKIE) ?? undefined) : undefined;
              const stream = cookie ? await auth.asyncAuth.open(cookie, { expired: 'accept' }) : null;
              await endSession(
                s,
                id,
                stream && stream.caller.uuid === session?.caller.uuid ? { owner: stream.caller.uuid, credential: stream.credential } : undefined,
              );
              const cleared = !cookie ? [] : [setCookie(ASYNC_AUTH_COOKIE, '', { maxAgeS: 0, now: s.clock.now(), httpOnly: true })];
              return ok({}, { 'Set-Cookie': [...auth.logoutCookies(), ...cleared] });
            }
            case 'reset_password':
              return ok(await requestPasswordReset(s, signup, req.body));
            case 'authenticate_asynchronous': {
              // The websocket's credential (http/event-stream.ts): a signed cookie good for 120 s (http/auth/async-auth.ts).
              const caller = await auth.authenticateRequest(req.http);
              return ok({}, { 'Set-Cookie': await auth.asyncAuthCookie(caller.uuid) });
            }
            case 'check_login':
            case 'check_login_with_return_uuid': {
              // Asking changes nothing, so a session needs no CSRF token here; a Basic/Digest header is checked as usual.
              const caller = req.http.headers.authorization !== undefined ? await auth.authenticateRequest(req.http) : (await auth.session(req.http))?.caller;
              if (!caller) throw auth.unauthorized('Not logged in');
              return ok(action === 'check_login' ? {} : { uuid: caller.uuid });
            }
          }
        },
      },
    },
  ];
}
