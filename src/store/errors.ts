import { ApiError } from '../core/errors.js';

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
  return typeof code === 'string' && BY_CODE[code] ? BY_CODE[code]() : null;
}
