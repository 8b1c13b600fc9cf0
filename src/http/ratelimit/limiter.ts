import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { Caller, Services } from '../../core/context.js';
import { ApiError } from '../../core/errors.js';
import { MemoryCounters, SqliteFileCounters, TableCounters, type Bucket, type CounterStore } from '../../store/limits/counters.js';
import { decodeAccountLimits, getAccountLimitsText, onAccountLimitsChange } from '../../resources/accounts/rate-limits.js';
import { apiPath, mergeRules, PERIODS, RuleError, ruleId, RuleSet, type Rule } from '../../core/rate-rules.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The app's rate limiter, or null when the deployment turned limits off. */
    rateLimiter: RateLimiter | null;
  }
  interface FastifyRequest {
    /**
     * A count the limiter's guard left to be awaited (`later`): resolves when the request was within its
     * budgets (the rate-limit headers set), throws the 429 otherwise. Await it before sending anything.
     */
    rateCheck: (() => Promise<void>) | null;
  }
}

/** The authenticator the routes use (see http/routes.ts); the limiter only needs the Caller it returns. */
type Authenticate = (req: FastifyRequest) => Promise<Caller>;

/** How long an account's override is trusted before it is read again (another process may have changed it). */
const OVERRIDE_FRESH_MS = 2_000;
const MAX_CACHED_USERS = 10_000;
/** Expired windows are deleted this often, by each process, once they are this much in the past. */
const PRUNE_EVERY_MS = 60_000;
const PRUNE_GRACE_MS = 60_000;

interface RuleBucket extends Bucket {
  rule: Rule;
}

const PERIOD_WORD = { sec: 'second', min: 'minute', hour: 'hour', day: 'day' } as const;

/**
 * Per-user and per-address request limits with fixed windows aligned to the injected clock (a minute
 * window is :00 to :59, a day window a UTC day): cheap to count (one counter per rule and window, no
 * timestamps per request), exact across processes, and easy to explain in `Retry-After`. The price is the
 * usual one of fixed windows: a client can spend one window's budget at its end and the next one's at the
 * start of the next.
 *
 * Counting (`take`) never increments a bucket past its limit, and a request refused by one rule gives back
 * what it took from the others, so refused requests cost no budget. A bucket this process has seen refuse
 * is remembered until its window ends, so a client hammering past its limit is answered from memory,
 * without a database round trip, and an address flooding bad credentials is refused before scrypt.
 */
