import { sql, type ExpressionBuilder, type RawBuilder, type SelectQueryBuilder } from 'kysely';
import type { Database } from './schema.js';
import type { Db, Dialect, Tx } from './db.js';
import { page } from './paging.js';

/**
 * The one module that spells SQL against the shared `resources` table. Every kind reads, locks, inserts,
 * patches and deletes its rows through here; URIs and owner references are built here; where the two
 * engines differ (row locks, JSON functions, paging) the answer is given here, once.
 *
 * Locking: `lock()` is `SELECT … FOR UPDATE` on PostgreSQL. A decision (is the drive free? is the server
 * stopped?) is made on rows read through `lock()` inside the transaction that writes its outcome, so a
 * concurrent transaction deciding on the same rows waits and then sees the committed result. SQLite runs
 * one transaction at a time on its single connection, so a plain read there is already a locked read.
 */

export type Obj = Record<string, unknown>;

/* Kysely types a builder by the tables joined so far; the few helpers that take any builder say so here, once. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyQuery = SelectQueryBuilder<any, any, any>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyExpressions = ExpressionBuilder<any, any>;

/** A stored resource: the indexed columns plus the body as data. */
export interface Resource {
  seq: number;
  kind: string;
  uuid: string;
  owner_uuid: string | null;
  body: Obj;
  created_at: string;
  updated_at: string;
}

/** A reference as the API shows it. */
export interface Ref {
  resource_uri: string;
  uuid: string;
}

export const API_PREFIX = '/api/2.0/';
export const resourceUri = (kind: string, uuid: string): string => `${API_PREFIX}${kind}/${uuid}/`;
export const ref = (kind: string, uuid: string): Ref => ({ resource_uri: resourceUri(kind, uuid), uuid });
export const userUri = (uuid: string): string => resourceUri('user', uuid);
export const ownerRef = (uuid: string | null): Ref | null => (uuid ? ref('user', uuid) : null);

type Row = { seq: number; kind: string; uuid: string; owner_uuid: string | null; body: string; created_at: string; updated_at: string };
const COLUMNS = ['seq', 'kind', 'uuid', 'owner_uuid', 'body', 'created_at', 'updated_at'] as const;

const toResource = (r: Row): Resource => ({ ...r, body: JSON.parse(r.body) as Obj });

/** The indexed mirrors of a body: `name` and `status` (jobs keep theirs as `state`). */
function mirrors(body: Obj): { name: string | null; status: string | null } {
  const status = typeof body.status === 'string' ? body.status : typeof body.state === 'string' ? body.state : null;
  return { name: typeof body.name === 'string' ? body.name : null, status };
}

/** The API's timestamp form (microseconds, `+00:00`), as every other stored time. */
const stamp = (now: Date) => now.toISOString().replace(/\.(\d{3})Z$/, '.$1000+00:00');

export class ResourceRepository {
  constructor(readonly dialect: Dialect) {}

  private select(db: Db | Tx, kind: string | readonly string[]) {
    const q = db.selectFrom('resources').select([...COLUMNS]);
    return typeof kind === 'string' ? q.where('kind', '=', kind) : q.where('kind', 'in', [...kind]);
  }

  /** One row (of one of `kind`s), unlocked. */
  async get(db: Db | Tx, kind: string | readonly string[], uuid: string): Promise<Resource | undefined> {
    const row = (await this.select(db, kind).where('uuid', '=', uuid).executeTakeFirst()) as Row | undefined;
    return row && toResource(row);
  }

  /** Rows by uuid, in the order asked (missing ones left out). */
  async getMany(db: Db | Tx, kind: string | readonly string[], uuids: readonly string[]): Promise<Resource[]> {
    if (!uuids.length) return [];
    const rows = (await this.select(db, kind)
      .where('uuid', 'in', [...uuids])
      .execute()) as Row[];
    const order = new Map(uuids.map((u, i) => [u, i]));
    return rows.map(toResource).sort((a, b) => order.get(a.uuid)! - order.get(b.uuid)!);
  }

