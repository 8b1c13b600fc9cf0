import type { FastifyReply } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import type { Clock } from '../core/clock.js';
import { acceptedEncoding, compress, type Encoding } from './compression.js';
import { sendPayload } from './respond.js';
import { VersionedCache } from '../store/object-cache.js';
import type { AnswerScope, ScopedAnswerTokens } from '../store/answer-scopes.js';

/**
 * Answers of GET requests kept as the bytes sent, reused while nothing that could change them has changed.
 *
 * An answer is a function of the caller, the URL, the negotiated format, the host addressed, the stored
 * rows and, for some, the time. So an entry is kept under (caller, format, host, URL) with the store's answer
 * token read *before* the handler read anything (Store.answerToken: on SQLite, rows changed by this
 * connection and commits of any other), and it is served only while the token is the same: no row changed
 * since the answer was read, so reading again would give the same bytes. An answer whose making read the
 * clock (a running server's runtime counters, a job's age, a snapshot growing under a running guest) is
 * never kept: the request's services see a clock that notes being read (`watch`). A kept answer is
 * checked against a token settled after the request arrived, shared by the requests of one turn of the
 * event loop: one token read on SQLite, one barrier on PostgreSQL (store/answer-barrier.ts), whose token
 * is exact only after it.
 *
 * A route whose answer is made only of the caller's visible owners' objects (PathSpec `answerScope`:
 * servers, tags) is kept under a token of those owners' scopes instead (store/answer-scopes.ts): another
 * account's write, a timer or the billing poll leaves it kept.
 *
 * Only 200 answers of routes that declare their GET reusable are kept, bounded by `--answer-cache-mib`.
 * `STRATUS_ANSWER_CACHE_VERIFY=1` (a development check) makes every hit compute the answer anyway and fail
 * the request (500) when the bytes differ: a missed invalidation or an unwatched time source.
 */
export interface CachedAnswer {
  contentType: string;
  payload: string;
  /** The payload compressed, per encoding, made when first asked for (compression.ts). */
  encoded?: Partial<Record<Encoding, Buffer>>;
}

export class AnswerCache {
  private readonly entries: VersionedCache<CachedAnswer, string>;
  /**
   * GET answers of reusable routes: served from here, made and kept, made and not kept (they read the clock);
   * under verify mode, kept answers made again and found the same (a server's proof it runs verifying).
   */
  readonly counts = { reused: 0, kept: 0, timed: 0, verified: 0 };

  constructor(
    maxBytes: number,
    /** The store's answer token (undefined: nothing can be reused). */
    readonly token: () => string | undefined,
    /** The token made exact for everything committed before the call, shared by the calls of one turn (Store.settleAnswers). */
    readonly settle: () => Promise<string | undefined>,
    private readonly clock: Clock,
    readonly verify = false,
    /** Tokens of scoped answers (null: scoped routes use the global token). */
    private readonly scoped: ScopedAnswerTokens | null = null,
  ) {
    this.entries = new VersionedCache(maxBytes);
  }

  static key(caller: string, format: string, host: string, url: string): string {
    return `${caller}\n${format}\n${host}\n${url}`;
  }

  /**
   * The kept answer of `key`, if still current, with the token an answer made now is kept under (undefined:
   * keep nothing). A kept answer is checked against a token settled after the request arrived; without
   * one the token is read at once: before the answer's rows are, so never newer than they are.
   */
  async lookup(key: string, scope?: AnswerScope): Promise<{ hit?: CachedAnswer; token?: string }> {
    const scoped = scope && this.scoped;
    if (!this.entries.has(key)) return { token: scoped ? await scoped.token(scope) : this.token() };
    const token = scoped ? await scoped.settle(scope) : await this.settle();
    if (token === undefined) return {};
    const hit = this.entries.get(key, token);
    if (hit) this.counts.reused++;
    return { hit, token };
  }

  /** Whether nothing has changed since `token` was current (the verify check tells a stale answer from a race). */
  async unchangedSince(token: string, scope?: AnswerScope): Promise<boolean> {
    const scoped = scope && this.scoped;
    return (scoped ? await scoped.settle(scope) : await this.settle()) === token;
  }

  /** A fresh answer: kept unless its making read the clock. */
  made(key: string, token: string, answer: CachedAnswer, readClock: boolean): void {
    if (readClock) {
      this.counts.timed++;
      return;
    }
    this.counts.kept++;
    // UTF-16 strings: two bytes a character, plus the key; the compressed forms (a fraction of the payload
    // for JSON and XML) within one more payload's length.
    this.entries.set(key, token, answer, 3 * answer.payload.length + 2 * key.length + 64);
  }

  /**
   * Sends a kept (or keepable) answer, compressed as the compression plugin would (which then leaves it be):
   * each encoding once per answer, however often it is sent.
   */
  static send(reply: FastifyReply, headers: IncomingHttpHeaders, answer: CachedAnswer): FastifyReply {
    const { encoding, bytes } = AnswerCache.encoded(headers, answer);
    if (encoding) reply.header('vary', 'accept-encoding').header('content-encoding', encoding);
    return sendPayload(reply, 200, answer.contentType, bytes);
  }

  /** The bytes of `answer` for a request with these headers: compressed as the compression plugin would, each encoding once per answer. */
  static encoded(headers: IncomingHttpHeaders, answer: CachedAnswer): { encoding: Encoding | null; bytes: string | Buffer } {
    const encoding = acceptedEncoding(headers);
    if (!encoding) return { encoding, bytes: answer.payload };
    const encoded = (answer.encoded ??= {});
    return { encoding, bytes: (encoded[encoding] ??= compress(encoding, answer.payload)) };
  }

  /** Whether an answer is kept under `key` (current or not): only then may `lookup` find one. */
  has(key: string): boolean {
    return this.entries.has(key);
  }

  /** A clock for one request's services: reading it marks the answer time-dependent (`read.clock`). */
  watch(read: { clock: boolean }): Clock {
    const clock = this.clock;
    return {
      now() {
        read.clock = true;
        return clock.now();
      },
    };
  }

  get size(): { entries: number; bytes: number } {
    return this.entries.size;
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** GET answers kept for reuse (null: off, `--answer-cache-mib 0`); metrics read its counts. */
    answerCache: AnswerCache | null;
  }
}
