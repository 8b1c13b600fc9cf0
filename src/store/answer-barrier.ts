import { randomBytes } from 'node:crypto';
import type Pg from 'pg';
import { ListenConnection } from './listen.js';
import { changePayloads, type Change } from './changes.js';
import type { WakeSource } from './wakes.js';
import { OneInFlight } from './one-in-flight.js';

/**
 * One statement NOTIFYing each (channel, payload) of two arrays, in their order, and deleting the kept
 * announcements (announce_pending, migration 0131) they send: both happen, or neither.
 */
const NOTIFY_ALL =
  'with sent as (delete from announce_pending where id = any($3::bigint[])) select pg_notify(c, p) from unnest($1::text[], $2::text[]) as t(c, p)';

/** The arrays of NOTIFY_ALL: the answer payloads on `answers`, then `changes` in chunks on `changeChannel`. */
export function notifications(
  answers: string,
  scopes: Iterable<string>,
  changes: readonly Change[],
  changeChannel: string | null,
): { channels: string[]; payloads: string[] } {
  const channels: string[] = [];
  const payloads: string[] = [];
  for (const p of scopes) {
    channels.push(answers);
    payloads.push(p);
  }
  if (changeChannel)
    for (const p of changePayloads(changes)) {
      channels.push(changeChannel);
      payloads.push(p);
    }
  return { channels, payloads };
}

/** How long a barrier may take before the requests waiting on it give up reusing answers. */
const BARRIER_TIMEOUT_MS = 2000;

interface Waiter {
  resolve(ok: boolean): void;
}

/**
 * PostgreSQL's answer token (http/answer-cache.ts): a generation number that moves whenever committed data
 * may have changed, with a barrier that makes it current.
 *
 * Every table an answer is made of has a statement trigger that NOTIFYs this schema's answer channel
 * (migration 0021): any write of any process, operator commands and other API processes included, is
 * announced when it commits, and only then. A LISTEN connection raises the generation on each
 * announcement. The announcement reaches this process a little after the commit, so an answer is
 * reused only after a barrier: this process NOTIFYs the channel itself and waits for its own
 * notification. Notifications arrive in commit order, so every write committed before the barrier was
 * sent (every write acknowledged before the request arrived) has raised the generation by then.
 * Requests arriving while a barrier is in flight share the next one: one round trip serves many reuses.
 *
 * The tables scoped answers are made of announce `s:<scope>` (migration 0090): besides the generation, each
 * scope's announcements are counted (`scopeToken`, store/answer-scopes.ts), behind the same barrier.
 *
 * Reading the generation needs no barrier when the answer is made afresh: a generation read before the
 * answer's rows were read is never newer than those rows. While the connection is lost (PostgreSQL
 * restarted) the token is undefined: notifications of that time are gone, nothing is reused or kept.
 */
export class AnswerBarrier {
  private generation = 0;
  private listening = false;
  private sent = 0;
  private readonly inFlight = new Map<number, { waiters: Waiter[]; timer: NodeJS.Timeout }>();
  /** Payload prefix of this process's barriers (other processes' barriers move nothing). */
  private readonly mine = `b:${randomBytes(6).toString('hex')}:`;
  private listen: ListenConnection | null = null;
  /** Announcements per answer scope (payload `s:<scope>`, migration 0090; `*`: every scope). */
  private readonly scopes = new Map<string, number>();
  /** Raised whenever listening starts or stops: counts of another stretch of listening never compare equal. */
  private listens = 0;

  private constructor(private readonly channel: string) {}

