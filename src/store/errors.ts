import { ApiError, ConfigError } from '../core/errors.js';

/**
 * Database failures that mean something to a client, from either engine, as API errors:
 * a lost race is a retryable 503 `concurrency`, a uniqueness clash a 409. Anything else stays a 500.
 */
const BY_CODE: Record<string, () => ApiError> = {
  // SQLite (better-sqlite3 `SqliteError.code`)
  SQLITE_BUSY: () => busy(),
  SQLITE_LOCKED: () => busy(),
  SQLITE_CONSTRAINT_UNIQUE: () => clash(),
  SQLITE_CONSTRAINT_PRIMARYKEY: () => clash(),
  // PostgreSQL SQLSTATE
  '40001': () => busy(), // serialization_failure
  '40P01': () => busy(), // deadlock_detected
  '55P03': () => busy(), // lock_not_available
  '23505': () => clash(), // unique_violation
  // Text PostgreSQL cannot store (the HTTP layer already cuts strings at NUL; this is the backstop).
  '22021': () => new ApiError('validation', 'The request contains a character sequence that cannot be stored'), // character_not_in_repertoire
  '22P05': () => new ApiError('validation', 'The request contains a character sequence that cannot be stored'), // untranslatable_character
  '53300': () => new ApiError('concurrency', 'The database has no free connections; retry shortly'), // too_many_connections
};

const busy = () => new ApiError('concurrency', 'A concurrent request is changing the same data; retry the request');
const clash = () => new ApiError('conflict', 'An object with the same unique value already exists');

export function fromDatabaseError(err: unknown): ApiError | null {
  const code = (err as { code?: unknown })?.code;
  if (typeof code !== 'string') return null;
  // SQLite's extended codes (SQLITE_BUSY_SNAPSHOT, SQLITE_BUSY_TIMEOUT, SQLITE_LOCKED_SHAREDCACHE, ...) are
  // the same lost race as their primary code.
  const known = BY_CODE[code] ?? (/^SQLITE_(BUSY|LOCKED)_/.test(code) ? BY_CODE.SQLITE_BUSY : undefined);
  return known ? known() : null;
}

/**
 * Why a database could not be opened, as one line naming the setting and what to do (ConfigError: exit
 * code 2), for the failures of the environment an operator meets: PostgreSQL unreachable, a missing
 * database or role, refused credentials; a SQLite path that cannot be created, or a file that is not a
 * SQLite database. Null for anything else (a bug, shown with its stack).
 */
export function databaseOpenError(url: string, err: unknown): ConfigError | null {
  if (err instanceof ConfigError) return err;
  const e = err as { code?: string; message?: string; address?: string; port?: number; hostname?: string };
  const code = typeof e?.code === 'string' ? e.code : '';
  const reason = String(e?.message ?? err).split('\n')[0];
  if (/^postgres(ql)?:\/\//.test(url)) {
    let target: { host: string; port: string; user: string; database: string };
    try {
      const u = new URL(url);
      target = {
        host: u.hostname || 'localhost',
        port: u.port || '5432',
        user: decodeURIComponent(u.username) || 'the default user',
        database: decodeURIComponent(u.pathname.slice(1)) || 'the default database',
      };
    } catch {
      return new ConfigError(`db: "${redactUrl(url)}" is not a valid postgres:// URL; give postgres://user:password@host:5432/database`);
    }
    const at = `${target.host}:${target.port}`;
    switch (code) {
      case 'ECONNREFUSED':
        return new ConfigError(`db: cannot connect to PostgreSQL at ${at} (connection refused): is it running, and is --db (STRATUS_DATABASE_URL) right?`);
      case 'ENOTFOUND':
      case 'EAI_AGAIN':
        return new ConfigError(`db: the PostgreSQL host "${target.host}" is not known: check the host in --db (STRATUS_DATABASE_URL)`);
      case 'ETIMEDOUT':
      case 'EHOSTUNREACH':
      case 'ENETUNREACH':
      case 'CONNECT_TIMEOUT':
        return new ConfigError(`db: PostgreSQL at ${at} does not answer (${code}): check the host, port and firewall in --db (STRATUS_DATABASE_URL)`);
      case '3D000':
        return new ConfigError(
          `db: PostgreSQL at ${at} has no database "${target.database}": create it (createdb -h ${target.host} -p ${target.port} ${target.database}) or fix --db`,
        );
      case '28P01':
      case '28000':
        return new ConfigError(`db: PostgreSQL at ${at} refused user "${target.user}" (${reason}): check the user and password in --db`);
      case '57P03':
        return new ConfigError(`db: PostgreSQL at ${at} is starting up or shutting down (${reason}): retry in a moment`);
      case '53300':
        return new ConfigError(`db: PostgreSQL at ${at} has no free connections (${reason}): raise max_connections or stop other clients`);
      case '42501':
        return new ConfigError(
          `db: user "${target.user}" may not create Stratus's tables in database "${target.database}" (${reason}): grant it CREATE or use another user`,
        );
    }
    if (/^(08|28|3D|57P)/.test(code)) return new ConfigError(`db: cannot use PostgreSQL at ${at}: ${reason}`);
    return null;
  }
  switch (code) {
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
    case 'ENOTDIR':
    case 'EEXIST':
    case 'ENOENT':
      return new ConfigError(`db: cannot create the SQLite file ${url} (${code}: ${reason.replace(/^[A-Z]+: /, '')}): give --db a path in a writable folder`);
    case 'SQLITE_CANTOPEN':
    case 'SQLITE_READONLY':
    case 'SQLITE_READONLY_DIRECTORY':
    case 'SQLITE_IOERR':
      return new ConfigError(`db: cannot open the SQLite file ${url} for writing (${reason}): check that it and its folder are writable`);
    case 'SQLITE_NOTADB':
    case 'SQLITE_CORRUPT':
      return new ConfigError(`db: ${url} is not a SQLite database, or is damaged (${reason}): restore it from a backup or give --db another file`);
    case 'SQLITE_FULL':
      return new ConfigError(`db: the disk holding ${url} is full`);
  }
  return null;
}

function redactUrl(url: string): string {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}
