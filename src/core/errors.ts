/**
 * Typed domain errors. Services throw these; the HTTP layer maps each to a status and an
 * `error_type` through the single table below, so no route decides a status by itself.
 */
export type ErrorType =
  | 'validation'
  | 'notexist'
  | 'backend'
  | 'permission'
  | 'database'
  | 'concurrency'
  | 'billing'
  | 'payment'
  | 'auth'
  | 'method'
  | 'notacceptable'
  | 'toolarge'
  | 'ratelimit'
  | 'conflict'
  /** A range that is not there: a download's `Range` past the end, an upload chunk that already arrived. */
  | 'range';

/** The one place where an error kind becomes an HTTP status. */
export const STATUS_BY_TYPE: Record<ErrorType, number> = {
  validation: 400,
  auth: 401,
  billing: 402,
  payment: 402,
  permission: 403,
  notexist: 404,
  method: 405,
  notacceptable: 406,
  toolarge: 413,
  ratelimit: 429,
  conflict: 409,
  range: 416,
  backend: 500,
  database: 500,
  concurrency: 503,
};

/**
 * What the client sees as `error_type`. The real API documents a closed vocabulary; kinds it has no word
 * for map onto the nearest one so that clients enumerating error types never meet a stranger.
 */
const WIRE_TYPE: Partial<Record<ErrorType, string>> = {
  auth: 'permission',
  method: 'validation',
  conflict: 'concurrency',
  notacceptable: 'validation',
  toolarge: 'validation',
  ratelimit: 'permission',
  range: 'validation',
};

export interface WireError {
  error_message: string;
  error_point: string | null;
  error_type: string;
}

export class ApiError extends Error {
  readonly type: ErrorType;
  readonly point: string | null;
  /** Extra response headers this error needs (Allow, WWW-Authenticate, Retry-After); a list repeats the header. */
  readonly headers: Record<string, string | string[]>;

  constructor(type: ErrorType, message: string, point: string | null = null, headers: Record<string, string | string[]> = {}) {
    super(message);
    this.type = type;
    this.point = point;
    this.headers = headers;
  }

  get status(): number {
    return STATUS_BY_TYPE[this.type];
  }

  toWire(): WireError {
    return { error_message: this.message, error_point: this.point, error_type: WIRE_TYPE[this.type] ?? this.type };
  }
}

export const validation = (point: string | null, message: string) => new ApiError('validation', message, point);
export const notFound = (uuid: string) => new ApiError('notexist', `Object with uuid ${uuid} does not exist`);
export const permission = (message: string, point: string | null = null) => new ApiError('permission', message, point);

/**
 * A bad setting or a problem of the environment (a database that cannot be reached, a port in use): the
 * command line prints its message, one line naming the setting and what to do, and exits with code 2.
 */
export class ConfigError extends Error {}
