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
  /** The token of `caller`'s scoped answers, read before the answer's rows are (undefined: keep nothing). */
  token(caller: string, scope: AnswerScopeKind): Promise<string | undefined>;
  /** The token made exact for everything committed before the call (undefined: reuse nothing). */
  settle(caller: string, scope: AnswerScopeKind): Promise<string | undefined>;
}

/**
 * What a scoped answer is made of: `visible-owners`, the rows of the caller and of every owner whose ACL
 * names them; `own`, the caller's rows alone (a kind never shared: tags). Ownerless rows (`o:`) in both.
 */
export type AnswerScopeKind = 'visible-owners' | 'own';

/** Callers' tokens kept at most (a kept token is a few scopes; one per caller of the last moments). */
const MAX_KEPT = 10_000;

/**
 * SQLite: one statement reads the caller's scopes (their own, `o:`, `grants`, and the owners granting
 * them) from `answer_scopes`: one snapshot. It is read again only when the connection's global token
 * (Store.answerToken: total changes and data version) moved, so a reuse costs a token read and a map
 * lookup. Never inside a transaction of this connection: its counters may still roll back, and an
 * answer read after the rollback would be kept under the raised ones.
 */
export function sqliteScopedTokens(sqlite: SQLite.Database, global: () => string | undefined, counter: { n: number }): ScopedAnswerTokens {
  const SQL: Record<AnswerScopeKind, string> = {
    'visible-owners': `select scope, n from answer_scopes where scope in ('grants', 'o:', 'o:' || @me) or scope in (
        select 'o:' || r.owner_uuid from acl_grantees g join resources r on r.uuid = g.acl_uuid and r.kind = 'acls' where g.grantee_uuid = @me)
      order by scope`,
    own: `select scope, n from answer_scopes where scope in ('o:', 'o:' || @me) order by scope`,
  };
  const stmts: Partial<Record<AnswerScopeKind, SQLite.Statement>> = {};
  const kept = new Map<string, { global: string; token: string }>();
  const read = (caller: string, scope: AnswerScopeKind): string | undefined => {
    if (!sqlite.open || sqlite.inTransaction) return undefined;
    const g = global();
    if (g === undefined) return undefined;
    const key = `${scope}\n${caller}`;
    const hit = kept.get(key);
    if (hit?.global === g) return hit.token;
    // Prepared on first use: the store opens before its migrations ran.
    const stmt = (stmts[scope] ??= sqlite.prepare(SQL[scope]).raw());
    counter.n++;
    const token = `s${scope}:` + (stmt.all({ me: caller }) as [string, number][]).map(([s, n]) => `${s}=${n}`).join(',');
    if (kept.size >= MAX_KEPT) kept.clear();
    kept.set(key, { global: g, token });
    return token;
  };
  // Exact at every read: nothing to settle.
  return { token: async (caller, scope) => read(caller, scope), settle: async (caller, scope) => read(caller, scope) };
}

/**
 * PostgreSQL: the barrier counts each scope's announcements (answer-barrier.ts); a caller's granting
 * owners are read from the database when `grants` moved since they were read (read after the `grants`
 * count they are kept under: a grant committed in between makes the next token differ).
 */
export function pgScopedTokens(db: Db, barrier: AnswerBarrier): ScopedAnswerTokens {
  const granting = new Map<string, { grants: string; owners: string[] }>();
  const tokenOf = async (caller: string, scope: AnswerScopeKind): Promise<string | undefined> => {
    if (scope === 'own') {
      const token = barrier.scopeToken(['o:', `o:${caller}`]);
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
    // `grants` as the set was read under: a grant heard since makes the next token read the set again.
    const token = barrier.scopeToken(['o:', `o:${caller}`, ...set.owners.map((o) => `o:${o}`)]);
    return token === undefined ? undefined : `s${set.grants}|${set.owners.join(',')}|${token}`;
  };
  return {
    token: tokenOf,
    settle: async (caller, scope) => ((await barrier.settle()) ? tokenOf(caller, scope) : undefined),
  };
}