  static async open(pg: typeof Pg, url: string, channel: string): Promise<AnswerBarrier> {
    const b = new AnswerBarrier(channel);
    // A barrier's NOTIFY commits a transaction that changes nothing worth a disk flush.
    b.listen = await ListenConnection.open(
      pg,
      url,
      channel,
      {
        onNotification: (payload) => b.heard(payload),
        onListening: () => {
          b.generation++;
          b.listens++;
          b.listening = true;
          // Wake-ups sent while not listening are lost: every loop looks again.
          for (const w of b.wakers) for (const p of w.payloads) w.fn(p);
        },
        onLost: () => b.lost(),
      },
      'set synchronous_commit = off',
    );
    // A process killed between a commit and its announcement (store/db.ts announces after commits) left
    // it unsaid: the one started in its place says "every scope may have changed".
    await b.listen.query(`NOTIFY ${channel}, 's:*'`);
    return b;
  }

  /** The current generation; undefined while not listening. */
  token(): string | undefined {
    return this.listening ? String(this.generation) : undefined;
  }

  /**
   * The counts of `scopes` (and of `*`), or undefined while not listening (store/answer-scopes.ts). Like
   * `token`, exact after `settle()`, and never newer than rows read after it.
   */
  scopeToken(scopes: readonly string[]): string | undefined {
    if (!this.listening) return undefined;
    let t = `${this.listens}:${this.scopes.get('*') ?? 0}`;
    for (const s of scopes) t += `:${this.scopes.get(s) ?? 0}`;
    return t;
  }

  /** A commit of this process: known at once, before its announcement comes back. */
  bump(): void {
    this.generation++;
    this.localCommits++;
  }

  /** Commits of this process, and how many of them a completed barrier has heard (`localUnheard`). */
  private localCommits = 0;
  private localHeard = 0;
  private readonly barrierCommits = new Map<number, number>();

  /**
   * Whether a commit of this process may not be counted in its scopes yet (`bump` knows only that it
   * committed, not which scopes): an answer made now would be kept under counts older than its rows, and
   * missed at the next request. Scoped tokens settle first then (store/answer-scopes.ts).
   */
  localUnheard(): boolean {
    return this.localHeard < this.localCommits;
  }

  /** Resolves once every write committed before the call has moved the generation; false: it could not tell. */
  settle(): Promise<boolean> {
    if (!this.listening) return Promise.resolve(false);
    return new Promise((resolve) => this.barriers.add((waiters) => waiters.push({ resolve })));
  }

  /**
   * Barriers, one in flight at a time (store/one-in-flight.ts): the requests arriving meanwhile all join
   * the next, sent as soon as it is back (after they arrived, as each needs). Under load a barrier serves
   * every request of a round trip. A barrier is through when its own notification comes back (`notified`).
   */
  private readonly barriers = new OneInFlight<Waiter[]>({
    empty: () => [],
    deferred: true,
    send: (waiters) => {
      const n = ++this.sent;
      const timer = setTimeout(() => this.finish(n, false), BARRIER_TIMEOUT_MS);
      timer.unref();
      this.inFlight.set(n, { waiters, timer });
      this.barrierCommits.set(n, this.localCommits);
      // The simple protocol: one message each way (70-100 µs here; `select pg_notify($1, $2)` took 150-200).
      // The channel and the payload are our own [a-z0-9_:] strings.
      if (!this.listen) return Promise.resolve(this.finish(n, false));
      return this.listen.query(`NOTIFY ${this.channel}, '${this.mine}${n}'`).then(
        () => undefined,
        () => this.finish(n, false),
      );
    },
  });

  /**
   * NOTIFYs the answer payloads `payloads` (migration 0120) and the event stream's `changes` (on
   * `changeChannel`, store/changes.ts) of writes that just committed (store/db.ts `transaction`), and deletes
   * their kept row `kept` (announce_pending, migration 0131) in the same statement: from the
   * listening connection, whose transactions do not wait for a WAL flush, so they hold PostgreSQL's
   * database-wide NOTIFY lock for microseconds where a write's own commit held it through its flush. The
   * writers of the moment share one NOTIFY transaction (OneInFlight, as barriers; their changes in one list,
   * in the order they came, so equal change lists of two writes are not folded into one notification).
   * Sent on the connection barriers go through, after the writes committed: a barrier sent after a writer
   * answered is heard after its announcements. Resolves false when it could not send them (the caller
   * sends them another way).
   */
  announce(payloads: readonly string[], changes: readonly Change[] | undefined, changeChannel: string | null, kept: number): Promise<boolean> {
    return new Promise((resolve) =>
      this.announcements.add((next) => {
        for (const p of payloads) next.scopes.add(p);
        if (changes?.length) next.changes.push(...changes);
        next.changeChannel = changeChannel;
        next.kept.push(kept);
        next.waiters.push(resolve);
      }),
    );
  }

