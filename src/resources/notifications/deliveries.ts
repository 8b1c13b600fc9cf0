import { isoTimestamp } from '../../core/clock.js';
import type { Services } from '../../core/context.js';
import type { Tx } from '../../store/db.js';

/**
 * Durable deliveries: one row per e-mail or webhook call, written in the transaction that decided it.
 * A worker claims due rows (on PostgreSQL with SKIP LOCKED, so several processes share them) by moving
 * their due time a lease ahead and counting the attempt, commits, then sends outside any transaction.
 * Success marks the row sent; a failure schedules a retry with exponential backoff; a process killed
 * mid-send leaves the row to be claimed again when the lease ends. So every delivery is made at least
 * once, and a repeat carries the same Message-ID (or `X-Stratus-Delivery` header) as the first try.
 */
export interface EmailContent {
  subject: string;
  text: string;
  /** The HTML alternative (notifications have one; account mail such as sign-up links is plain text). */
  html?: string;
}

export interface WebhookContent {
  /** The JSON body posted, exactly as signed. */
  body: string;
}

export type Channel = 'email' | 'webhook';

export interface Delivery {
  id: number;
  owner_uuid: string;
  channel: Channel;
  target_uuid: string;
  address: string;
  type: string;
  message_id: string;
  content: string;
  attempts: number;
}

/** The domain of Message-IDs: the From address's. */
export function mailDomain(from: string): string {
  return /@([^>\s]+)/.exec(from)?.[1] ?? 'stratus.local';
}

/** How long a claimed delivery is left to its sender before another process may try it (injected clock). */
export const LEASE_MS = 60_000;
/** Attempts before a delivery is given up (its last error stays visible). */
export const MAX_ATTEMPTS = 8;
/** Backoff after the n-th failed attempt: 5 s, 10 s, 20 s, ... capped at an hour. */
export const backoffMs = (attempts: number): number => Math.min(3600_000, 5000 * 2 ** Math.max(0, attempts - 1));

export async function enqueue(
  tx: Tx,
  s: Pick<Services, 'clock' | 'store'>,
  d: { owner: string; channel: Channel; target: string; address: string; type: string; messageId: string; content: EmailContent | WebhookContent },
): Promise<void> {
  const at = s.clock.now();
  const now = isoTimestamp(at);
  await s.store.notifications.deliveries.insert(tx, {
    owner_uuid: d.owner,
    channel: d.channel,
    target_uuid: d.target,
    address: d.address,
    type: d.type,
    message_id: d.messageId,
    content: JSON.stringify(d.content),
    state: 'pending',
    attempts: 0,
    due_ms: at.getTime(),
    last_error: null,
    created_at: now,
    sent_at: null,
  });
}

/** Claims up to `limit` due deliveries for this process (their lease starts now). */
export async function claimDue(s: Pick<Services, 'clock' | 'store'>, limit: number): Promise<Delivery[]> {
  const now = s.clock.now().getTime();
  return s.store.transaction((tx) => s.store.notifications.deliveries.claimDue(tx, now, now + LEASE_MS, limit));
}

export async function markSent(tx: Tx, s: Pick<Services, 'clock' | 'store'>, id: number): Promise<void> {
  await s.store.notifications.deliveries.setOutcome(tx, id, { state: 'sent', sent_at: isoTimestamp(s.clock.now()), last_error: null });
}

/** A failed attempt: retried after the backoff, or given up after MAX_ATTEMPTS. */
export async function markFailed(
  tx: Tx,
  s: Pick<Services, 'clock' | 'store'>,
  d: Pick<Delivery, 'id' | 'attempts'>,
  error: string,
): Promise<'retry' | 'failed'> {
  const giveUp = d.attempts >= MAX_ATTEMPTS;
  await s.store.notifications.deliveries.setOutcome(tx, d.id, {
    state: giveUp ? 'failed' : 'pending',
    due_ms: s.clock.now().getTime() + backoffMs(d.attempts),
    last_error: error.slice(0, 1000),
  });
  return giveUp ? 'failed' : 'retry';
}
