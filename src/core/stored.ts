import type { Db, Tx } from '../store/db.js';
import {
  ownerRef,
  ref,
  resourceUri,
  mirrors,
  type AnyQuery,
  type Relations,
  type Resource,
  type ResourceExpressions,
  type SqlCondition,
  type VisibleSet,
} from '../store/repository.js';
import type { Ctx } from './context.js';
import { notFound } from './errors.js';
import { copyOf, flat, frozen, frozenBytes, preserialised, project, sortedJson } from './json.js';
import { validateFields, type Obj } from './input.js';
import Type from 'typebox';
import { f, NO_DEFAULT, type Field } from './fields.js';
import type { CollectionDecl, CollectionService, ListQuery, ListResult } from './resource.js';
import { sharedRows, visibleRows } from './visibility.js';
import { setTagsOf } from './tagging.js';
import { declareApplicable, granteeEntries, heldPermissions, requirePermission, type GranteeEntry, type Permission } from './permissions.js';
import { byCodePoint } from './order.js';

/** A stored object: its indexed columns and its body as data. */
export type Row = Resource;

/** What is special about a kind stored in the shared `resources` table; everything else is generic. */
export interface StoredHooks {
  /** Declared fields that are not kept in the JSON body (kept elsewhere, e.g. tag membership). */
  external?: readonly string[];
  /** Normalises validated values before anything is written (may throw a validation error). */
  prepare?(values: Obj, mode: 'create' | 'update', ctx: Ctx): Obj;
  /**
   * Runs first in the create transaction with every object of the request: takes the locks the creates
   * need, in one order for the whole request (so two bulk creates never deadlock).
   */
  beforeCreate?(tx: Tx, ctx: Ctx, all: readonly Obj[]): Promise<void>;
  /** Who owns a new object (default: the caller); a snapshot belongs to its drive's owner. */
  ownerOf?(tx: Tx, ctx: Ctx, values: Obj): Promise<string>;
  /** Runs in the create transaction before the row is inserted (its uuid is chosen); returns the values to store. */
  beforeInsert?(tx: Tx, ctx: Ctx, uuid: string, values: Obj): Promise<Obj>;
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
  /**
   * Rows a delete must lock before the object itself, to keep one lock order everywhere (servers before
   * drives): a drive's delete locks the servers it is mounted on first.
   */
  lockBeforeDelete?(tx: Tx, ctx: Ctx, uuid: string): Promise<void>;
  /** Runs in the delete transaction, with the object locked, before the row goes. */
  beforeDelete?(tx: Tx, ctx: Ctx, uuid: string, row: Row, params: Record<string, string | undefined>): Promise<void>;
  /** Rows of other users this kind shows the caller anyway (read-only unless a permission says more). */
  alsoVisible?(ctx: Ctx, db: Db | Tx): AnyQuery;
  /**
   * What the kind shows of a stored object beyond its body, that depends on nothing but this version of
   * the row (reference objects built from stored uuids, defaults): computed once per version and reused.
   * It returns a new object; `object` is the body with owner, resource_uri and uuid.
   */
  presentStatic?(object: Obj): Obj;
  /** Relations beyond tags and sharing that `decorate` reads from `rows[i].related` (read with the rows). */
  reads?: Pick<Relations, 'members'>;
  /**
   * Adds computed fields that change without the row changing (other rows, time, the simulator) to a page
   * of objects in one batch (never one query per object); `rows[i]` is the stored row of `objects[i]`.
   * Set top-level keys only: everything below them may be shared with other requests (and is frozen).
   */
  decorate?(ctx: Ctx, objects: Obj[], rows: Row[]): Promise<void>;
  /**
   * With `decorate`: whether it may change the object of this row (it then depends on more than the row and
   * its relations: time, other rows), so its served text is never kept (`fragments`). A kind with `decorate`
   * and without `varies` is made afresh on every read.
   */
  varies?(row: Row): boolean;
}

type Q = VisibleSet;

/** A filter: the condition one group of OR-ed values puts on a `resources` row. */
export type StoredFilter = (eb: ResourceExpressions, values: string[], ctx: Ctx, kind: string) => SqlCondition;

