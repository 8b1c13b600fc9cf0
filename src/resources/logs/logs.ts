import { ownerRef } from '../../core/context.js';
import { f } from '../../core/fields.js';
import { tableKind } from '../../core/table-kind.js';
import type { AuditLogTable, RowOf } from '../../store/schema.js';

/**
 * The audit log (`GET /logs/`, reference §18): the `audit_log` rows written by `record()` (core/events.ts) in the
 * transactions of the changes they describe. A user reads the entries of their own resources
 * (`owner_uuid`), newest first. A kind over its own table (core/table-kind.ts): entries are append-only rows,
 * paged, filtered and counted in the database on the (owner, seq), (owner, action, seq) and (uuid, seq)
 * indexes. Filters: `uuid` = the resource the action ran on; `tag` = entries about resources carrying one
 * of the caller's tags; `name`/`name__contains` = the action name (`name=start_send,boot`), as an entry
 * has no name of its own.
 */
const fields = {
  action: f.string({ required: true, schemaDefault: null, help: 'Name of the executed action' }),
  actor: f.related({ nullable: true, schemaDefault: null, help: 'User who executed action.' }),
  category: f.string({ required: true, schemaDefault: null, help: 'Category the action belongs to.' }),
  details: f.string({ nullable: true, schemaDefault: null, help: 'Details about the executed action.' }),
  error_message: f.string({ nullable: true, schemaDefault: null, help: 'Error message, if applicable.' }),
  error_point: f.string({ nullable: true, schemaDefault: null, help: 'The field that caused the error, if applicable.' }),
  error_type: f.string({ nullable: true, schemaDefault: null, help: 'Type of error, if applicable.' }),
  success: f.boolean({ required: true, default: true, help: 'Whether the action was successful.' }),
  timestamp: f.string({ required: true, schemaDefault: null, help: 'Time when entry was added.' }),
  uuid: f.string({
    schemaDefault: null,
    help: 'The uuid of resource the action is executed on. Can be empty, meaning no resource is referenced.',
  }),
};

type Entry = RowOf<AuditLogTable>;

/** An entry as the API shows it: no resource_uri; `actor` a user reference or null (the system acted). */
function present(e: Entry): Record<string, unknown> {
  return {
    action: e.action,
    actor: ownerRef(e.actor_uuid),
    category: e.category,
    details: e.details,
    error_message: e.error_message,
    error_point: e.error_point,
    error_type: e.error_type,
    success: Number(e.success) === 1,
    timestamp: e.timestamp,
    uuid: e.uuid,
  };
}

export const logs = tableKind<Entry>({
  kind: 'logs',
  table: 'audit_log',
  flavour: 'custom',
  fields,
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: [],
  filters: {
    uuid: { column: 'uuid', op: '=' },
    name: { column: 'action', op: '=' },
    name__contains: { column: 'action', op: 'contains' },
    // Only the caller's own tags filter, as on every other kind.
    tag: { column: 'uuid', op: 'ownTag' },
  },
  filtering: { name: 'exact', name__contains: 'exact', tag: 'exact', uuid: 'exact' },
  order: [['seq', 'desc']],
  columns: ['seq', 'actor_uuid', 'action', 'category', 'uuid', 'details', 'success', 'error_type', 'error_point', 'error_message', 'timestamp'],
  present,
});
