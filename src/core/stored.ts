import { sql, type ExpressionBuilder, type SelectQueryBuilder } from 'kysely';
import type { Database } from '../store/schema.js';
import type { Tx } from '../store/db.js';
import { isoTimestamp } from './clock.js';
import { ownerRef, type Ctx } from './context.js';
import { notFound } from './errors.js';
import { validateFields, type Obj } from './input.js';
import type { Field } from './fields.js';
import type { CollectionService, ListQuery, ListResult } from './resource.js';
import { visibleRows } from './visibility.js';
import { attachTags, setTagsOf } from './tagging.js';

export interface Row {
  seq: number;
  kind: string;
  uuid: string;
  owner_uuid: string | null;
  name: string | null;
  body: string;
  created_at: string;
  updated_at: string;
}

/** What is special about a kind stored in the shared `resources` table; everything else is generic. */
export interface StoredHooks {
  /** Declared fields that are not kept in the JSON body (kept elsewhere, e.g. tag membership). */
  external?: readonly string[];
  /** Runs in the write transaction after the row is written (create and update). */
  afterWrite?(tx: Tx, ctx: Ctx, uuid: string, values: Obj, mode: 'create' | 'update'): Promise<void>;
  /** Runs in the delete transaction before the row goes. */
  beforeDelete?(tx: Tx, ctx: Ctx, uuid: string): Promise<void>;
  /** Adds computed fields to a page of objects in one batch (never one query per object). */
  decorate?(ctx: Ctx, objects: Obj[]): Promise<void>;
}

type Q = SelectQueryBuilder<Database, 'resources', any>;

/** Filters every stored kind understands; a kind declares which of them it exposes. */
const FILTERS: Record<string, (eb: ExpressionBuilder<Database, 'resources'>, values: string[], ctx: Ctx, kind: string) => any> = {
  uuid: (eb, v) => eb('resources.uuid', 'in', v),
  name: (eb, v) => eb('resources.name', 'in', v),
  name__contains: (eb, v, ctx) => eb.or(v.map((s) => eb('resources.name', ctx.store.ilike, `%${escapeLike(s)}%`))),
  tag: (eb, v, _ctx, kind) =>
    eb.exists(
      eb
        .selectFrom('tag_members')
        .select(sql.lit(1).as('one'))
        .whereRef('tag_members.res_uuid', '=', 'resources.uuid')
        .where('tag_members.res_type', '=', kind)
        .where('tag_members.tag_uuid', 'in', v),
    ),
  tag__name: (eb, v, ctx, kind) =>
    eb.exists(
      eb
        .selectFrom('tag_members')
        .innerJoin('resources as t', (j) => j.onRef('t.uuid', '=', 'tag_members.tag_uuid').on('t.kind', '=', 'tags'))
        .select(sql.lit(1).as('one'))
        .whereRef('tag_members.res_uuid', '=', 'resources.uuid')
        .where('tag_members.res_type', '=', kind)
        .where('t.owner_uuid', '=', ctx.caller.uuid)
        .where('t.name', 'in', v),
    ),
};

const escapeLike = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * Generic list/get/create/update/delete for a kind kept in the `resources` table.
 * Paging, filtering and counting happen in the database on indexed columns.
 */
export class StoredCollection implements CollectionService {
  /** A kind that declares a `tags` field is taggable: tags are kept as tag membership, not in the body. */
  readonly taggable: boolean;
  private readonly external: Set<string>;

  constructor(
    readonly kind: string,
    private readonly fields: Record<string, Field>,
    private readonly hooks: StoredHooks = {},
  ) {
    this.taggable = 'tags' in fields;
    this.external = new Set([...(hooks.external ?? []), ...(this.taggable ? ['tags'] : [])]);
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
    if (this.hooks.decorate) await this.hooks.decorate(ctx, objects);
    return objects;
  }

  /** The visible rows of this kind matching the query's filters (no paging). */
  filtered(ctx: Ctx, query: ListQuery): Q {
    let q: Q = visibleRows(ctx, this.kind);
    for (const [name, groups] of query.filters) {
      const apply = FILTERS[name];
      if (!apply) continue;
      for (const values of groups) q = q.where((eb) => apply(eb, values, ctx, this.kind));
    }
    return q;
  }

