import { sql, type ExpressionBuilder, type Selectable, type SelectQueryBuilder } from 'kysely';
import type { Database, ResourcesTable } from '../store/schema.js';
import type { Db, Tx } from '../store/db.js';
import { isoTimestamp } from './clock.js';
import { ownerRef, type Ctx } from './context.js';
import { notFound } from './errors.js';
import { validateFields, type Obj } from './input.js';
import Type from 'typebox';
import { f, NO_DEFAULT, type Field } from './fields.js';
import type { CollectionDecl, CollectionService, ListQuery, ListResult } from './resource.js';
import { visibleRows } from './visibility.js';
import { attachTags, setTagsOf } from './tagging.js';
import { declareApplicable, effectivePermissions, granteesOf, requirePermission, type Permission } from './permissions.js';

/** A `resources` row as selected. */
export type Row = Selectable<ResourcesTable>;

/** What is special about a kind stored in the shared `resources` table; everything else is generic. */
export interface StoredHooks {
  /** Declared fields that are not kept in the JSON body (kept elsewhere, e.g. tag membership). */
  external?: readonly string[];
  /** Normalises validated values before anything is written (may throw a validation error). */
  prepare?(values: Obj, mode: 'create' | 'update'): Obj;
  /** Runs in the update transaction with the current row, before the write; may adjust the values. */
  beforeUpdate?(tx: Tx, ctx: Ctx, row: Row, values: Obj): Promise<Obj>;
  /** When the caller can see no such object: another place it may live (library drives under /drives/). */
  fallbackGet?(ctx: Ctx, uuid: string): Promise<Obj | undefined>;
  /**
   * Access outside ownership and ACLs (library drives belong to no one; anyone may clone them). Asked when
   * the caller does not own the object (`row` undefined when it is not visible at all): return the row to
   * act on to allow `perm`, throw (403) to refuse, or undefined for the usual rules (ACL grants, else 404).
   */
  access?(ctx: Ctx, uuid: string, perm: Permission, row: Row | undefined, db: Db | Tx): Promise<Row | undefined>;
  /** Filters of this kind beyond the generic ones (name -> condition on a `resources` row). */
  filters?: Record<string, StoredFilter>;
  /** Runs in the write transaction after the row is written (create and update). */
  afterWrite?(tx: Tx, ctx: Ctx, uuid: string, values: Obj, mode: 'create' | 'update', input: Obj): Promise<void>;
  /** Runs in the delete transaction before the row goes. */
  beforeDelete?(tx: Tx, ctx: Ctx, uuid: string, row: Row, query: Record<string, unknown>): Promise<void>;
  /** Rows of other users this kind shows the caller anyway (read-only unless a permission says more). */
  alsoVisible?(ctx: Ctx, db: Db | Tx): SelectQueryBuilder<Database, any, { uuid: string }>;
  /** Adds computed fields to a page of objects in one batch (never one query per object). */
  decorate?(ctx: Ctx, objects: Obj[]): Promise<void>;
}

type Q = SelectQueryBuilder<Database, 'resources', any>;

/** A filter: the condition one group of OR-ed values puts on a `resources` row. */
export type StoredFilter = (eb: ExpressionBuilder<Database, 'resources'>, values: string[], ctx: Ctx, kind: string) => any;

/** The row carries one of the caller's tags whose uuid (or name) is among `values`. */
function carriesOwnTag(eb: ExpressionBuilder<Database, 'resources'>, ctx: Ctx, kind: string, column: 't.uuid' | 't.name', values: string[]) {
  return eb.exists(
    eb
      .selectFrom('tag_members')
      .innerJoin('resources as t', (j) => j.onRef('t.uuid', '=', 'tag_members.tag_uuid').on('t.kind', '=', 'tags'))
      .select(sql.lit(1).as('one'))
      .whereRef('tag_members.res_uuid', '=', 'resources.uuid')
      .where('tag_members.res_type', '=', kind)
      .where('t.owner_uuid', '=', ctx.caller.uuid)
      .where(column, 'in', values),
  );
}

/** Filters every stored kind understands; a kind declares which of them it exposes. */
const FILTERS: Record<string, StoredFilter> = {
  uuid: (eb, v) => eb('resources.uuid', 'in', v),
  status: (eb, v) => eb('resources.status', 'in', v),
  state: (eb, v) => eb('resources.status', 'in', v),
  name: (eb, v) => eb('resources.name', 'in', v),
  name__contains: (eb, v, ctx) => eb.or(v.map((s) => ctx.store.like('resources.name', s, { contains: true, caseInsensitive: true }))),
  // Only the caller's own tags filter (an owner's tag on a shared resource is not the grantee's business).
  tag: (eb, v, ctx, kind) => carriesOwnTag(eb, ctx, kind, 't.uuid', v),
  tag__name: (eb, v, ctx, kind) => carriesOwnTag(eb, ctx, kind, 't.name', v),
};