/** Filters every stored kind understands; a kind declares which of them it exposes. */
const FILTERS: Record<string, StoredFilter> = {
  uuid: (eb, v) => eb('resources.uuid', 'in', v),
  status: (eb, v) => eb('resources.status', 'in', v),
  state: (eb, v) => eb('resources.status', 'in', v),
  name: (eb, v) => eb('resources.name', 'in', v),
  name__contains: (eb, v, ctx) => eb.or(v.map((s) => ctx.store.resources.like('resources.name', s, { contains: true, caseInsensitive: true }))),
  // Only the caller's own tags filter (an owner's tag on a shared resource is not the grantee's business).
  tag: (eb, v, ctx, kind) => ctx.store.resources.carriesOwnTag(eb, { kind, owner: ctx.caller.uuid, by: 'uuid', values: v, uuidColumn: 'resources.uuid' }),
  tag__name: (eb, v, ctx, kind) => ctx.store.resources.carriesOwnTag(eb, { kind, owner: ctx.caller.uuid, by: 'name', values: v, uuidColumn: 'resources.uuid' }),
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
  /**
   * Whether objects show `grantees` and `permissions` (default: when shareable). The recorded firewall
   * policies are shared through ACLs but show neither.
   */
  showsSharing?: boolean;
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
  /** Objects carry `grantees` and `permissions`. */
  private readonly shows: boolean;

  constructor(
    private readonly spec: StoredKind,
    private readonly hooks: StoredHooks = {},
  ) {
    this.kind = spec.kind;
    this.fields = spec.fields;
    this.permissions = spec.permissions;
    this.shows = spec.permissions !== undefined && spec.showsSharing !== false;
    if (spec.permissions) declareApplicable(spec.kind, spec.permissions);
    this.taggable = spec.taggable ?? false;
    this.external = new Set([...(hooks.external ?? []), ...(this.taggable ? ['tags'] : []), 'grantees', 'permissions']);
  }

  private visible(ctx: Ctx, db: Db | Tx): Q {
    const extra = this.hooks.alsoVisible;
    if (!extra) return visibleRows(ctx, this.kind, db, this.permissions !== undefined);
    // The rule is built for the caller's uuid as a parameter, so its SQL is compiled once per kind.
    const shared = sharedRows(`also.${this.kind}`, (me) => extra({ ...ctx, caller: { ...ctx.caller, uuid: me } }, db));
    return ctx.store.resources.visible(db, this.kind, ctx.caller.uuid, shared);
  }

  uri(uuid: string): string {
    return resourceUri(this.kind, uuid);
  }

  /**
   * The object as stored, as every caller sees it: the body with owner, resource_uri and uuid, and the
   * kind's static presentation. Made once per (uuid, version) and kept frozen in the store's cache; each
   * request gets a shallow copy to add its own fields to. `written`: the version its writer's answer shows.
   */
  present(store: Ctx['store'], row: Row, written = false): Obj {
    const key = `${this.kind}/${row.uuid}`;
    const kept = store.presented.get(key, row.version);
    if (kept) return copyOf(kept);
    const base = { ...row.body, owner: ownerRef(row.owner_uuid), resource_uri: this.uri(row.uuid), uuid: row.uuid };
    const made = this.hooks.presentStatic ? this.hooks.presentStatic(base) : base;
    // A version just written is answered once, to its writer: freezing and keeping it (a serialisation of
    // every part, and their bytes counted) would cost its write more than its answer. Its first read keeps it.
    if (written) return made;
    const shown = frozen(made);
    if (store.presented.maxBytes > 0) store.presented.set(key, row.version, shown, frozenBytes(shown));
    return copyOf(shown);
  }

  /** The relations a read brings along with this kind's rows, for the keys the caller will see. */
  private relations(wants: (key: string) => boolean = all): Relations {
    return {
      tags: this.taggable && wants('tags'),
      sharing: this.shows && this.permissions !== undefined && (wants('grantees') || wants('permissions')),
      members: this.hooks.reads?.members === true,
    };
  }

  /** The reads of each `fields=` form asked for (the whole object, the short form, a few others): made once, not per request. */
  private readonly reads = new Map<string, Reads>();

  /** The relations of a form (`relations()`) and what a reader of kept texts reads of its rows instead (`keysOnly`). */
  private readsOf(fields: readonly string[] | undefined): Reads {
    const form = fields ? fields.join(',') : '*';
    let r = this.reads.get(form);
    if (!r) {
      const wanted = fields && new Set(fields);
      const rel = Object.freeze(this.relations(wanted ? (key: string) => wanted.has(key) : all));
      r = { form, rel, keys: keysOnly(rel, false), stampedKeys: keysOnly(rel, true) };
      // Forms come from the query string: bounded, the oldest out.
      if (this.reads.size >= MAX_FORMS) this.reads.delete(this.reads.keys().next().value!);
      this.reads.set(form, r);
    }
    return r;
  }

  /**
   * Objects as the caller sees them, from rows read with their relations (`relations()`): the caller's tags,
   * and `grantees` (who holds what, shown to the owner only, so a grantee never learns who else shares the
   * resource) or `permissions` (the caller's effective grants, empty for the owner). Then the kind's
   * decorations (computed fields that need no snapshot with the rows).
   */
  private async shown(ctx: Ctx, rows: Row[], rel: Relations, written = false): Promise<Obj[]> {
    if (!rows.length) return [];
    const objects = rows.map((row) => {
      const object = this.present(ctx.store, row, written);
      const related = row.related!;
      if (rel.sharing && this.permissions) {
        const own = row.owner_uuid === ctx.caller.uuid;
        showSharing(object, own, own ? granteeEntries(related.grants, this.permissions) : [], own ? [] : heldPermissions(related.held, this.permissions));
      }
      if (rel.tags) object.tags = related.tags.map((t) => ref('tags', t));
      return object;
    });
    if (this.hooks.decorate) await this.hooks.decorate(ctx, objects, rows);
    return objects;
  }

  /** The visible rows of this kind matching the query's filters (no paging). */
  filtered(ctx: Ctx, query: ListQuery, db: Db | Tx = ctx.store.db): Q {
    const q: Q = this.visible(ctx, db);
    for (const [name, groups] of query.filters) {
      const apply = this.hooks.filters?.[name] ?? FILTERS[name];
      if (!apply) continue;
      for (const values of groups) q.where.push((eb) => apply(eb, values, ctx, this.kind));
    }
    return q;
  }

  async list(ctx: Ctx, query: ListQuery): Promise<ListResult> {
    // A short list (or `fields=`) shows a few keys: relations for the others are not read.
    const reads = this.readsOf(query.fields);
    const rel = reads.rel;
    const page = { order: this.spec.order ?? 'created', limit: query.limit, offset: query.offset } as const;
    const set = this.filtered(ctx, query);
    // The page's rows without their bodies where most of its objects are kept as served.
    const kept = query.json && this.keepsFragments(ctx);
    const read: Relations = kept ? keysOf(ctx, reads) : rel;
    // Usually one statement (its own snapshot); a deep page takes several, read in one snapshot (on
    // PostgreSQL one statement too, while what it starts from is kept).
    const { rows, total } = ctx.store.resources.pagesInSteps(set, page)
      ? ((await ctx.store.resources.deepAtOnce(set, page, read)) ??
        (await ctx.store.snapshot((db) => ctx.store.resources.listPage(this.filtered(ctx, query, db), page, read))))
      : await ctx.store.resources.listPage(set, page, read);
    if (kept) {
      const objects = await this.fragments(ctx, rows, reads, query.fields);
      if (objects) return { total, objects, cut: true };
      // The sharing of a row moved between the page and its body: the page again, whole, in one snapshot.
      const again = await ctx.store.snapshot((db) => ctx.store.resources.listPage(this.filtered(ctx, query, db), page, rel));
      return { total: again.total, objects: await this.shown(ctx, again.rows, rel) };
    }
    return { total, objects: await this.shown(ctx, rows, rel) };
  }

  /**
   * The object if the caller may use `perm` on it: 404 when invisible, 403 when visible but not permitted.
   * Inside a transaction the row is locked first (the decision and the write it allows see one state).
   */
  async authorize(ctx: Ctx, uuid: string, perm: Permission, tx?: Tx, rel?: Relations): Promise<Row> {
    const db = tx ?? ctx.store.db;
    const row = tx
      ? await (rel ? ctx.store.resources.lockWith(tx, this.kind, uuid, ctx.caller.uuid, rel) : ctx.store.resources.lock(tx, this.kind, uuid))
      : await ctx.store.resources.get(db, this.kind, uuid);
    if (row && row.owner_uuid === ctx.caller.uuid) return row;
    const visible = row && (await this.visibleToCaller(ctx, db, row)) ? row : undefined;
    if (this.hooks.access) {
      const other = await this.hooks.access(ctx, uuid, perm, visible, db);
      if (other) return other;
    }
    if (!visible) throw notFound(uuid);
    await requirePermission(ctx, this.kind, visible, perm, db);
    return visible;
  }

  /** Whether a row the caller does not own is visible to them (an ACL grants LIST, or the kind shows it). */
  private async visibleToCaller(ctx: Ctx, db: Db | Tx, row: Row): Promise<boolean> {
    if (this.hooks.alsoVisible && (await ctx.store.resources.scans.selects(db, this.hooks.alsoVisible(ctx, db), row.uuid))) return true;
    if (!this.permissions) return false;
    return ctx.store.resources.acls.isGranted(db, ctx.caller.uuid, this.kind, 'LIST', row.uuid);
  }

  /**
   * One object as the caller sees it. The row, its tags and its sharing come from one statement (one
   * snapshot, one round trip); the kind's decorations follow.
   */
  async get(ctx: Ctx, uuid: string, opts: { json?: boolean } = {}): Promise<Obj> {
    const reads = this.readsOf(undefined);
    const rel = reads.rel;
    const kept = opts.json === true && this.keepsFragments(ctx);
    const row = await ctx.store.resources.findVisibleWith(this.visible(ctx, ctx.store.db), uuid, kept ? keysOf(ctx, reads) : rel);
    if (!row) {
      const elsewhere = await this.hooks.fallbackGet?.(ctx, uuid);
      if (elsewhere) return elsewhere;
      throw notFound(uuid);
    }
    if (!kept) return (await this.shown(ctx, [row], rel))[0];
    const fragments = await this.fragments(ctx, [row], reads, undefined);
    if (fragments) {
      if (!fragments[0]) throw notFound(uuid);
      return fragments[0];
    }
    // Its sharing moved between the two reads: once more, whole, in one statement.
    const whole = await ctx.store.resources.findVisibleWith(this.visible(ctx, ctx.store.db), uuid, rel);
    if (!whole) throw notFound(uuid);
    return (await this.shown(ctx, [whole], rel))[0];
  }

  /** Whether objects of this kind are served from kept text (`fragments`): a cache, and nothing decorated that may vary. */
  private keepsFragments(ctx: Ctx): boolean {
    return ctx.store.fragments.maxBytes > 0 && (!this.hooks.decorate || this.hooks.varies !== undefined);
  }

  /**
   * Objects as served (JSON text, cut to `fields`) for rows read without their bodies but with the relations
   * `rel`. An object is its row's version, its relations as the caller reads them (their exact text) and which
   * side of them the caller is on (owner or not), so the text kept under those is the text made afresh: kept
   * ones are reused, the others read whole (one statement for all), presented, and kept unless the kind's
   * decoration `varies` for them. A row gone since the page was read is left out; a row whose relations
   * moved since (an ACL, a tag) makes the answer undefined: the rows were chosen by sharing that no longer
   * holds, and the caller reads them again in one snapshot.
   * `STRATUS_ANSWER_CACHE_VERIFY=1` makes every object afresh and fails when a kept text differs.
   */
  private async fragments(ctx: Ctx, rows: Row[], reads: Reads, fields: readonly string[] | undefined): Promise<Obj[] | undefined> {
    const cache = ctx.store.fragments;
    const { form, rel } = reads;
    const me = ctx.caller.uuid;
    const keyOf = (r: Row) => `${this.kind}/${r.uuid}|${form}|${r.owner_uuid === me ? 'own' : 'other'}`;
    const versionOf = (r: Row) => `${r.version}|${r.related!.text}`;
    const out: (Obj | undefined)[] = [];
    const missing = new Map<string, number>();
    for (const [i, r] of rows.entries()) {
      const text = VERIFY ? undefined : cache.get(keyOf(r), versionOf(r));
      if (text === undefined) missing.set(r.uuid, i);
      else out[i] = preserialised(text);
    }
    if (!missing.size) return out as Obj[];
    // Where rows were read with the stamp of their relations, the fresh ones are too (the version their texts are kept under).
    const stamped = ctx.store.resources.relations.stamps ? { ...rel, stamp: 'also' as const } : rel;
    const fresh = await ctx.store.resources.findManyWith(ctx.store.db, this.kind, [...missing.keys()], me, stamped);
    if (fresh.some((row) => row.related!.text !== rows[missing.get(row.uuid)!].related!.text)) return undefined;
    const objects = await this.shown(ctx, fresh, rel);
    for (const [j, row] of fresh.entries()) {
      const text = flat(sortedJson(project(objects[j], fields)));
      const [key, version] = [keyOf(row), versionOf(row)];
      if (VERIFY) {
        const kept = cache.get(key, version);
        if (kept !== undefined && kept !== text)
          throw new Error(`fragment cache: the kept ${key} (version ${version}) differs from a fresh one: ${kept} / ${text}`);
      }
      if (!this.hooks.varies?.(row)) cache.set(key, version, text, FRAGMENT_BYTES + 2 * (key.length + version.length) + text.length);
      out[missing.get(row.uuid)!] = preserialised(text);
    }
    return out.filter((o) => o !== undefined);
  }

  private validated(ctx: Ctx, input: Obj, mode: 'create' | 'update'): Obj {
    const values = validateFields(this.fields, input, mode);
    return this.hooks.prepare ? this.hooks.prepare(values, mode, ctx) : values;
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
    const tags = (values.tags as unknown[] | null | undefined) ?? [];
    // A new object carries no tags yet: only tags given on create need writing.
    if (this.taggable && values.tags !== undefined && row.owner_uuid === ctx.caller.uuid && (mode === 'update' || tags.length))
      await setTagsOf(tx, ctx, this.kind, uuid, tags);
    await this.hooks.afterWrite?.(tx, ctx, uuid, values, mode, input);
  }

  async create(ctx: Ctx, inputs: Obj[]): Promise<Obj[]> {
    // Validate everything first: one bad object rejects the whole request and writes nothing.
    const all = inputs.map((input) => this.validated(ctx, input, 'create'));
    const rel = this.relations();
    const { uuids, rows } = await ctx.store.transaction(async (tx) => {
      await this.hooks.beforeCreate?.(tx, ctx, all);
      const made: string[] = [];
      // The rows as inserted, while nothing else this transaction did can change how they show (see `asWritten`).
      let written: Row[] | undefined = rel.members ? undefined : [];
      for (const [i, values] of all.entries()) {
        const uuid = ctx.ids.uuid();
        const owner = this.hooks.ownerOf ? await this.hooks.ownerOf(tx, ctx, values) : ctx.caller.uuid;
        const stored = this.hooks.beforeInsert ? await this.hooks.beforeInsert(tx, ctx, uuid, values) : values;
        const body = this.bodyOf(stored);
        const now = ctx.clock.now();
        const text = await ctx.store.resources.insert(tx, now, { kind: this.kind, uuid, owner, body });
        const writes = ctx.store.resources.rows.writeCount;
        await this.afterWrite(tx, ctx, { uuid, owner_uuid: owner }, stored, 'create', inputs[i]);
        const tagged = ((stored.tags as unknown[] | null | undefined) ?? []).length > 0;
        written =
          written && owner === ctx.caller.uuid && !tagged && ctx.store.resources.rows.writeCount === writes
            ? [...written, this.asWritten({ kind: this.kind, uuid, owner_uuid: owner, version: 0, now }, text, rel)]
            : undefined;
        made.push(uuid);
      }
      return { uuids: made, rows: written };
    });
    return rows ? this.shown(ctx, rows, rel, true) : this.presentUuids(ctx, uuids);
  }

  /**
   * A row as this request's transaction wrote it, with the relations it had: what reading it again after the
   * commit would give, one statement fewer per write. Only where nothing else the transaction did can change
   * how it shows: no other row written (hooks may write this one again), no tags given (tag membership is
   * what sharing follows), and a kind that shows no members. Its body is what the store keeps: `text`, the
   * JSON the write stored, parsed.
   */
  private asWritten(
    row: Pick<Row, 'kind' | 'uuid' | 'owner_uuid' | 'version'> & { seq?: number; created_at?: string; now: Date },
    text: string,
    rel: Relations,
    related: NonNullable<Row['related']> = { tags: [], grants: [], held: [], members: [], text: '' },
  ): Row {
    if (rel.members) throw new Error('asWritten: a kind showing members is read again');
    // As the store stamps them (store/resources/model.ts `stamp`); nothing shown reads them.
    const at = row.now.toISOString().replace(/\.(\d{3})Z$/, '.$1000+00:00');
    return {
      seq: row.seq ?? 0,
      kind: row.kind,
      uuid: row.uuid,
      owner_uuid: row.owner_uuid,
      version: row.version,
      created_at: row.created_at ?? at,
      updated_at: at,
      body: JSON.parse(text) as Obj,
      related,
    } as Row;
  }

  async update(ctx: Ctx, uuid: string, input: Obj): Promise<Obj> {
    const validated = this.validated(ctx, input, 'update');
    const rel = this.relations();
    // The row is locked with its relations as the caller sees them: the answer is then the row as written.
    const read = rel.members ? undefined : rel;
    const written = await ctx.store.transaction(async (tx) => {
      const row = await this.authorize(ctx, uuid, 'EDIT', tx, read);
      // Its indexed columns as stored, taken before a hook can change its body in place.
      const stored = mirrors(row.body);
      const writes = ctx.store.resources.rows.writeCount;
      const values = this.hooks.beforeUpdate ? await this.hooks.beforeUpdate(tx, ctx, row, validated) : validated;
      // The row is locked since authorize(); re-read it only if some row was written since (a hook may have
      // changed this one in this transaction): one statement fewer for most PUTs.
      const fresh = ctx.store.resources.rows.writeCount === writes ? row : ((await ctx.store.resources.lock(tx, this.kind, uuid)) ?? row);
      const body = { ...fresh.body, ...this.bodyOf(values) };
      const now = ctx.clock.now();
      const text = await ctx.store.resources.write(tx, now, fresh, body, fresh === row ? stored : undefined);
      const after = ctx.store.resources.rows.writeCount;
      await this.afterWrite(tx, ctx, row, values, 'update', input);
      const same = fresh === row && row.related && row.uuid === uuid && values.tags === undefined && ctx.store.resources.rows.writeCount === after;
      return same ? this.asWritten({ ...row, version: Number(row.version) + 1, now }, text, rel, row.related) : undefined;
    });
    return written ? (await this.shown(ctx, [written], rel, true))[0] : this.get(ctx, uuid);
  }

  /**
   * Change a stored object's body outside a request (timers, actions) under its row lock; `change` gets
   * the committed body and changes only what its caller owns. Undefined when the object is gone.
   */
  patch(tx: Tx, s: Pick<Ctx, 'clock' | 'store'>, uuid: string, change: (body: Obj) => Obj): Promise<Obj | undefined> {
    return s.store.resources.patch(tx, s.clock.now(), this.kind, uuid, change);
  }

  /** Insert an object owned by `owner` outside the create path (clones, jobs). */
  async insert(tx: Tx, s: Pick<Ctx, 'clock' | 'store'>, uuid: string, owner: string | null, body: Obj): Promise<void> {
    await s.store.resources.insert(tx, s.clock.now(), { kind: this.kind, uuid, owner, body });
  }

  /** Present objects by uuid (any owner) as `ctx.caller` sees them, in the given order: one statement. */
  async presentUuids(ctx: Ctx, uuids: string[]): Promise<Obj[]> {
    const rel = this.relations();
    return this.shown(ctx, await ctx.store.resources.findManyWith(ctx.store.db, this.kind, uuids, ctx.caller.uuid, rel), rel);
  }

  /**
   * Bulk delete (`DELETE /<kind>/` with `{objects:[{uuid}]}`): all or nothing, one transaction. An object
   * named twice is deleted once (the second mention is no missing object).
   */
  async removeMany(ctx: Ctx, uuids: string[]): Promise<void> {
    await ctx.store.transaction(async (tx) => {
      for (const uuid of new Set(uuids)) await this.removeWithin(tx, ctx, uuid);
    });
  }

  async remove(ctx: Ctx, uuid: string, params: Record<string, string | undefined> = {}): Promise<void> {
    await ctx.store.transaction((tx) => this.removeWithin(tx, ctx, uuid, params));
  }

  /** Delete inside the caller's transaction (a server deleted with `recurse` takes its drives along). */
  async removeWithin(tx: Tx, ctx: Ctx, uuid: string, params: Record<string, string | undefined> = {}): Promise<void> {
    await this.hooks.lockBeforeDelete?.(tx, ctx, uuid);
    const row = await this.authorize(ctx, uuid, 'DELETE', tx);
    await this.hooks.beforeDelete?.(tx, ctx, uuid, row, params);
    await ctx.store.resources.remove(tx, this.kind, uuid);
  }
}

