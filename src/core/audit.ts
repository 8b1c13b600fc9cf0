import { isoTimestamp } from './clock.js';
import type { Services } from './context.js';
import type { ApiError } from './errors.js';
import type { Tx } from '../store/db.js';

/** An audit log entry (spec "Audit log entry" and "Events"), written in the transaction of the change. */
export interface AuditEntry {
  action: string;
  category: 'Servers' | 'Drives' | 'Snapshots' | string;
  /** The resource acted on ('' when none). */
  uuid: string;
  /** Whose log it lands in: the resource owner. */
  owner: string;
  /** Who acted: the caller, or null for the system (a guest power-off, a heal). */
  actor: string | null;
  details?: string;
  error?: ApiError;
}

export async function audit(tx: Tx, s: Pick<Services, 'clock'>, e: AuditEntry): Promise<void> {
  const wire = e.error?.toWire();
  await tx
    .insertInto('audit_log')
    .values({
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
      timestamp: isoTimestamp(s.clock.now()).replace('T', ' '),
    })
    .execute();
}
