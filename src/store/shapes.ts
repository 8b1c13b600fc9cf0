import { createHash } from 'node:crypto';
import type { CompiledQuery, Compilable } from 'kysely';

/**
 * Query shapes compiled once. Building and compiling a Kysely query costs more than running a small
 * indexed one, and a request path runs the same few shapes with different values. A shape is built once
 * with a marker in place of each argument (`arg('owner')`); its SQL is kept and only the parameter list is
 * filled per call. The SQL text starts with a comment naming the shape, which lets the PostgreSQL pool
 * run it as a named prepared statement (see db.ts) and shows the shape in the server's statistics.
 */

const MARK = '\u0001stratus-arg:';

/** What a shape's builder gets: a marker for each argument, typed loosely so it fits any builder slot. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ArgOf<K extends string> = (name: K) => any;

/** The keys of `values`, each an argument of the shape (a row to insert, columns to set). */
export function argsOf<T extends Record<string, unknown>>(values: T, arg: ArgOf<Extract<keyof T, string>>): T {
  return Object.fromEntries(Object.keys(values).map((k) => [k, arg(k as Extract<keyof T, string>)])) as T;
}

interface Shape {
  compiled: CompiledQuery;
  /** For each parameter: the argument it takes, or a constant of the shape. */
  slots: ({ arg: string } | { value: unknown })[];
}

/** The comment that opens every shape's SQL; the PostgreSQL pool names statements that start with it. */
export const SHAPE_PREFIX = '/* shape ';
const SHAPE_NAME = /^\/\* shape ([\w.:-]+) \*\//;
export const shapeName = (text: string): string | undefined => (text.startsWith(SHAPE_PREFIX) ? SHAPE_NAME.exec(text)?.[1] : undefined);

/**
 * The name a shape's prepared statement gets on PostgreSQL: its key, or, when the key is longer than the
 * 63 bytes PostgreSQL keeps of a name (two keys alike in their first 63 would be one statement there), its
 * start and a hash of the whole key. Keys are few and fixed by the code: the names are kept.
 */
export function statementName(key: string): string {
  if (key.length <= MAX_NAME) return key;
  let name = longNames.get(key);
  if (!name) longNames.set(key, (name = `${key.slice(0, MAX_NAME - 17)}~${createHash('sha256').update(key).digest('hex').slice(0, 16)}`));
  return name;
}
const MAX_NAME = 63;

/**
 * Shapes of writes whose answer nobody reads and whose failure nobody handles (it fails the transaction):
 * the audit entry, the outbox row, the counts, the change notice, a locked row's new body. On PostgreSQL a
 * transaction sends them without waiting for their answer (pg-client.ts): they share the next round trip.
 */
const SENT_AHEAD = new Set([
  'resources.insert',
  'audit.insert',
  'events.append',
  'counts.add',
  'changes.notify',
  // A new body, with both indexed mirrors or the one that changed (store/resources/rows.ts `write`).
  'resources.write',
  'resources.write:name',
  'resources.write:status',
  'resources.write:body',
  // A serving process's transaction collects its announcements for after the commit (store/db.ts).
  'announce.later',
]);
/**
 * Shapes of statements a transaction sends without waiting, for an answer it reads after its COMMIT: the
 * announcements it collected, kept (store/db.ts `announcedAfter`). Written at once, they travel with the COMMIT
 * sent right after them: one round trip for both, counted once.
 */
const READ_WITH_COMMIT = new Set(['announce.keep']);
export const readWithCommit = (name: string | undefined): boolean => name !== undefined && READ_WITH_COMMIT.has(name);
/**
 * The same for a write that is no shape (a timer row, whose columns vary): its SQL ends with this comment
 * (Kysely's `modifyEnd(sql.raw(SENT_AHEAD_MARK))`).
 */
export const SENT_AHEAD_MARK = '/* sent ahead */';
/**
 * Reads whose answer is needed only after the commit (a serving process's announcements, store/db.ts): on
 * PostgreSQL sent at once and answered with the commit, in its round trip. The statement's one row then
 * holds, under `WITH_COMMIT`, a promise of the rows it read (undefined when the transaction failed).
 */
const ANSWERED_WITH_COMMIT = new Set(['announce.read']);
export const WITH_COMMIT = Symbol('answered with the commit');
export const answeredWithCommit = (name: string | undefined): boolean => name !== undefined && ANSWERED_WITH_COMMIT.has(name);
/** Whether a statement may be sent without waiting for its answer: by its shape (`name`), or its mark. */
export const sentAhead = (name: string | undefined, text: string): boolean => (name ? SENT_AHEAD.has(name) : text.endsWith(SENT_AHEAD_MARK));
const longNames = new Map<string, string>();

export class Shapes {
  private readonly cache = new Map<string, Shape>();

  /**
   * The compiled query of shape `key` with `args` filled in. `key` must name one shape: the same key with
   * another builder would run the first one's SQL. The number of keys is fixed by the code, so the cache
   * needs no bound.
   */
  get<K extends string>(key: string, build: (arg: ArgOf<K>) => Compilable, args: Record<K, unknown>): CompiledQuery {
    let shape = this.cache.get(key);
    if (!shape) {
      shape = compile(key, build);
      this.cache.set(key, shape);
    }
    const parameters = shape.slots.map((s) => ('arg' in s ? args[s.arg as K] : s.value));
    return { ...shape.compiled, parameters };
  }
}

function compile(key: string, build: (arg: ArgOf<string>) => Compilable): Shape {
  if (!/^[\w.:-]+$/.test(key)) throw new Error(`shape key ${JSON.stringify(key)} must be word characters, '.', ':' or '-'`);
  const compiled = build((name) => MARK + name).compile();
  // An argument spelled into the SQL (a literal) would be frozen with its first value: refuse the shape.
  if (compiled.sql.includes(MARK)) throw new Error(`query shape ${key} puts an argument into its SQL text`);
  const slots = compiled.parameters.map((p) => (typeof p === 'string' && p.startsWith(MARK) ? { arg: p.slice(MARK.length) } : { value: p }));
  return { compiled: { ...compiled, sql: `${SHAPE_PREFIX}${key} */ ${compiled.sql}` }, slots };
}