/**
 * Generic list/get/create/update/delete for a kind kept in the `resources` table.
 * Paging, filtering and counting happen in the database on indexed columns.
 */
/** What the generic machinery needs to know of a kind: its name, fields and, if shareable, its ACL permissions. */
export interface StoredKind {
  kind: string;
  fields: Record<string, Field>;
  /** ACL permissions that apply to this kind; absent = never shared (tags, ACLs). */
  permissions?: readonly Permission[];
  taggable?: boolean;
  /** Body key mirrored into the indexed `status` column (default `status`; jobs use `state`). */
  statusKey?: string;
  /** List order: creation order (default) or most recently changed first (jobs). */
  order?: 'created' | 'recent';
}

export class StoredCollection implements CollectionService {
  readonly kind: string;
  private readonly fields: Record<string, Field>;
  /** Taggable kinds keep their `tags` field as tag membership, not in the body. */
  readonly taggable: boolean;
  /** Shareable through ACLs: lists include granted rows, objects carry `permissions` and `grantees`. */
  readonly permissions: readonly Permission[] | undefined;
  private readonly external: Set<string>;

  constructor(
    private readonly spec: StoredKind,
    private readonly hooks: StoredHooks = {},
  ) {
    this.kind = spec.kind;
    this.fields = spec.fields;
    this.permissions = spec.permissions;
    if (spec.permissions) declareApplicable(spec.kind, spec.permissions);
    this.taggable = spec.taggable ?? false;
    this.external = new Set([...(hooks.external ?? []), ...(this.taggable ? ['tags'] : []), 'grantees', 'permissions']);
  }

  private visible(ctx: Ctx, db: Db | Tx = ctx.store.db): Q {
    const extra = this.hooks.alsoVisible;
    if (!extra) return visibleRows(ctx, this.kind, db, this.permissions !== undefined);
    return db
      .selectFrom('resources')
      .where('resources.kind', '=', this.kind)
      .where((eb) => eb.or([eb('resources.owner_uuid', '=', ctx.caller.uuid), eb('resources.uuid', 'in', extra(ctx, db))]));
  }

  uri(uuid: string): string {
    return `/api/2.0/${this.kind}/${uuid}/`;
  }

  present(row: Row): Obj {
    return { ...JSON.parse(row.body), owner: ownerRef(row.owner_uuid), resource_uri: this.uri(row.uuid), uuid: row.uuid };
  }

  private async presentAll(ctx: Ctx, rows: Row[]): Promise<Obj[]> {
    const objects = rows.map((r) => this.present(r));
    if (!objects.length) return objects;
    if (this.taggable) await attachTags(ctx, this.kind, objects);
    if (this.permissions) await this.attachSharing(ctx, rows, objects, this.permissions);
    if (this.hooks.decorate) await this.hooks.decorate(ctx, objects);
    // Body keys starting with `_` are simulator state: hooks may read them, clients never see them.
    for (const o of objects) for (const k of Object.keys(o)) if (k.startsWith('_')) delete o[k];
    return objects;
  }

  /**
   * `permissions` (the caller's effective grants, empty for the owner) and `grantees` (who holds what,
   * shown to the owner only, so a grantee never learns who else shares the resource).
   */
  private async attachSharing(ctx: Ctx, rows: Row[], objects: Obj[], applicable: readonly Permission[]): Promise<void> {
    const me = ctx.caller.uuid;
    const mine = rows.filter((r) => r.owner_uuid === me).map((r) => r.uuid);
    const theirs = rows.filter((r) => r.owner_uuid !== me).map((r) => r.uuid);
    const [grantees, perms] = await Promise.all([
      granteesOf(ctx.store.db, this.kind, mine, applicable),
      effectivePermissions(ctx.store.db, me, this.kind, theirs, applicable),
    ]);
    objects.forEach((o, i) => {
      const own = rows[i].owner_uuid === me;
      o.grantees = own ? (grantees.get(rows[i].uuid) ?? []) : [];
      o.permissions = own ? [] : (perms.get(rows[i].uuid) ?? []);
    });
  }

  /** The visible rows of this kind matching the query's filters (no paging). */
  filtered(ctx: Ctx, query: ListQuery): Q {
    let q: Q = this.visible(ctx);
    for (const [name, groups] of query.filters) {
      const apply = this.hooks.filters?.[name] ?? FILTERS[name];
      if (!apply) continue;
      for (const values of groups) q = q.where((eb) => apply(eb, values, ctx, this.kind));
    }
    return q;
  }