  async list(ctx: Ctx, query: ListQuery): Promise<ListResult> {
    const base = this.filtered(ctx, query);
    let page = base.selectAll('resources').orderBy('resources.seq');
    if (query.limit > 0) page = page.limit(query.limit);
    if (query.offset > 0) page = page.offset(query.offset);
    const rows = (await page.execute()) as Row[];
    // A short, non-empty page (or a short first page) ends the result: its end is the total, no count query.
    const short = (query.offset === 0 || rows.length > 0) && (query.limit === 0 || rows.length < query.limit);
    const total = short
      ? query.offset + rows.length
      : Number((await base.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    return { total, objects: await this.presentAll(ctx, rows) };
  }

  async findRow(ctx: Ctx, uuid: string): Promise<Row | undefined> {
    return (await visibleRows(ctx, this.kind).selectAll('resources').where('resources.uuid', '=', uuid).executeTakeFirst()) as
      | Row
      | undefined;
  }

  async get(ctx: Ctx, uuid: string): Promise<Obj> {
    const row = await this.findRow(ctx, uuid);
    if (!row) throw notFound(uuid);
    return (await this.presentAll(ctx, [row]))[0];
  }

  private bodyOf(values: Obj): Obj {
    const body: Obj = {};
    for (const [k, v] of Object.entries(values)) if (!this.external.has(k)) body[k] = v;
    return body;
  }

  /** Work every write shares: the resource's own tags, then the kind's hook. */
  private async afterWrite(tx: Tx, ctx: Ctx, uuid: string, values: Obj, mode: 'create' | 'update'): Promise<void> {
    if (this.taggable && values.tags !== undefined) await setTagsOf(tx, ctx, this.kind, uuid, (values.tags as unknown[] | null) ?? []);
    await this.hooks.afterWrite?.(tx, ctx, uuid, values, mode);
  }

  async create(ctx: Ctx, inputs: Obj[]): Promise<Obj[]> {
    // Validate everything first: one bad object rejects the whole request and writes nothing.
    const all = inputs.map((input) => validateFields(this.fields, input, 'create'));
    const now = isoTimestamp(ctx.clock.now());
    const uuids = await ctx.store.transaction(async (tx) => {
      const made: string[] = [];
      for (const values of all) {
        const uuid = ctx.ids.uuid();
        const body = this.bodyOf(values);
        await tx
          .insertInto('resources')
          .values({
            kind: this.kind,
            uuid,
            owner_uuid: ctx.caller.uuid,
            name: typeof body.name === 'string' ? body.name : null,
            body: JSON.stringify(body),
            created_at: now,
            updated_at: now,
          })
          .execute();
        await this.afterWrite(tx, ctx, uuid, values, 'create');
        made.push(uuid);
      }
      return made;
    });
    const rows = (await ctx.store.db
      .selectFrom('resources')
      .selectAll()
      .where('kind', '=', this.kind)
      .where('uuid', 'in', uuids)
      .orderBy('seq')
      .execute()) as Row[];
    return this.presentAll(ctx, rows);
  }

  async update(ctx: Ctx, uuid: string, input: Obj): Promise<Obj> {
    const values = validateFields(this.fields, input, 'update');
    await ctx.store.transaction(async (tx) => {
      let q = visibleRows(ctx, this.kind, tx).selectAll('resources').where('resources.uuid', '=', uuid);
      if (ctx.store.dialect === 'postgres') q = q.forUpdate();
      const row = (await q.executeTakeFirst()) as Row | undefined;
      if (!row) throw notFound(uuid);
      const body = { ...JSON.parse(row.body), ...this.bodyOf(values) };
      await tx
        .updateTable('resources')
        .set({
          body: JSON.stringify(body),
          name: typeof body.name === 'string' ? body.name : null,
          updated_at: isoTimestamp(ctx.clock.now()),
        })
        .where('seq', '=', row.seq)
        .execute();
      await this.afterWrite(tx, ctx, uuid, values, 'update');
    });
    return this.get(ctx, uuid);
  }

  async remove(ctx: Ctx, uuid: string): Promise<void> {
    await ctx.store.transaction(async (tx) => {
      const row = await visibleRows(ctx, this.kind, tx).select('resources.seq').where('resources.uuid', '=', uuid).executeTakeFirst();
      if (!row) throw notFound(uuid);
      await this.hooks.beforeDelete?.(tx, ctx, uuid);
      await tx.deleteFrom('tag_members').where('res_type', '=', this.kind).where('res_uuid', '=', uuid).execute();
      await tx.deleteFrom('resources').where('seq', '=', row.seq).execute();
    });
  }
}