  /** One row, locked until the transaction ends (the read a decision is made on). */
  async lock(tx: Tx, kind: string | readonly string[], uuid: string): Promise<Resource | undefined> {
    let q = this.select(tx, kind).where('uuid', '=', uuid);
    if (this.dialect === 'postgres') q = q.forUpdate();
    const row = (await q.executeTakeFirst()) as Row | undefined;
    return row && toResource(row);
  }

  /** Several rows locked in uuid order (one order for every caller, so two lockers never deadlock). */
  async lockMany(tx: Tx, kind: string | readonly string[], uuids: readonly string[]): Promise<Resource[]> {
    if (!uuids.length) return [];
    let q = this.select(tx, kind)
      .where('uuid', 'in', [...uuids])
      .orderBy('uuid');
    if (this.dialect === 'postgres') q = q.forUpdate();
    const rows = ((await q.execute()) as Row[]).map(toResource);
    const order = new Map(uuids.map((u, i) => [u, i]));
    return rows.sort((a, b) => order.get(a.uuid)! - order.get(b.uuid)!);
  }

  async insert(tx: Tx, now: Date, r: { kind: string; uuid: string; owner: string | null; body: Obj }): Promise<void> {
    await tx.insertInto('resources').values(this.values(now, r)).execute();
  }

  /** Many rows in few statements (seeding, the bench's large accounts); `chunk` rows per INSERT. */
  async insertMany(tx: Tx, now: Date, rows: readonly { kind: string; uuid: string; owner: string | null; body: Obj }[], chunk = 500): Promise<void> {
    for (let i = 0; i < rows.length; i += chunk)
      await tx
        .insertInto('resources')
        .values(rows.slice(i, i + chunk).map((r) => this.values(now, r)))
        .execute();
  }