  private readonly announcements = new OneInFlight<{
    scopes: Set<string>;
    changes: Change[];
    changeChannel: string | null;
    kept: number[];
    waiters: ((ok: boolean) => void)[];
  }>({
    empty: () => ({ scopes: new Set(), changes: [], changeChannel: null, kept: [], waiters: [] }),
    send: async (batch) => {
      let ok = false;
      if (this.listen) {
        const { channels, payloads } = notifications(this.channel, batch.scopes, batch.changes, batch.changeChannel);
        ok = await this.listen.query(NOTIFY_ALL, [channels, payloads, batch.kept]).then(
          () => true,
          () => false,
        );
      }
      for (const w of batch.waiters) w(ok);
    },
  });

  /**
   * Handles each notification `ms` later, in order: what a slow link between PostgreSQL and this process
   * does. Tests use it to show that reuse waits for the barrier, not for luck.
   */
  delayNotifications(ms: number): void {
    this.delayMs = ms;
  }

  private delayMs = 0;

  private heard(payload: string): void {
    if (this.delayMs > 0) setTimeout(() => this.notified(payload), this.delayMs);
    else this.notified(payload);
  }

  /** The background loops woken by `w:` payloads (store/wakes.ts). */
  private readonly wakers = new Set<{ payloads: readonly string[]; fn: (payload: string) => void }>();

  /** Wake-ups of background loops heard on this connection (store/wakes.ts). */
  readonly wakes: WakeSource = ((b: AnswerBarrier): WakeSource => ({
    get listening() {
      return b.listening;
    },
    on: (payloads, fn) => {
      const w = { payloads, fn };
      b.wakers.add(w);
      return () => void b.wakers.delete(w);
    },
  }))(this);

  private notified(payload: string): void {
    if (payload.startsWith('w:')) {
      // Work to do, not a change of any answer.
      for (const w of this.wakers) if (w.payloads.includes(payload)) w.fn(payload);
      return;
    }
    if (!payload.startsWith('b:')) {
      this.generation++;
      if (payload.startsWith('s:')) {
        const scope = payload.slice(2);
        this.scopes.set(scope, (this.scopes.get(scope) ?? 0) + 1);
      }
      return;
    }
    if (!payload.startsWith(this.mine)) return;
    // In order: this barrier and any earlier one still waiting are through.
    const n = Number(payload.slice(this.mine.length));
    for (const pending of [...this.inFlight.keys()]) if (pending <= n) this.finish(pending, true);
  }

  private finish(n: number, ok: boolean): void {
    const b = this.inFlight.get(n);
    if (!b) return;
    this.inFlight.delete(n);
    const commits = this.barrierCommits.get(n) ?? 0;
    this.barrierCommits.delete(n);
    if (ok) this.localHeard = Math.max(this.localHeard, commits);
    clearTimeout(b.timer);
    for (const w of b.waiters) w.resolve(ok && this.listening);
  }

  private lost(): void {
    this.listening = false;
    this.listens++;
    this.generation++;
    for (const n of [...this.inFlight.keys()]) this.finish(n, false);
  }

  async close(): Promise<void> {
    this.listening = false;
    for (const n of [...this.inFlight.keys()]) this.finish(n, false);
    await this.listen?.close();
  }
}
