import type SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import type { Db } from './db.js';
import type { AnswerBarrier } from './answer-barrier.js';

/**
 * Answer tokens scoped to what an answer of an owner's objects is made of (http/answer-cache.ts): the
 * `resources` rows of every owner whose rows the caller can see (their own, the owners of the ACLs that
 * name them, ownerless rows), with those owners' tag memberships and ACLs. Such an answer stays current
 * while none of those owners' scopes moved, whatever other accounts, timers and the billing poll write.
 *
 * Every write of those tables raises its owner's scope in the writing transaction (migration 0090: row
 * triggers on SQLite, scoped NOTIFY payloads on PostgreSQL), so operator commands, imports, timers and
 * other processes are counted like this process's requests. A grant adds an owner to the caller's set:
 * it raises that owner's scope and `grants`, and the set is part of the token.
 */
export interface ScopedAnswerTokens {
  /** The token of a scoped answer, read before the answer's rows are (undefined: keep nothing). */
  token(scope: AnswerScope): Promise<string | undefined>;
  /** The token made exact for everything committed before the call (undefined: reuse nothing). */
  settle(scope: AnswerScope): Promise<string | undefined>;
}

/**
 * What a scoped answer is made of (ownerless rows, `o:`, in each):
 * - `visible-owners`: the rows of the caller and of every owner whose ACL names them, and what those
 *   owners share and group (a list);
 * - `own`: the caller's rows and tags alone (a list of a kind never shared: tags);
 * - `object`: one row (`uuid`) and what the caller and the owners granting them share and group (a single
 *   object: its visibility, `tags`, `grantees` and `permissions`).
 */
export type AnswerScopeKind = 'visible-owners' | 'own' | 'object';

export interface AnswerScope {
  caller: string;
  scope: AnswerScopeKind;
  /** The object of an `object` scope. */
  uuid?: string;
}

/** Callers' tokens kept at most (a kept token is a few scopes; one per caller and object of the last moments). */
const MAX_KEPT = 10_000;

/** The owners whose ACLs name the caller (`@me`), as a CTE. */
const GRANTING = `with g(owner) as (select distinct r.owner_uuid from acl_grantees a join resources r on r.uuid = a.acl_uuid and r.kind = 'acls'
  where a.grantee_uuid = @me and r.owner_uuid is not null)`;

const SQLITE_SCOPES: Record<AnswerScopeKind, string> = {
  'visible-owners': `${GRANTING} select scope, n from answer_scopes where scope in ('grants', 'o:', 'o:' || @me, 's:' || @me)
    or scope in (select 'o:' || owner from g union all select 's:' || owner from g) order by scope`,
  own: `select scope, n from answer_scopes where scope in ('o:', 'o:' || @me, 's:' || @me) order by scope`,
  object: `${GRANTING} select scope, n from answer_scopes where scope in ('grants', 'o:', 'r:' || @uuid, 's:' || @me)
    or scope in (select 's:' || owner from g) order by scope`,
};

/**
 * SQLite: one statement reads the answer's scopes from `answer_scopes` (the owners granting the caller
 * with them): one snapshot. It is read again only when the connection's global token (Store.answerToken:
 * total changes and data version) moved, so a reuse costs a token read and a map lookup. Never inside a
 * transaction of this connection: its counters may still roll back, and an answer read after the
 * rollback would be kept under the raised ones.
 */
export function sqliteScopedTokens(
  sqlite: SQLite.Database,
  global: () => string | undefined,
  /** The global token read once per turn of the event loop, after the call (Store.settleAnswers). */
  settled: () => Promise<string | undefined>,
  counter: { n: number },
): ScopedAnswerTokens {
  const stmts: Partial<Record<AnswerScopeKind, SQLite.Statement>> = {};
  const kept = new Map<string, { global: string; token: string }>();
  const read = ({ caller, scope, uuid = '' }: AnswerScope, g: string | undefined): string | undefined => {
    if (!sqlite.open || sqlite.inTransaction || g === undefined) return undefined;
    const key = `${scope}\n${caller}\n${uuid}`;
    const hit = kept.get(key);
    if (hit?.global === g) return hit.token;
    // Prepared on first use: the store opens before its migrations ran.
    const stmt = (stmts[scope] ??= sqlite.prepare(SQLITE_SCOPES[scope]).raw());
    counter.n++;
    const rows = stmt.all(scope === 'object' ? { me: caller, uuid } : { me: caller }) as [string, number][];
    const token = `s${scope}:` + rows.map(([s, n]) => `${s}=${n}`).join(',');
    if (kept.size >= MAX_KEPT) kept.clear();
    kept.set(key, { global: g, token });
    return token;
  };
  // Exact at every read. A kept answer's check shares the turn's one global read (2 statements, and
  // `data_version` asks the file system) with the other requests of the turn; an answer made afresh reads it
  // at once, before its rows.
  return {
    token: async (s) => (sqlite.open ? read(s, global()) : undefined),
    settle: async (s) => read(s, await settled()),
  };
}

/**
 * PostgreSQL: the barrier counts each scope's announcements (answer-barrier.ts); a caller's granting
 * owners are read from the database when `grants` moved since they were read (read after the `grants`
 * count they are kept under: a grant committed in between makes the next token differ).
 */
export function pgScopedTokens(db: Db, barrier: AnswerBarrier): ScopedAnswerTokens {
  const granting = new Map<string, { grants: string; owners: string[] }>();
  const tokenOf = async ({ caller, scope, uuid = '' }: AnswerScope): Promise<string | undefined> => {
    if (scope === 'own') {
      const token = barrier.scopeToken(['o:', `o:${caller}`, `s:${caller}`]);
      return token === undefined ? undefined : `sown:${token}`;
    }
    const grants = barrier.scopeToken(['grants']);
    if (grants === undefined) return undefined;
    let set = granting.get(caller);
    if (set?.grants !== grants) {
      const rows = await sql<{ owner: string }>`select distinct r.owner_uuid as owner from acl_grantees g
        join resources r on r.uuid = g.acl_uuid and r.kind = 'acls' where g.grantee_uuid = ${caller} and r.owner_uuid is not null`.execute(db);
      set = { grants, owners: rows.rows.map((r) => r.owner).sort() };
      if (granting.size >= MAX_KEPT) granting.clear();
      granting.set(caller, set);
    }
    const scopes =
      scope === 'object'
        ? ['o:', `r:${uuid}`, `s:${caller}`, ...set.owners.map((o) => `s:${o}`)]
        : ['o:', `o:${caller}`, `s:${caller}`, ...set.owners.flatMap((o) => [`o:${o}`, `s:${o}`])];
    // `grants` as the set was read under: a grant heard since makes the next token read the set again.
    const token = barrier.scopeToken(scopes);
    return token === undefined ? undefined : `s${scope}:${uuid}:${set.grants}|${set.owners.join(',')}|${token}`;
  };
  const settle = async (s: AnswerScope) => ((await barrier.settle()) ? tokenOf(s) : undefined);
  // Right after a commit of this process, its scopes are known only once a barrier is back.
  return { token: (s) => (barrier.localUnheard() ? settle(s) : tokenOf(s)), settle };
}