const all = (): boolean => true;

/** A `fields=` form's relations, and what a reader of its kept texts reads of the rows (see `keysOnly`). */
interface Reads {
  form: string;
  rel: Relations;
  keys: Relations;
  stampedKeys: Relations;
}
/** `fields=` forms whose reads a kind keeps. */
const MAX_FORMS = 64;

/**
 * What a reader of kept texts reads of a page's rows: no body, and where the store stamps relations (SQLite)
 * only their stamp, not the relations themselves: each relation column is a subquery per row.
 */
function keysOnly(rel: Relations, stamped: boolean): Relations {
  return Object.freeze<Relations>(stamped ? { ...rel, body: false, stamp: 'only' } : { ...rel, body: false });
}

const keysOf = (ctx: Ctx, reads: Reads): Relations => (ctx.store.resources.relations.stamps ? reads.stampedKeys : reads.keys);

const VERIFY = process.env.STRATUS_ANSWER_CACHE_VERIFY === '1';
/** A kept text beside its characters (one byte each: JSON text is ASCII unless a value is not): its entry and strings. */
const FRAGMENT_BYTES = 200;

/** `grantees` are shown to the owner only (a grantee never learns who else shares); `permissions` to grantees. */
function showSharing(o: Obj, own: boolean, grantees: GranteeEntry[], held: Permission[]): void {
  o.grantees = own ? grantees : [];
  o.permissions = own ? [] : held;
}

