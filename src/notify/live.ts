import type { Clock } from '../core/clock.js';
import { SESSION_ENDED } from '../resources/accounts/sessions.js';
import type { Change } from '../store/changes.js';

/**
 * Who sees what on the live event stream, apart from its transport (http/event-stream.ts holds the
 * websocket: upgrade, cookie, origin). A subscriber is opened by an account with a credential (a cookie's
 * id and when it was issued); it sees the committed changes of that account's own objects, each as one
 * frame, and it ends when its credential ends: a logout names its credential, a new password or a reset
 * ends every credential of the account (SESSION_ENDED on the store's change feed, from any process).
 *
 * Ends are remembered for a while (`recentlyEnded`): the transport checks a cookie, then joins its
 * subscriber; an end announced in between would otherwise miss it.
 */

/** User-level facts rather than stored objects (billing notes a balance change with every ledger entry): kind -> URI. */
const FACTS: Record<string, string> = { balance: '/api/2.0/balance/' };

/** The frame a subscriber gets for one change (pycloudsigma's `Websocket` matches on these keys). */
export function frameOf(c: Change): Record<string, unknown> {
  const uri = FACTS[c.kind] ?? `/api/2.0/${c.kind}/${c.uuid}/`;
  return { resource_type: c.kind, resource_uri: uri, uuid: c.uuid ?? undefined };
}

/** What a subscriber was opened with: its credential's id and when that credential was issued. */
export interface LiveCredential {
  credential: string;
  issuedMs: number;
}

/** The transport's side of routing: send a frame (false: the subscriber cannot keep up), close one. */
export interface LiveOutlet<S> {
  send(sub: S, frame: string): boolean;
  close(sub: S, why: 'ended' | 'slow'): void;
}

/** Ended credentials remembered for joins in flight (a few milliseconds' worth is enough). */
const RECENTLY_ENDED = 1024;

export class LiveAudience<S> {
  private readonly byOwner = new Map<string, Map<S, LiveCredential>>();
  /** Ended credentials (ids; `account:<uuid>` for all of an account's) with the time they ended. */
  private readonly recentlyEnded = new Map<string, number>();

  constructor(private readonly clock: Clock) {}

  /** Adds a subscriber of `owner`; false (and not added) when its credential ended meanwhile. */
  join(owner: string, credential: LiveCredential, sub: S): boolean {
    const accountEnded = this.recentlyEnded.get(`account:${owner}`);
    if (this.recentlyEnded.has(credential.credential) || (accountEnded !== undefined && accountEnded >= credential.issuedMs + 1000)) return false;
    let subs = this.byOwner.get(owner);
    if (!subs) this.byOwner.set(owner, (subs = new Map()));
    subs.set(sub, credential);
    return true;
  }

  /** A subscriber gone (closed by its client or the transport). */
  leave(owner: string, sub: S): void {
    const subs = this.byOwner.get(owner);
    if (!subs) return;
    subs.delete(sub);
    if (!subs.size) this.byOwner.delete(owner);
  }

  /**
   * Each change to the subscribers that may see it; each subscriber whose credential a change ends is
   * closed. A subscriber being closed leaves at once: nothing more is sent to it.
   */
  route(changes: readonly Change[], out: LiveOutlet<S>): void {
    for (const c of changes) {
      if (c.kind === SESSION_ENDED) this.remember(c.uuid ?? `account:${c.owner}`);
      const subs = this.byOwner.get(c.owner);
      if (!subs) continue;
      const drop = (sub: S, why: 'ended' | 'slow') => {
        subs.delete(sub);
        out.close(sub, why);
      };
      if (c.kind === SESSION_ENDED) {
        for (const [sub, cred] of subs) if (c.uuid === null || cred.credential === c.uuid) drop(sub, 'ended');
      } else {
        const frame = JSON.stringify(frameOf(c));
        for (const sub of subs.keys()) if (!out.send(sub, frame)) drop(sub, 'slow');
      }
      if (!subs.size) this.byOwner.delete(c.owner);
    }
  }

  /** Every subscriber, and none afterwards (shutdown). */
  drain(): S[] {
    const all = [...this.byOwner.values()].flatMap((subs) => [...subs.keys()]);
    this.byOwner.clear();
    return all;
  }

  /** Number of subscribers (tests, metrics). */
  get size(): number {
    let n = 0;
    for (const subs of this.byOwner.values()) n += subs.size;
    return n;
  }

  /** Notes an ended credential (and when), for a join that checked it just before. */
  private remember(key: string): void {
    this.recentlyEnded.delete(key);
    this.recentlyEnded.set(key, this.clock.now().getTime());
    if (this.recentlyEnded.size > RECENTLY_ENDED) this.recentlyEnded.delete(this.recentlyEnded.keys().next().value!);
  }
}
