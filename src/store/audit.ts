import type { Insertable } from 'kysely';
import type { Tx } from './db.js';
import type { ResourceRepository } from './repository.js';
import type { AuditLogTable, EventOutboxTable } from './schema.js';
import { argsOf, type ArgOf } from './shapes.js';

/**
 * The writes of the event record (core/events.ts `record`): the audit-log entry every state change makes,
 * and the outbox row of an event that has consumers, both in the change's transaction. What reads them:
 * `/logs/` (the audit log) and the notification fan-out (store/notifications/fanout.ts, the outbox).
 */
export type AuditEntry = Omit<Insertable<AuditLogTable>, 'seq'>;
export type OutboxEvent = Omit<Insertable<EventOutboxTable>, 'seq'>;

export class AuditQueries {
  constructor(private readonly resources: ResourceRepository) {}

  /** Every state change writes one: its statement is compiled once. */
  async insert(tx: Tx, entry: Required<AuditEntry>): Promise<void> {
    await this.resources.shaped(tx, 'audit.insert', (arg: ArgOf<keyof typeof entry>) => tx.insertInto('audit_log').values(argsOf(entry, arg)), entry);
  }
}

export class EventQueries {
  constructor(private readonly resources: ResourceRepository) {}

  /** An event for its consumers, after the commit of the change that made it: compiled once. */
  async append(tx: Tx, event: Required<OutboxEvent>): Promise<void> {
    await this.resources.shaped(tx, 'events.append', (arg: ArgOf<keyof typeof event>) => tx.insertInto('event_outbox').values(argsOf(event, arg)), event);
  }
}