/** Read-only fields every shareable kind carries (spec ACL rules 6 and 7). */
const SHARING_FIELDS: Record<string, Field> = {
  // Computed on every read; the recorded schema marks them writable, and whatever a client sends back is ignored.
  grantees: f.list(Type.Unknown(), { default: undefined, schemaDefault: NO_DEFAULT }),
  permissions: f.list(Type.Unknown(), { default: undefined, schemaDefault: NO_DEFAULT }),
};

/** What a kind's declaration may leave out: the API's usual page size and the standard filters. */
const DEFAULT_LIMIT = 20;
const standardFilters = (taggable: boolean): Record<string, string> =>
  taggable ? { name: 'exact', name__contains: 'exact', tag: 'exact', uuid: 'exact' } : { name: 'exact', name__contains: 'exact', uuid: 'exact' };

export type StoredDeclInput = Omit<CollectionDecl, 'service' | 'shape' | 'defaultLimit' | 'filtering'> &
  Partial<Pick<CollectionDecl, 'defaultLimit' | 'filtering'>> &
  Pick<StoredKind, 'order' | 'showsSharing'>;

/**
 * A collection kind kept in the shared table: the declaration plus the generic service built from it.
 * Declaring `permissions` is all a kind does to become shareable; its sharing fields are added here.
 * Left out, `defaultLimit` is 20 and `filtering` the standard set (name, name__contains, uuid, and tag
 * for taggable kinds).
 */
export function storedDecl(decl: StoredDeclInput, hooks: StoredHooks = {}): Omit<CollectionDecl, 'service'> & { service: StoredCollection } {
  const fields = decl.permissions && decl.showsSharing !== false ? { ...decl.fields, ...SHARING_FIELDS } : decl.fields;
  const full = {
    ...decl,
    shape: 'collection' as const,
    defaultLimit: decl.defaultLimit ?? DEFAULT_LIMIT,
    filtering: decl.filtering ?? standardFilters(decl.taggable === true),
    fields: Object.fromEntries(Object.entries(fields).sort(([a], [b]) => byCodePoint(a, b))),
  };
  return { ...full, service: new StoredCollection(full, hooks) };
}
