import type { Expression, ExpressionBuilder, Selectable, SelectQueryBuilder, SqlBool } from 'kysely';
import { ownerRef, type Ctx } from '../../core/context.js';
import { ApiError } from '../../core/errors.js';
import { f } from '../../core/fields.js';
import type { CollectionDecl, CollectionService, ListQuery, ListResult } from '../../core/resource.js';
import type { AuditLogTable, Database } from '../../store/schema.js';

/**
 * The audit log (`GET /logs/`, reference §18): the `audit_log` rows written by `record()` (core/events.ts) in the
 * transactions of the changes they describe. A user reads the entries of their own resources
 * (`owner_uuid`), newest first. Not a `resources` kind: entries are append-only rows of their own table,
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

type Q = SelectQueryBuilder<Database, 'audit_log', object>;
type Eb = ExpressionBuilder<Database, 'audit_log'>;

const FILTERS: Record<string, (eb: Eb, values: string[], ctx: Ctx) => Expression<SqlBool>> = {
  uuid: (eb, v) => eb('audit_log.uuid', 'in', v),
  name: (eb, v) => eb('audit_log.action', 'in', v),
  name__contains: (eb, v, ctx) => eb.or(v.map((s) => ctx.store.resources.like('audit_log.action', s, { contains: true, caseInsensitive: true }))),
  // Only the caller's own tags filter, as on every other kind.
  tag: (eb, v, ctx) => ctx.store.resources.carriesOwnTag(eb, { kind: null, owner: ctx.caller.uuid, by: 'uuid', values: v, uuidColumn: 'audit_log.uuid' }),
};

type Entry = Selectable<AuditLogTable>;

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

export class AuditLogService implements CollectionService {
  private filtered(ctx: Ctx, query: ListQuery): Q {
    let q: Q = ctx.store.db.selectFrom('audit_log').where('audit_log.owner_uuid', '=', ctx.caller.uuid);
    for (const [name, groups] of query.filters) {
      const apply = FILTERS[name];
      if (!apply) continue;
      for (const values of groups) q = q.where((eb) => apply(eb, values, ctx));
    }
    return q;
  }

  async list(ctx: Ctx, query: ListQuery): Promise<ListResult> {
    const base = this.filtered(ctx, query);
    const page = base
      .select([
        'audit_log.seq',
        'audit_log.actor_uuid',
        'audit_log.action',
        'audit_log.category',
        'audit_log.uuid',
        'audit_log.details',
        'audit_log.success',
        'audit_log.error_type',
        'audit_log.error_point',
        'audit_log.error_message',
        'audit_log.timestamp',
      ])
      .orderBy('audit_log.seq', 'desc');
    const rows = (await ctx.store.resources.page(page, query.limit, query.offset).execute()) as Entry[];
    // A short, non-empty page (or a short first page) ends the result: no count query.
    const short = (query.offset === 0 || rows.length > 0) && (query.limit === 0 || rows.length < query.limit);
    const total = short ? query.offset + rows.length : Number((await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    return { total, objects: rows.map(present) };
  }

  /** Entries have no detail URL (no detail methods); the interface wants a reader all the same. */
  async get(): Promise<Record<string, unknown>> {
    throw new ApiError('method', 'Audit log entries have no detail view; list them with GET /logs/');
  }
}

export const logs: CollectionDecl = {
  shape: 'collection',
  kind: 'logs',
  flavour: 'custom',
  fields,
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: [],
  filtering: { name: 'exact', name__contains: 'exact', tag: 'exact', uuid: 'exact' },
  service: new AuditLogService(),
};
