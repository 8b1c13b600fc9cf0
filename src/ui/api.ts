/**
 * The console's API client: the public API 2.0 of the service the page came from, nothing else (the
 * console has no endpoint of its own). Where things are is read from the page's own address: the page is
 * served at `<prefix>ui/` (`/ui/`, or `/sjc/ui/` under a location's prefix), the API at
 * `<prefix>api/2.0/` and the event stream at `<prefix>websocket` of the same origin.
 *
 * Authentication is the API's cookie session: `accounts/action/?do=login` sets `sessionid` (HttpOnly) and
 * `csrftoken`; every unsafe request of the session echoes `csrftoken` in `X-CSRFToken` (the API's Django-
 * style rule, src/http/auth/index.ts). Answers are JSON (`Accept: application/json`, never the API's XML);
 * an error answer is the API's array `[{error_type, error_point, error_message}]`, thrown as ApiError
 * with the messages as the API wrote them.
 */

/** The console's root (`…/ui/`) as an absolute URL; index.html's `<base href>` points there. */
export const ROOT = new URL('.', document.baseURI);
/** The deployment's prefix before `ui/`: `/` or a location's `/sjc/`. */
export const PREFIX = ROOT.pathname.replace(/ui\/$/, '');
/** The API's base path. */
export const API_BASE = `${PREFIX}api/2.0/`;

export interface WireError {
  error_type: string;
  error_point: string | null;
  error_message: string;
}

/** A refused request: the API's status and its error objects; `message` joins their messages. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly errors: WireError[],
  ) {
    super(errors.map((e) => e.error_message).join('; ') || `HTTP ${status}`);
  }
}

/** A list answer of the API. */
export interface ListAnswer<T = Obj> {
  meta: { limit: number; offset: number; total_count: number };
  objects: T[];
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the API's objects are JSON of many shapes
export type Obj = Record<string, any>;

/** The `csrftoken` cookie the API set at login (readable by the page by design; the session cookie is not). */
export function csrfToken(): string | null {
  const m = /(?:^|;\s*)csrftoken=([^;]*)/.exec(document.cookie);
  return m ? decodeURIComponent(m[1]) : null;
}

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Listeners told when the API answers 401 (the session ended): the shell shows the sign-in page. */
const unauthorized = new Set<() => void>();
export const onUnauthorized = (fn: () => void): (() => void) => {
  unauthorized.add(fn);
  return () => unauthorized.delete(fn);
};

/**
 * One request to the API: `path` relative to the API base (`servers/detail/?limit=20`), a JSON body for
 * POST/PUT. Resolves to the decoded answer (null for an empty one); rejects with ApiError.
 */
export async function api<T = Obj>(method: string, path: string, body?: unknown, init: { raw?: BodyInit; contentType?: string } = {}): Promise<T> {
  // X-Requested-With: the API's 401 then carries no Basic challenge, which would make the browser ask for a
  // password in a dialog of its own (src/app.ts withoutBrowserChallenge).
  const headers: Record<string, string> = { Accept: 'application/json', 'X-Requested-With': 'XMLHttpRequest' };
  if (!SAFE.has(method)) {
    const token = csrfToken();
    if (token) headers['X-CSRFToken'] = token;
  }
  let payload: BodyInit | undefined;
  if (init.raw !== undefined) {
    payload = init.raw;
    if (init.contentType) headers['Content-Type'] = init.contentType;
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    headers['Content-Type'] = 'application/json';
  }
  let res: Response;
  try {
    res = await fetch(path.startsWith('/') ? path : API_BASE + path, { method, headers, body: payload, credentials: 'same-origin' });
  } catch (e) {
    throw new ApiError(0, [{ error_type: 'network', error_point: null, error_message: `The service did not answer (${(e as Error).message})` }]);
  }
  const text = await res.text();
  // A JSON answer decoded; any other (a plain upload's uuid) as its text.
  let data: unknown = text || null;
  if (text && (res.headers.get('content-type') ?? '').includes('json')) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    if (res.status === 401) for (const fn of unauthorized) fn();
    const errors =
      Array.isArray(data) && data.every((e) => e && typeof e === 'object' && 'error_message' in e)
        ? (data as WireError[])
        : [{ error_type: 'http', error_point: null, error_message: text.slice(0, 300) || `HTTP ${res.status} ${res.statusText}` }];
    throw new ApiError(res.status, errors);
  }
  return data as T;
}

export const get = <T = Obj>(path: string) => api<T>('GET', path);
export const post = <T = Obj>(path: string, body?: unknown) => api<T>('POST', path, body ?? {});
export const put = <T = Obj>(path: string, body: unknown) => api<T>('PUT', path, body);
export const del = (path: string) => api<null>('DELETE', path);

/** An account action (`accounts/action/?do=…`): login, logout, create (sign-up), reset_password, … */
export const accountAction = <T = Obj>(action: string, body: unknown = {}) => post<T>(`accounts/action/?do=${encodeURIComponent(action)}`, body);

/** The uuid of the signed-in account, or null when the page has no session (asks the API; changes nothing). */
export async function whoAmI(): Promise<string | null> {
  try {
    return (await accountAction<{ uuid: string }>('check_login_with_return_uuid')).uuid;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return null;
    throw e;
  }
}

/** `/api/2.0/<kind>/<uuid>/` → `{kind, uuid}`; anything else → null. */
export function parseResourceUri(uri: unknown): { kind: string; uuid: string } | null {
  if (typeof uri !== 'string') return null;
  const m = /\/api\/2\.0\/([a-z_]+)\/([^/]+)\/?$/.exec(uri);
  return m ? { kind: m[1], uuid: decodeURIComponent(m[2]) } : null;
}

/** A query string from the non-empty entries of `params` (`?a=1&b=x`), or ''. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}
