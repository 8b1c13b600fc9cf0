/**
 * The operator pages' client of the admin plane (`/_stratus/admin/`, docs/admin-plane.md): the admin token as
 * `Authorization: Bearer`, JSON both ways, errors in the API's format (`[{error_type, error_message,
 * error_point}]`) turned into an AdminError whose message is the API's own words. The token is kept in the
 * tab's sessionStorage only (closing the tab forgets it); the plane itself answers loopback clients only
 * unless the deployment says otherwise, so these pages work from a browser on the service's machine.
 */
export const ADMIN_BASE = '/_stratus/admin/';
const TOKEN_KEY = 'stratus.admin-token';

export class AdminError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: string,
    readonly point: string | null,
  ) {
    super(message);
  }
}

export function adminToken(): string | null {
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

export function setAdminToken(token: string | null): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token.trim());
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** The error an answer carries, in the API's words (the first error of the list), or its status line. */
export async function errorOf(res: Response): Promise<AdminError> {
  const text = await res.text();
  try {
    const body = JSON.parse(text) as unknown;
    const first = (Array.isArray(body) ? body[0] : body) as { error_message?: string; error_type?: string; error_point?: string | null } | undefined;
    if (first?.error_message) return new AdminError(res.status, first.error_message, first.error_type ?? 'error', first.error_point ?? null);
  } catch {
    // not JSON: the status line says it
  }
  return new AdminError(res.status, text.trim() || `${res.status} ${res.statusText}`, 'error', null);
}

/** One admin call: `path` below /_stratus/admin/, a JSON body for POST. */
export async function admin<T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const token = adminToken();
  if (!token) throw new AdminError(401, 'Enter the admin token first', 'permission', null);
  const res = await fetch(`${ADMIN_BASE}${path}`, {
    method,
    credentials: 'omit',
    headers: { Authorization: `Bearer ${token}`, Accept: 'application/json', ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw await errorOf(res);
  return (await res.json()) as T;
}

export interface ClockState {
  now: string;
  offset_ms: number;
  ran?: number;
}

export interface Account {
  uuid: string;
  email: string;
  state: string;
  balance: string | null;
  currency: string | null;
  created_at: string | null;
}

/**
 * The accounts and their balances, from the state export (`GET state`: every table; the admin plane has no
 * narrower list). Only the users and billing_accounts tables are read, and no credential is kept.
 */
export function accountsOf(doc: { tables?: Record<string, Record<string, unknown>[]> }): Account[] {
  const money = new Map<string, Record<string, unknown>>();
  for (const row of doc.tables?.billing_accounts ?? []) money.set(String(row.owner_uuid), row);
  return (doc.tables?.users ?? [])
    .map((u) => {
      const m = money.get(String(u.uuid));
      return {
        uuid: String(u.uuid),
        email: String(u.email),
        state: String(u.state ?? ''),
        balance: m ? String(m.balance) : null,
        currency: m ? String(m.currency) : null,
        created_at: u.created_at ? String(u.created_at) : null,
      };
    })
    .sort((a, b) => a.email.localeCompare(b.email));
}

export const clock = {
  get: () => admin<ClockState>('GET', 'clock'),
  advance: (advance: string) => admin<ClockState>('POST', 'clock', { advance }),
};
export const faults = {
  list: () => admin<{ objects: Record<string, unknown>[] }>('GET', 'faults'),
  add: (fault: Record<string, unknown>) => admin<Record<string, unknown>>('POST', 'faults', fault),
  clear: () => admin<{ cleared: number }>('DELETE', 'faults'),
};
export const accounts = {
  list: async () => accountsOf(await admin<{ tables?: Record<string, Record<string, unknown>[]> }>('GET', 'state')),
  reset: (email?: string) => admin<{ deleted: Record<string, number> }>('POST', 'reset', email ? { email } : {}),
};