export class RateLimiter {
  private readonly base: RuleSet;
  private readonly users = new Map<string, { set: RuleSet; freshUntil: number }>();
  private readonly setsByText = new Map<string, RuleSet>();
  /** Buckets seen at their limit in this process: key -> the limit then and the window end. */
  private readonly refused = new Map<string, { limit: number; expiresAt: number }>();
  private nextPrune = 0;
  private pruning: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly s: Services,
    private readonly baseRules: readonly Rule[],
    readonly counters: CounterStore,
    private readonly log?: FastifyBaseLogger,
  ) {
    this.base = new RuleSet(baseRules);
    onAccountLimitsChange((uuid) => this.users.delete(uuid));
  }

  /**
   * The deployment's limiter, or null when `--rate-limits off`.
   *
   * Counter store: PostgreSQL keeps counters in the `rate_counters` table, so several API processes share
   * them (TableCounters.postgres: one prepared upsert per request that does not wait for its WAL flush, sent
   * with the request's read where the request may wait for its count: see `guard`). SQLite is
   * single-process by design, so its counters live in memory. Measured with bench/ratelimit.ts (the
   * limiter's request path, sequential, on a SQLite file in WAL mode, 2 cores): the in-memory store costs
   * ~2 µs per request, the table ~40 µs (up to ~100 µs on a busy machine: a write transaction and WAL append
   * per request), against ~270 µs for a whole `GET /tags/<uuid>/` (bench/run.ts, ~3,700 req/s), i.e. ~1%
   * instead of 15-35%. What memory gives up: a restart of the one process forgets the current windows.
   */
  static create(s: Services, log?: FastifyBaseLogger): RateLimiter | null {
    const rules = s.config.rateLimits;
    if (!rules) return null;
    // Several API processes on one SQLite file (`--workers`): a shared side file (SqliteFileCounters).
    const counters =
      s.store.dialect === 'postgres'
        ? TableCounters.postgres(s.store)
        : s.config.workers > 1
          ? SqliteFileCounters.besideDatabase(s.config.db)
          : new MemoryCounters();
    return new RateLimiter(s, rules, counters, log);
  }

  /**
   * Runs in the route's onRequest hook, in place of the bare authenticator. Public routes (`authenticate`
   * null) count against the client address. Other routes: an address already known to be over its budget
   * is refused before authentication (no scrypt for a flood); a request failing authentication counts
   * against its address (429 instead of 401 once over); an authenticated one counts against its user,
   * with the user's own rules.
   *
   * `later`: the route only reads (a reusable GET), so its answer may be made before the count is known and
   * dropped for a 429 if the count refuses. Where counting costs a round trip (PostgreSQL), the count is
   * then sent with the request's read instead of on its own, and `req.rateCheck` is left for the route to
   * await before it sends anything (it throws the 429, and sets the rate-limit headers).
   */
  async guard(req: FastifyRequest, reply: FastifyReply, authenticate: Authenticate | null, later = false): Promise<Caller | undefined> {
    const path = apiPath(req.url);
    const address = `a:${req.ip}`;
    const anonymous = this.base.match(req.method, path);
    let now = this.s.clock.now().getTime();
    this.maybePrune(now);
    if (!authenticate) {
      await this.count(req, address, anonymous, now, reply, later);
      return undefined;
    }
    if (this.refused.size) this.refuseKnown(this.buckets(address, anonymous, now), now);
    let caller: Caller;
    try {
      caller = await authenticate(req);
    } catch (e) {
      if (e instanceof ApiError && e.type === 'auth') await this.count(req, address, anonymous, now, reply, false);
      throw e;
    }
    now = this.s.clock.now().getTime();
    const rules = await this.rulesFor(caller.uuid, now);
    await this.count(req, `u:${caller.uuid}`, rules.match(req.method, path), now, reply, later);
    return caller;
  }

  /**
   * Whether `guard` would count nothing for this caller's request now and set no header: the account's
   * rules are known (read within OVERRIDE_FRESH_MS) and none applies to the request, and no bucket of this
   * process is refusing. False when unsure: then `guard` decides (routes.ts answers such requests early).
   */
  uncounted(userUuid: string, method: string, url: string): boolean {
    const now = this.s.clock.now().getTime();
    if (this.refused.size || now >= this.nextPrune) return false;
    const hit = this.users.get(userUuid);
    return hit !== undefined && hit.freshUntil > now && hit.set.match(method, apiPath(url)).length === 0;
  }

  /** The effective rules of an account: the deployment's, or its override merged over them, or none. */
  async rulesFor(userUuid: string, now = this.s.clock.now().getTime()): Promise<RuleSet> {
    const hit = this.users.get(userUuid);
    if (hit && hit.freshUntil > now) return hit.set;
    const text = await getAccountLimitsText(this.s, userUuid);
    const set = text === undefined ? this.base : this.setFor(text);
    this.users.delete(userUuid);
    this.users.set(userUuid, { set, freshUntil: now + OVERRIDE_FRESH_MS });
    if (this.users.size > MAX_CACHED_USERS) this.users.delete(this.users.keys().next().value!);
    return set;
  }

  /** Deletes ended windows now (normally done in the background once a minute). */
  async prune(now = this.s.clock.now().getTime()): Promise<number> {
    for (const [k, v] of this.refused) if (v.expiresAt <= now) this.refused.delete(k);
    return this.counters.prune(now - PRUNE_GRACE_MS);
  }

  async close(): Promise<void> {
    await this.pruning;
    await this.counters.close();
  }

  /** Resolves when a background prune has finished (tests). */
  idle(): Promise<unknown> {
    return this.pruning;
  }

  private setFor(text: string): RuleSet {
    let set = this.setsByText.get(text);
    if (set) return set;
    try {
      const limits = decodeAccountLimits(text);
      set = new RuleSet(limits === 'off' ? [] : mergeRules(this.baseRules, limits));
    } catch (e) {
      if (!(e instanceof RuleError)) throw e;
      this.log?.warn({ rules: text, err: e.message }, 'unreadable account rate-limit override ignored');
      set = this.base;
    }
    if (this.setsByText.size > 1000) this.setsByText.clear();
    this.setsByText.set(text, set);
    return set;
  }

  private maybePrune(now: number): void {
    if (now < this.nextPrune) return;
    this.nextPrune = now + PRUNE_EVERY_MS;
    this.pruning = this.prune(now).catch((err: unknown) => this.log?.warn({ err }, 'pruning rate-limit counters failed'));
  }

  private buckets(subject: string, rules: Rule[], now: number): RuleBucket[] {
    return rules.map((rule) => {
      const period = PERIODS[rule.per];
      const start = now - (now % period);
      return { key: `${subject}|${ruleId(rule)}|${start}`, limit: rule.count, expiresAt: start + period, rule };
    });
  }

  /** Refuses from memory when this process already saw one of these buckets at its (unchanged) limit. */
  private refuseKnown(buckets: RuleBucket[], now: number): void {
    if (this.refused.size === 0) return;
    const known = buckets.filter((b) => this.refused.get(b.key)?.limit === b.limit);
    if (known.length) throw tooMany(known, now);
  }

  private async count(req: FastifyRequest, subject: string, rules: Rule[], now: number, reply: FastifyReply, later: boolean): Promise<void> {
    if (rules.length === 0) return;
    const buckets = this.buckets(subject, rules, now);
    this.refuseKnown(buckets, now);
    if (later && this.counters.takeAlong) {
      const counts = this.counters.takeAlong(buckets);
      let checked: Promise<void> | undefined;
      req.rateCheck = () => (checked ??= counts().then((c) => this.settle(buckets, c, now, reply)));
      return;
    }
    await this.settle(buckets, await this.counters.take(buckets), now, reply);
  }

  /** Throws the 429 if a bucket refused (giving back what the others took); else the headers of the tightest budget. */
  private async settle(buckets: RuleBucket[], counts: (number | null)[], now: number, reply: FastifyReply): Promise<void> {
    const refused = buckets.filter((_, i) => counts[i] === null);
    if (refused.length) {
      for (const b of refused) this.refused.set(b.key, { limit: b.limit, expiresAt: b.expiresAt });
      await this.counters.giveBack(buckets.filter((_, i) => counts[i] !== null).map((b) => b.key));
      throw tooMany(refused, now);
    }
    // The tightest budget is the one a client should watch.
    let tight = 0;
    for (let i = 1; i < buckets.length; i++) if (buckets[i].limit - counts[i]! < buckets[tight].limit - counts[tight]!) tight = i;
    const b = buckets[tight];
    reply.header('X-RateLimit-Limit', String(b.limit));
    reply.header('X-RateLimit-Remaining', String(b.limit - counts[tight]!));
    reply.header('X-RateLimit-Reset', String(secondsUntil(b.expiresAt, now)));
  }
}

const secondsUntil = (t: number, now: number) => Math.max(1, Math.ceil((t - now) / 1000));

/** 429 with `Retry-After` = when every exhausted budget has a new window. */
function tooMany(refused: RuleBucket[], now: number): ApiError {
  const last = refused.reduce((a, b) => (b.expiresAt > a.expiresAt ? b : a));
  const wait = secondsUntil(last.expiresAt, now);
  const what = refused
    .map(
      ({ rule }) => `${rule.count} ${rule.method === '*' ? '' : `${rule.method} `}requests${rule.path ? ` to ${rule.path}` : ''} per ${PERIOD_WORD[rule.per]}`,
    )
    .join(' and ');
  return new ApiError('ratelimit', `Rate limit exceeded: at most ${what}; retry in ${wait} seconds`, null, {
    'Retry-After': String(wait),
    'X-RateLimit-Limit': String(last.limit),
    'X-RateLimit-Remaining': '0',
    'X-RateLimit-Reset': String(wait),
  });
}