  async list(ctx: Ctx, query: ListQuery): Promise<ListResult> {
    const base = this.filtered(ctx, query);
    let page =
      this.spec.order === 'recent'
        ? base.selectAll('resources').orderBy('resources.updated_at', 'desc').orderBy('resources.seq', 'desc')
        : base.selectAll('resources').orderBy('resources.seq');
    page = ctx.store.page(page, query.limit, query.offset);
    const rows = (await page.execute()) as Row[];
    // A short, non-empty page (or a short first page) ends the result: its end is the total, no count query.
    const short = (query.offset === 0 || rows.length > 0) && (query.limit === 0 || rows.length < query.limit);
    const total = short
      ? query.offset + rows.length
      : Number((await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    return { total, objects: await this.presentAll(ctx, rows) };
  }

  async authorize(ctx: Ctx, uuid: string, perm: Permission, db: Db | Tx = ctx.store.db): Promise<Row> {
    const row = (await this.visible(ctx, db).selectAll('resources').where('resources.uuid', '=', uuid).executeTakeFirst()) as Row | undefined;
    if (this.hooks.access && row?.owner_uuid !== ctx.caller.uuid) {
      const other = await this.hooks.access(ctx, uuid, perm, row, db);
      if (other) return other;
    }
    if (!row) throw notFound(uuid);
    if (row.owner_uuid !== ctx.caller.uuid) await requirePermission(ctx, this.kind, row, perm, db);
    return row;
  }

  async findRow(ctx: Ctx, uuid: string): Promise<Row | undefined> {
    return (await this.visible(ctx).selectAll('resources').where('resources.uuid', '=', uuid).executeTakeFirst()) as
      | Row
      | undefined;
  }

  async get(ctx: Ctx, uuid: string): Promise<Obj> {
    const row = await this.findRow(ctx, uuid);
    if (!row) {
      const elsewhere = await this.hooks.fallbackGet?.(ctx, uuid);
      if (elsewhere) return elsewhere;
      throw notFound(uuid);
    }
    return (await this.presentAll(ctx, [row]))[0];
  }

  statusOf(body: Obj): string | null {
    const v = body[this.spec.statusKey ?? 'status'];
    return typeof v === 'string' ? v : null;
  }

  private validated(input: Obj, mode: 'create' | 'update'): Obj {
    const values = validateFields(this.fields, input, mode);
    return this.hooks.prepare ? this.hooks.prepare(values, mode) : values;
  }

  private bodyOf(values: Obj): Obj {
    const body: Obj = {};
    for (const [k, v] of Object.entries(values)) if (!this.external.has(k)) body[k] = v;
    return body;
  }

  /**
   * Work every write shares: the resource's own tags, then the kind's hook. Only the owner organises a
   * resource with tags; `tags` sent by a grantee (clients PUT whole objects back) are ignored.
   */
  private async afterWrite(
    tx: Tx,
    ctx: Ctx,
    row: { uuid: string; owner_uuid: string | null },
    values: Obj,
    mode: 'create' | 'update',
    input: Obj,
  ): Promise<void> {
    const uuid = row.uuid;
    if (this.taggable && values.tags !== undefined && row.owner_uuid === ctx.caller.uuid)
      await setTagsOf(tx, ctx, this.kind, uuid, (values.tags as unknown[] | null) ?? []);
    await this.hooks.afterWrite?.(tx, ctx, uuid, values, mode, input);
  }

  async create(ctx: Ctx, inputs: Obj[]): Promise<Obj[]> {
    // Validate everything first: one bad object rejects the whole request and writes nothing.
    const all = inputs.map((input) => this.validated(input, 'create'));
    const uuids = await ctx.store.transaction(async (tx) => {
      const made: string[] = [];
      for (const [i, values] of all.entries()) {
        const uuid = ctx.ids.uuid();
        await this.insert(tx, ctx, uuid, ctx.caller.uuid, this.bodyOf(values));
        await this.afterWrite(tx, ctx, { uuid, owner_uuid: ctx.caller.uuid }, values, 'create', inputs[i]);
        made.push(uuid);
      }
      return made;
    });
    return this.presentUuids(ctx, uuids);
  }

  async update(ctx: Ctx, uuid: string, input: Obj): Promise<Obj> {
    const validated = this.validated(input, 'update');
    await ctx.store.transaction(async (tx) => {
      const row = await this.authorize(ctx, uuid, 'EDIT', tx);
      const values = this.hooks.beforeUpdate ? await this.hooks.beforeUpdate(tx, ctx, row, validated) : validated;
      // Lock the row for the read-modify-write (SQLite transactions are already serialised).
      if (ctx.store.dialect === 'postgres') await tx.selectFrom('resources').select('seq').where('seq', '=', row.seq).forUpdate().execute();
      const fresh = (await tx.selectFrom('resources').select('body').where('seq', '=', row.seq).executeTakeFirstOrThrow()).body;
      const body = { ...JSON.parse(fresh), ...this.bodyOf(values) };
      await tx
        .updateTable('resources')
        .set({
          body: JSON.stringify(body),
          name: typeof body.name === 'string' ? body.name : null,
          status: this.statusOf(body),
          updated_at: isoTimestamp(ctx.clock.now()),
        })
        .where('seq', '=', row.seq)
        .execute();
      await this.afterWrite(tx, ctx, row, values, 'update', input);
    });
    return this.get(ctx, uuid);
  }

  /**
   * Change a stored object's body outside a request (timers, actions), keeping the status column in step.
   * Returns the new body, or undefined when the object is gone.
   */
  async patch(tx: Tx, s: Pick<Ctx, 'clock'>, uuid: string, change: (body: Obj) => Obj): Promise<Obj | undefined> {
    const row = await tx.selectFrom('resources').select(['seq', 'body']).where('kind', '=', this.kind).where('uuid', '=', uuid).executeTakeFirst();
    if (!row) return undefined;
    const body = change(JSON.parse(row.body) as Obj);
    await tx
      .updateTable('resources')
      .set({ body: JSON.stringify(body), status: this.statusOf(body), name: typeof body.name === 'string' ? body.name : null, updated_at: isoTimestamp(s.clock.now()) })
      .where('seq', '=', row.seq)
      .execute();
    return body;
  }

  /** Insert an object owned by `owner` outside the create path (clones, jobs). */
  async insert(tx: Tx, s: Pick<Ctx, 'clock'>, uuid: string, owner: string | null, body: Obj): Promise<void> {
    const now = isoTimestamp(s.clock.now());
    await tx
      .insertInto('resources')
      .values({ kind: this.kind, uuid, owner_uuid: owner, name: typeof body.name === 'string' ? body.name : null, status: this.statusOf(body), body: JSON.stringify(body), created_at: now, updated_at: now })
      .execute();
  }

  /** Present objects by uuid (any owner) as `ctx.caller` sees them, in the given order. */
  async presentUuids(ctx: Ctx, uuids: string[]): Promise<Obj[]> {
    if (!uuids.length) return [];
    const rows = (await ctx.store.db.selectFrom('resources').selectAll().where('kind', '=', this.kind).where('uuid', 'in', uuids).execute()) as Row[];
    rows.sort((a, b) => uuids.indexOf(a.uuid) - uuids.indexOf(b.uuid));
    return this.presentAll(ctx, rows);
  }

  /** Bulk delete (`DELETE /<kind>/` with `{objects:[{uuid}]}`): all or nothing, one transaction. */
  async removeMany(ctx: Ctx, uuids: string[]): Promise<void> {
    await ctx.store.transaction(async (tx) => {
      for (const uuid of uuids) await this.removeWithin(tx, ctx, uuid);
    });
  }

  async remove(ctx: Ctx, uuid: string, query: Record<string, unknown> = {}): Promise<void> {
    await ctx.store.transaction((tx) => this.removeWithin(tx, ctx, uuid, query));
  }

  /** Delete inside the caller's transaction (a server deleted with `recurse` takes its drives along). */
  async removeWithin(tx: Tx, ctx: Ctx, uuid: string, query: Record<string, unknown> = {}): Promise<void> {
    const row = await this.authorize(ctx, uuid, 'DELETE', tx);
    await this.hooks.beforeDelete?.(tx, ctx, uuid, row, query);
    await tx.deleteFrom('tag_members').where('res_type', '=', this.kind).where('res_uuid', '=', uuid).execute();
    await tx.deleteFrom('resources').where('seq', '=', row.seq).execute();
  }
}

/** Read-only fields every shareable kind carries (spec ACL rules 6 and 7). */
const SHARING_FIELDS: Record<string, Field> = {
  // Computed on every read; the recorded schema marks them writable, and whatever a client sends back is ignored.
  grantees: f.list(Type.Unknown(), { default: undefined, schemaDefault: NO_DEFAULT }),
  permissions: f.list(Type.Unknown(), { default: undefined, schemaDefault: NO_DEFAULT }),
};

/**
 * A collection kind kept in the shared table: the declaration plus the generic service built from it.
 * Declaring `permissions` is all a kind does to become shareable; its sharing fields are added here.
 */
export function storedDecl(
  decl: Omit<CollectionDecl, 'service'> & Pick<StoredKind, 'statusKey' | 'order'>,
  hooks: StoredHooks = {},
): CollectionDecl & { service: StoredCollection } {
  const fields = decl.permissions ? { ...decl.fields, ...SHARING_FIELDS } : decl.fields;
  const full = { ...decl, fields: Object.fromEntries(Object.entries(fields).sort(([a], [b]) => a.localeCompare(b))) };
  return { ...full, service: new StoredCollection(full, hooks) };
}
