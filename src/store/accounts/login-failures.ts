import type { Db, Tx } from '../db.js';

/** One counter as the login guard reads it. */
export interface FailureCounter {
  key: string;
  failures: number;
  windowStartMs: number;
  lockedUntilMs: number;
}

/**
 * Failed-login counters (`login_failures`), keyed by a hash of the counter kind and its subject. The rules
 * (which counters, their limits, window and lock) are resources/accounts/login-guard.ts's; this is their SQL,
 * each write one atomic statement so every API process on one database agrees.
 */
export class LoginFailureQueries {
  /** The counters of these keys that exist. */
  async read(db: Db | Tx, keys: readonly string[]): Promise<FailureCounter[]> {
    const rows = await db
      .selectFrom('login_failures')
      .select(['key', 'failures', 'window_start_ms', 'locked_until_ms'])
      .where('key', 'in', [...keys])
      .execute();
    return rows.map((r) => ({
      key: r.key,
      failures: Number(r.failures),
      windowStartMs: Number(r.window_start_ms),
      lockedUntilMs: Number(r.locked_until_ms),
    }));
  }

  /**
   * Adds a failure to one counter in one upsert: a window that started at or before `now - windowMs` starts
   * over at 1; the failure that reaches `limit` sets the lock to `now + lockMs`, never while a lock is
   * running (so concurrent failures cannot extend it). Answers the counter's lock end (0: none).
   */
  async count(
    db: Db | Tx,
    c: { key: string; links: { account_key?: string; address_key?: string }; limit: number; now: number; windowMs: number; lockMs: number },
  ): Promise<number> {
    const { key, links, limit, now, windowMs, lockMs } = c;
    const row = await db
      .insertInto('login_failures')
      .values({ key, ...links, window_start_ms: now, failures: 1, locked_until_ms: limit <= 1 ? now + lockMs : 0 })
      .onConflict((oc) =>
        oc.column('key').doUpdateSet((eb) => {
          const fresh = eb('login_failures.window_start_ms', '>', now - windowMs);
          return {
            window_start_ms: eb.case().when(fresh).then(eb.ref('login_failures.window_start_ms')).else(now).end(),
            failures: eb
              .case()
              .when(fresh)
              .then(eb('login_failures.failures', '+', 1))
              .else(1)
              .end(),
            locked_until_ms: eb
              .case()
              .when(eb.and([fresh, eb('login_failures.failures', '>=', limit - 1), eb('login_failures.locked_until_ms', '<=', now)]))
              .then(now + lockMs)
              .else(eb.ref('login_failures.locked_until_ms'))
              .end(),
          };
        }),
      )
      .returning(['locked_until_ms'])
      .executeTakeFirst();
    return Number(row?.locked_until_ms ?? 0);
  }

  /** Drops counters whose window and lock have both ended. */
  async prune(db: Db | Tx, now: number, windowMs: number): Promise<void> {
    await db
      .deleteFrom('login_failures')
      .where('window_start_ms', '<=', now - windowMs)
      .where('locked_until_ms', '<=', now)
      .execute();
  }

  async delete(db: Db | Tx, key: string): Promise<void> {
    await db.deleteFrom('login_failures').where('key', '=', key).execute();
  }

  /**
   * Drops every counter (`'all'`), or the counters of these account and address keys together with the pair
   * counters that link to them. Answers how many.
   */
  async clear(db: Db | Tx, what: { accounts: readonly string[]; addresses: readonly string[] } | 'all'): Promise<number> {
    let q = db.deleteFrom('login_failures');
    if (what !== 'all') {
      if (!what.accounts.length && !what.addresses.length) return 0;
      q = q.where((eb) =>
        eb.or([
          ...what.accounts.flatMap((a) => [eb('key', '=', a), eb('account_key', '=', a)]),
          ...what.addresses.flatMap((a) => [eb('key', '=', a), eb('address_key', '=', a)]),
        ]),
      );
    }
    const res = await q.executeTakeFirst();
    return Number(res.numDeletedRows);
  }
}
