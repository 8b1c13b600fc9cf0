import type { Clock } from '../../core/clock.js';
import { ApiError } from '../../core/errors.js';

export interface BackoffRules {
  /** Wrong guesses a source may make before the first lock. */
  free: number;
  /** The first lock; each further wrong guess doubles it. */
  baseMs: number;
  maxMs: number;
  /** A source quiet this long after its last wrong guess starts over. */
  forgetMs: number;
  /** Sources remembered at once; past it the one quiet longest is forgotten. */
  maxSources: number;
}

/** The admin token: 5 guesses, then 1 s, 2 s, 4 s, ... up to 15 min between guesses. */
export const ADMIN_TOKEN_BACKOFF: Readonly<BackoffRules> = Object.freeze({
  free: 5,
  baseMs: 1000,
  maxMs: 15 * 60_000,
  forgetMs: 60 * 60_000,
  maxSources: 10_000,
});

interface Source {
  failures: number;
  lockedUntil: number;
  lastFailure: number;
}

/**
 * Exponential back-off on wrong guesses of one deployment secret (the admin token), per client address.
 * The `free`-th wrong guess locks the address for `baseMs`, each later one for twice as long as the one
 * before (up to `maxMs`); while locked, every attempt from it is refused with 429 and `Retry-After`
 * before the secret is compared (the right one too, so a lock is no oracle), and refused attempts are not
 * counted. The right secret from the address forgets it. Other addresses are never slowed.
 *
 * Why not login protection's counters (resources/accounts/login-guard.ts): those are per account and
 * shared through the database, with a fixed lock an operator tunes or turns off (`--ci`); the admin token
 * has no account, and a doubling lock makes guessing hopeless at any count, so a map in this process is
 * enough: check and count are synchronous (no race between parallel guesses), several processes each
 * add only a few guesses, and memory is bounded (`maxSources`, least recently failed forgotten first).
 * Timed by the injected clock, like every lock here.
 */
export class FailureBackoff {
  private readonly sources = new Map<string, Source>();

  constructor(
    private readonly clock: Clock,
    private readonly rules: Readonly<BackoffRules>,
    private readonly message: string,
  ) {}

  /** Throws 429 while `source` is locked out. */
  check(source: string): void {
    const now = this.clock.now().getTime();
    const s = this.current(source, now);
    if (s && s.lockedUntil > now) throw this.refused(s.lockedUntil, now);
  }

  /** Counts a wrong guess; throws 429 when it set a lock. */
  failed(source: string): void {
    const now = this.clock.now().getTime();
    const s = this.current(source, now) ?? { failures: 0, lockedUntil: 0, lastFailure: now };
    s.failures++;
    s.lastFailure = now;
    // Re-inserted: Map order is least recently failed first, what a full map forgets.
    this.sources.delete(source);
    this.sources.set(source, s);
    if (this.sources.size > this.rules.maxSources) this.sources.delete(this.sources.keys().next().value!);
    const over = s.failures - this.rules.free;
    if (over < 0) return;
    s.lockedUntil = now + Math.min(this.rules.maxMs, this.rules.baseMs * 2 ** Math.min(over, 40));
    throw this.refused(s.lockedUntil, now);
  }

  /** The right secret: the source starts over. */
  succeeded(source: string): void {
    this.sources.delete(source);
  }

  /** Sources remembered (tests). */
  get size(): number {
    return this.sources.size;
  }

  private current(source: string, now: number): Source | undefined {
    const s = this.sources.get(source);
    if (s && s.lockedUntil <= now && now - s.lastFailure >= this.rules.forgetMs) {
      this.sources.delete(source);
      return undefined;
    }
    return s;
  }

  private refused(until: number, now: number): ApiError {
    const seconds = Math.max(1, Math.ceil((until - now) / 1000));
    return new ApiError('ratelimit', `${this.message}; try again in ${seconds} seconds`, null, { 'Retry-After': String(seconds) });
  }
}
