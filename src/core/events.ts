import { isoTimestamp } from './clock.js';
import type { Services } from './context.js';
import type { ApiError } from './errors.js';
import type { Tx } from '../store/db.js';

/**
 * The event record: every change the API or the simulator makes is recorded here, in the transaction of
 * the change. `record()` writes the audit-log entry (spec "Audit log entry", reference §18: what `/logs/`
 * shows) and, when something consumes events of that type (billing, notifications, the event stream),
 * an outbox row those consumers read — so a consumer never misses a committed change and never sees
 * one that rolled back.
 */
export interface Event {
  /** The audit action (`create`, `start_send`, `boot`, `clone_src`, ...). */
  action: string;
  category: 'Servers' | 'Drives' | 'Snapshots' | string;
  /** The resource acted on ('' when none). */
  uuid: string;
  /** Whose log it lands in: the resource owner. */
  owner: string;
  /** Who acted: the caller, or null for the system (a guest power-off, a heal). */
  actor: string | null;
  details?: string;
  /**
   * Text for the event's consumers only (the outbox payload), not the audit log: a notification's own
   * words when they hold what `/logs/` must not keep (a password-reset link).
   */
  notice?: string;
  error?: ApiError;
}

/** `servers.boot`, `drives.create`: the type consumers subscribe to. */
export const eventType = (e: Pick<Event, 'category' | 'action'>) => `${e.category.toLowerCase()}.${e.action}`;

/**
 * Event types that have consumers. Filled at start-up by the composition root from what the consumers
 * declare; types nobody consumes cost no outbox row.
 */
export class EventSubscriptions {
  private readonly types = new Set<string>();
  private all = false;
  subscribe(types: readonly string[] | '*'): void {
    if (types === '*') this.all = true;
    else for (const t of types) this.types.add(t);
  }
  has(type: string): boolean {
    return this.all || this.types.has(type);
  }

  /** Synchronous observers of every recorded event, in its transaction (the live stream turns some into changes). */
  readonly taps: ((tx: Tx, type: string, e: Event) => void)[] = [];
}

export async function record(tx: Tx, s: Pick<Services, 'clock' | 'store'> & { events?: EventSubscriptions }, e: Event): Promise<void> {
  const wire = e.error?.toWire();
  const now = s.clock.now();
  const entry = {
    owner_uuid: e.owner,
    actor_uuid: e.actor,
    action: e.action,
    category: e.category,
    uuid: e.uuid,
    details: e.details ?? '',
    success: e.error ? 0 : 1,
    error_type: wire?.error_type ?? null,
    error_point: wire?.error_point ?? null,
    error_message: wire?.error_message ?? '',
    timestamp: isoTimestamp(now).replace('T', ' '),
  };
  await s.store.audit.insert(tx, entry);
  const type = eventType(e);
  for (const tap of s.events?.taps ?? []) tap(tx, type, e);
  if (!s.events?.has(type)) return;
  await s.store.events.append(tx, {
    type,
    owner_uuid: e.owner || null,
    resource_kind: e.category.toLowerCase(),
    resource_uuid: e.uuid || null,
    payload: JSON.stringify({ actor: e.actor, details: e.notice ?? e.details ?? '', success: !e.error, error: wire ?? null }),
    created_at: isoTimestamp(now),
  });
}