  /** Insert unless a row of that kind and uuid exists (also one a concurrent transaction is inserting). */
  async insertIfAbsent(tx: Tx, now: Date, r: { kind: string; uuid: string; owner: string | null; body: Obj }): Promise<boolean> {
    const res = await tx
      .insertInto('resources')
      .values(this.values(now, r))
      .onConflict((oc) => oc.columns(['uuid', 'kind']).doNothing())
      .executeTakeFirst();
    return Number(res.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  private values(now: Date, r: { kind: string; uuid: string; owner: string | null; body: Obj }) {
    const t = stamp(now);
    return { kind: r.kind, uuid: r.uuid, owner_uuid: r.owner, ...mirrors(r.body), body: JSON.stringify(r.body), created_at: t, updated_at: t };
  }

  /** Replace the body of a row read through `lock()` in this transaction. */
  async write(tx: Tx, now: Date, row: Pick<Resource, 'seq'>, body: Obj): Promise<void> {
    await tx
      .updateTable('resources')
      .set({ body: JSON.stringify(body), ...mirrors(body), updated_at: stamp(now) })
      .where('seq', '=', row.seq)
      .execute();
  }

  /**
   * Change one object's body under its row lock: `change` sees the committed body of now and returns the
   * next one (changing only the keys its caller owns). Undefined when the object is gone.
   */
  async patch(tx: Tx, now: Date, kind: string, uuid: string, change: (body: Obj) => Obj): Promise<Obj | undefined> {
    const row = await this.lock(tx, kind, uuid);
    if (!row) return undefined;
    const body = change(row.body);
    if (body !== row.body) await this.write(tx, now, row, body);
    return body;
  }

  /** Delete rows and their tag memberships. */
  async remove(tx: Tx, kind: string, uuids: string | readonly string[], opts: { ownerless?: boolean } = {}): Promise<void> {
    const list = typeof uuids === 'string' ? [uuids] : [...uuids];
    if (!list.length) return;
    await tx.deleteFrom('tag_members').where('res_type', '=', kind).where('res_uuid', 'in', list).execute();
    let q = tx.deleteFrom('resources').where('kind', '=', kind).where('uuid', 'in', list);
    if (opts.ownerless) q = q.where('owner_uuid', 'is', null);
    await q.execute();
  }

  /** uuids of a kind in some states (indexed status column), optionally one owner's. */
  async uuidsInStatus(db: Db | Tx, kind: string, statuses: readonly string[], owner?: string): Promise<string[]> {
    let q = db
      .selectFrom('resources')
      .select('uuid')
      .where('kind', '=', kind)
      .where('status', 'in', [...statuses]);
    if (owner !== undefined) q = q.where('owner_uuid', '=', owner);
    return (await q.execute()).map((r) => r.uuid);
  }

  /** Whether any of `uuids` (of kind) is in one of `statuses`. */
  async anyInStatus(db: Db | Tx, kind: string, uuids: readonly string[], statuses: readonly string[]): Promise<boolean> {
    if (!uuids.length) return false;
    const row = await db
      .selectFrom('resources')
      .select('uuid')
      .where('kind', '=', kind)
      .where('uuid', 'in', [...uuids])
      .where('status', 'in', [...statuses])
      .executeTakeFirst();
    return row !== undefined;
  }

  /** Names an owner already uses for a kind (clone naming), optionally only those starting with `prefix`. */
  async namesOf(db: Db | Tx, kind: string, owner: string, prefix?: string): Promise<Set<string>> {
    let q = db.selectFrom('resources').select('name').where('kind', '=', kind).where('owner_uuid', '=', owner);
    if (prefix !== undefined) q = q.where(this.like('name', prefix, { prefix: true }));
    return new Set((await q.execute()).map((r) => r.name).filter((n): n is string => n !== null));
  }

  /** Which of `uuids` exist as `kind` (and, if given, belong to `owner`): uuid -> kind. */
  async existing(db: Db | Tx, kinds: string | readonly string[], uuids: readonly string[], owner?: string): Promise<Map<string, Resource>> {
    if (!uuids.length) return new Map();
    let q = this.select(db, kinds).where('uuid', 'in', [...uuids]);
    if (owner !== undefined) q = q.where('owner_uuid', '=', owner);
    return new Map(((await q.execute()) as Row[]).map((r) => [r.uuid, toResource(r)]));
  }

  /** Every row of a kind with an owner's e-mail (operator listings), in creation order. */
  listWithOwnerEmail(db: Db | Tx, kind: string, owner?: string) {
    let q = db
      .selectFrom('resources as r')
      .leftJoin('users as u', 'u.uuid', 'r.owner_uuid')
      .select(['r.uuid', 'r.owner_uuid', 'u.email'])
      .where('r.kind', '=', kind);
    if (owner) q = q.where('r.owner_uuid', '=', owner);
    return q.orderBy('r.seq').execute();
  }

  /** Subquery: uuids of an owner's objects of a kind (for IN conditions of other queries). */
  ownedUuids(db: Db | Tx, kind: string, owner: string | null) {
    const q = db.selectFrom('resources as own').select('own.uuid').where('own.kind', '=', kind);
    return owner === null ? q.where('own.owner_uuid', 'is', null) : q.where('own.owner_uuid', '=', owner);
  }

  /** Every uuid of a kind (a small kind: the pool's taken addresses). */
  async allUuids(db: Db | Tx, kind: string): Promise<Set<string>> {
    return new Set((await db.selectFrom('resources').select('uuid').where('kind', '=', kind).execute()).map((r) => r.uuid));
  }

  /** All rows of a kind without an owner (the library), for synchronising it. */
  async ownerless(db: Db | Tx, kind: string): Promise<Resource[]> {
    return ((await this.select(db, kind).where('owner_uuid', 'is', null).execute()) as Row[]).map(toResource);
  }

  // ---- tag membership (tag_members joined to the tags it names) ----

  /** Objects of any kind but `notKind` among `uuids` owned by `owner`: uuid -> kind. */
  async kindsOf(db: Db | Tx, uuids: readonly string[], owner: string, notKind: string): Promise<Map<string, string>> {
    if (!uuids.length) return new Map();
    const rows = await db
      .selectFrom('resources')
      .select(['kind', 'uuid'])
      .where('uuid', 'in', [...uuids])
      .where('kind', '!=', notKind)
      .where('owner_uuid', '=', owner)
      .execute();
    return new Map(rows.map((r) => [r.uuid, r.kind]));
  }

  /** Replace a tag's member set. */
  async setTagMembers(tx: Tx, tag: string, members: readonly { kind: string; uuid: string }[]): Promise<void> {
    await tx.deleteFrom('tag_members').where('tag_uuid', '=', tag).execute();
    if (members.length)
      await tx
        .insertInto('tag_members')
        .values(members.map((m) => ({ tag_uuid: tag, res_type: m.kind, res_uuid: m.uuid })))
        .onConflict((oc) => oc.columns(['tag_uuid', 'res_type', 'res_uuid']).doNothing())
        .execute();
  }

  /** Replace the set of `owner`'s tags that carry one resource (other users' tags on it stay). */
  async setResourceTags(tx: Tx, owner: string, kind: string, uuid: string, tags: readonly string[]): Promise<void> {
    await tx
      .deleteFrom('tag_members')
      .where('res_type', '=', kind)
      .where('res_uuid', '=', uuid)
      .where('tag_uuid', 'in', this.ownedUuids(tx, 'tags', owner))
      .execute();
    if (tags.length)
      await tx
        .insertInto('tag_members')
        .values(tags.map((t) => ({ tag_uuid: t, res_type: kind, res_uuid: uuid })))
        .onConflict((oc) => oc.columns(['tag_uuid', 'res_type', 'res_uuid']).doNothing())
        .execute();
  }

  /** `owner`'s tags on each of a page of resources of one kind, in tagging order. */
  async tagsOn(db: Db | Tx, owner: string, kind: string, uuids: readonly string[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    if (!uuids.length) return out;
    const rows = await db
      .selectFrom('tag_members')
      .innerJoin('resources as t', (j) => j.onRef('t.uuid', '=', 'tag_members.tag_uuid').on('t.kind', '=', 'tags'))
      .select(['res_uuid', 'tag_uuid'])
      .where('t.owner_uuid', '=', owner)
      .where('res_type', '=', kind)
      .where('res_uuid', 'in', [...uuids])
      .orderBy('tag_members.seq')
      .execute();
    for (const r of rows) out.set(r.res_uuid, [...(out.get(r.res_uuid) ?? []), r.tag_uuid]);
    return out;
  }

  /** The members of a page of tags (with their owners), in tagging order. */
  async membersOf(db: Db | Tx, tags: readonly string[]) {
    if (!tags.length) return [];
    return db
      .selectFrom('tag_members as tm')
      .innerJoin('resources as r', (j) => j.onRef('r.uuid', '=', 'tm.res_uuid').onRef('r.kind', '=', 'tm.res_type'))
      .select(['tm.tag_uuid', 'tm.res_type', 'tm.res_uuid', 'r.owner_uuid'])
      .where('tm.tag_uuid', 'in', [...tags])
      .orderBy('tm.seq')
      .execute();
  }

  /** A deleted tag stops carrying resources and stops sharing them through ACLs. */
  async dropTag(tx: Tx, tag: string): Promise<void> {
    await tx.deleteFrom('tag_members').where('tag_uuid', '=', tag).execute();
    await tx.deleteFrom('acl_tags').where('tag_uuid', '=', tag).execute();
  }

  /**
   * Condition: the row at `uuidColumn` (of kind `kind`, or any kind when null) carries one of `owner`'s
   * tags whose uuid (or name) is among `values`.
   */
  carriesOwnTag(eb: AnyExpressions, opts: { kind: string | null; owner: string; by: 'uuid' | 'name'; values: string[]; uuidColumn: string }) {
    let q = eb
      .selectFrom('tag_members as ctm')
      .innerJoin('resources as ct', (j) => j.onRef('ct.uuid', '=', 'ctm.tag_uuid').on('ct.kind', '=', 'tags'))
      .select(sql.lit(1).as('one'))
      .whereRef('ctm.res_uuid', '=', opts.uuidColumn)
      .where('ct.owner_uuid', '=', opts.owner)
      .where(opts.by === 'uuid' ? 'ct.uuid' : 'ct.name', 'in', opts.values);
    if (opts.kind !== null) q = q.where('ctm.res_type', '=', opts.kind);
    return eb.exists(q);
  }

  // ---- query pieces for list machinery (visibility, filters, paging) ----

  /**
   * The rows of a kind a user may see: their own, plus rows whose uuids `shared` selects (ACL grants,
   * the library, DHCP leases). A UNION of the halves rather than `owner = me OR uuid IN (…)`: with OR
   * both engines scan every row of the kind; with the union each half is an index lookup bounded by
   * what the caller can see.
   */
  visible(db: Db | Tx, kind: string, owner: string, shared?: AnyQuery): VisibleQuery {
    const q = db.selectFrom('resources').where('resources.kind', '=', kind);
    if (!shared) return q.where('resources.owner_uuid', '=', owner);
    return q.where('resources.uuid', 'in', this.ownedUuids(db, kind, owner).union(shared));
  }

  /** One visible row by uuid. */
  async findVisible(q: VisibleQuery, uuid: string): Promise<Resource | undefined> {
    const row = (await q
      .select([...COLUMNS])
      .where('resources.uuid', '=', uuid)
      .executeTakeFirst()) as Row | undefined;
    return row && toResource(row);
  }

  /**
   * A page of a visible set, in creation order (or most recently changed first), and its total. A short,
   * non-empty page (or a short first page) ends the result: its end is the total, no count query.
   */
  async listPage(q: VisibleQuery, p: { order: 'created' | 'recent'; limit: number; offset: number }): Promise<{ rows: Resource[]; total: number }> {
    const columns = q.select([...COLUMNS]);
    const ordered = p.order === 'recent' ? columns.orderBy('resources.updated_at', 'desc').orderBy('resources.seq', 'desc') : columns.orderBy('resources.seq');
    const rows = ((await this.page(ordered, p.limit, p.offset).execute()) as Row[]).map(toResource);
    const short = (p.offset === 0 || rows.length > 0) && (p.limit === 0 || rows.length < p.limit);
    const total = short ? p.offset + rows.length : Number((await q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    return { rows, total };
  }

  /** The case-insensitive LIKE operator of this engine. */
  get ilike(): 'ilike' | 'like' {
    return this.dialect === 'postgres' ? 'ilike' : 'like';
  }

  /**
   * `column LIKE pattern` where `%`, `_` and `\` in `literal` match themselves: SQLite has no default
   * escape character, so the ESCAPE clause is spelled out for both engines.
   */
  like(column: string, literal: string, opts: { prefix?: boolean; contains?: boolean; caseInsensitive?: boolean } = {}) {
    const escaped = literal.replace(/[\\%_]/g, (c) => `\\${c}`);
    const pattern = opts.contains ? `%${escaped}%` : opts.prefix ? `${escaped}%` : escaped;
    const op = sql.raw(opts.caseInsensitive ? this.ilike : 'like');
    return sql<boolean>`${sql.ref(column)} ${op} ${pattern} escape '\\'`;
  }

  /** A string field of the JSON body, in the engine's own JSON functions. */
  bodyText(key: string, column = 'resources.body'): RawBuilder<string> {
    return this.dialect === 'postgres'
      ? sql<string>`(${sql.ref(column)}::jsonb ->> ${sql.lit(key)})`
      : sql<string>`json_extract(${sql.ref(column)}, ${sql.lit(`$.${key}`)})`;
  }

  /** The body's list field `key` contains one of `values`. */
  bodyListHasAny(key: string, values: string[], column = 'resources.body'): RawBuilder<boolean> {
    return this.dialect === 'postgres'
      ? sql<boolean>`exists (select 1 from jsonb_array_elements_text(${sql.ref(column)}::jsonb -> ${sql.lit(key)}) as c(value) where c.value in (${sql.join(values)}))`
      : sql<boolean>`exists (select 1 from json_each(${sql.ref(column)}, ${sql.lit(`$.${key}`)}) as c where c.value in (${sql.join(values)}))`;
  }

  /** LIMIT/OFFSET with the API's meaning (limit 0 = all), see paging.ts. */
  page<Q extends { limit(n: number): Q; offset(n: number): Q }>(q: Q, limit: number, offset: number): Q {
    return page(q, limit, offset, this.dialect);
  }
}

/** A filtered set of `resources` rows, not yet selected or paged. */
export type VisibleQuery = SelectQueryBuilder<Database, 'resources', object>;
