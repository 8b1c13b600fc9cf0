import {
  sql,
  type CompiledQuery,
  type Compilable,
  type Expression,
  type ExpressionBuilder,
  type RawBuilder,
  type SelectQueryBuilder,
  type SqlBool,
} from 'kysely';
import type { Database } from './schema.js';
import type { Db, Dialect, Tx } from './db.js';
import type { ChangeFeed } from './changes.js';
import { page } from './paging.js';
import { argsOf, Shapes, type ArgOf } from './shapes.js';

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
  /** Parsed on first use (a presented object cached for this version never needs it). */
  body: Obj;
  version: number;
  created_at: string;
  updated_at: string;
  /** The relations a read brought along with the row (see `Relations`), when it asked for any. */
  related?: Related;
}

/**
 * Which relations of its rows a read brings along, each as a JSON column of the same statement: one
 * statement is one snapshot and, on PostgreSQL, one round trip.
 */
export interface Relations {
  /** The caller's tags on each row (another user's tags on it are never read). */
  tags?: boolean;
  /** The ACL grants on the rows the caller owns (their `grantees`), the permissions the caller holds on the others. */
  sharing?: boolean;
  /** A tag's members with their owners. */
  members?: boolean;
}

/** A row's relations as read with it; those not asked for are empty. */
export interface Related {
  /** Tag uuids, in tagging order. */
  tags: string[];
  /** Repeats allowed: one per ACL and tag that gives the grant. Only on rows the caller owns. */
  grants: { grantee_uuid: string; email: string | null; permission: string }[];
  /** Permissions the caller's grants give (repeats allowed). Only on rows the caller does not own. */
  held: string[];
  /** In tagging order. */
  members: { res_type: string; res_uuid: string; owner_uuid: string | null }[];
}

/** A key naming which relations a shape reads (part of its shape key). */
const relKey = (rel: Relations): string => (rel.tags ? 't' : '') + (rel.sharing ? 's' : '') + (rel.members ? 'm' : '') || 'none';

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

type Row = { seq: number; kind: string; uuid: string; owner_uuid: string | null; body: string; version: number; created_at: string; updated_at: string };
const COLUMNS = ['seq', 'kind', 'uuid', 'owner_uuid', 'body', 'version', 'created_at', 'updated_at'] as const;
/** A row with the JSON columns of its relations (those a shape reads). */
type RelRow = Row & { rel_tags?: string; rel_grants?: string; rel_held?: string; rel_members?: string };

/** The relations of a row read with `relationColumns`. */
function relatedOf(r: RelRow): Related {
  const list = (text: string | undefined): unknown[] => (text ? (JSON.parse(text) as unknown[]) : []);
  return {
    tags: list(r.rel_tags) as string[],
    grants: (list(r.rel_grants) as [string, string | null, string][]).map(([grantee_uuid, email, permission]) => ({ grantee_uuid, email, permission })),
    held: list(r.rel_held) as string[],
    members: (list(r.rel_members) as [string, string, string | null][]).map(([res_type, res_uuid, owner_uuid]) => ({ res_type, res_uuid, owner_uuid })),
  };
}

/** A row read with relation columns, as data with its relations. */
const withRelated = (r: RelRow): Resource => Object.assign(toResource(r), { related: relatedOf(r) });

/** A row as data; the body is parsed when first read. */
function toResource(r: Row): Resource {
  const text = r.body;
  let parsed: Obj | undefined;
  return {
    seq: r.seq,
    kind: r.kind,
    uuid: r.uuid,
    owner_uuid: r.owner_uuid,
    version: Number(r.version),
    created_at: r.created_at,
    updated_at: r.updated_at,
    get body(): Obj {
      return (parsed ??= JSON.parse(text) as Obj);
    },
    set body(value: Obj) {
      parsed = value;
    },
  };
}

/** The indexed mirrors of a body: `name` and `status` (jobs keep theirs as `state`). */
function mirrors(body: Obj): { name: string | null; status: string | null } {
  const status = typeof body.status === 'string' ? body.status : typeof body.state === 'string' ? body.state : null;
  return { name: typeof body.name === 'string' ? body.name : null, status };
}

/** The API's timestamp form (microseconds, `+00:00`), as every other stored time. */
const stamp = (now: Date) => now.toISOString().replace(/\.(\d{3})Z$/, '.$1000+00:00');

export class ResourceRepository {
  private readonly shapes = new Shapes();
  /** Per open transaction: the change of each (kind, owner) count, written just before commit (flushCounts). */
  private readonly countChanges = new WeakMap<Tx, Map<string, number>>();

  /**
   * `direct` runs a statement on SQLite's one connection synchronously. A transaction holds that
   * connection until it ends, so inside one a compiled shape can skip Kysely's executor (its connection
   * hand-off and promises cost more than the statement) with the same result. Outside one (`outside`), it
   * runs only a read, and only while no transaction is open on the connection (else it answers undefined):
   * a read that runs to its end synchronously, between transactions, sees what is committed, as through
   * Kysely.
   */
  constructor(
    readonly dialect: Dialect,
    private readonly direct?: (text: string, parameters: readonly unknown[], outside?: boolean) => unknown[] | undefined,
    /** Positions between anchors (see `ownWindow`); small in tests, so deep pages are exercised on small lists. */
    private readonly anchorStep = 1000,
    /** Where inserts, writes and deletes of users' objects are noted for the live event stream. */
    private readonly changes?: ChangeFeed,
  ) {}

  /** A user's object changed in this transaction (nothing happens unless the change feed is on). */
  private changed(tx: Tx, kind: string, uuid: string, owner: string | null | undefined): void {
    if (owner && this.changes?.enabled) this.changes.note(tx, { owner, kind, uuid });
  }

  /** Per (kind, owner): the seq at every `anchorStep`-th position of the owner's list, for one count version. */
  private readonly anchors = new Map<string, { version: number; seqs: Promise<number[]> }>();

  /**
   * `count` seqs of the owner's rows of a kind from position `from`, in creation order. OFFSET walks the
   * index one entry at a time, so a deep page would cost its depth; the walk starts instead from the
   * nearest anchor (the seq at a multiple of `anchorStep`), so it is never longer than one step. Anchors
   * are picked by the database in one pass over the owner's index (only they are sent: 100 seqs for 100k
   * rows, where every seq sent was 100k rows held by the driver) and kept until the owner's count changes
   * (its version). Concurrent requests for a page share one pass: the same count version is the same rows,
   * whatever the snapshot.
   */
  private async ownWindow(db: Db | Tx, kind: string, owner: string, version: number, from: number, count: number): Promise<number[]> {
    const key = `${kind}/${owner}`;
    let anchors = this.anchors.get(key);
    if (anchors?.version !== version) {
      const seqs = this.shaped<{ seq: number }, 'kind' | 'owner' | 'step'>(
        db,
        'own.anchors',
        (arg) =>
          db
            .selectFrom((eb) =>
              eb
                .selectFrom('resources')
                .select(['seq', sql<number>`row_number() over (order by seq)`.as('rn')])
                .where('kind', '=', arg('kind'))
                .where('owner_uuid', '=', arg('owner'))
                .as('a'),
            )
            .select('a.seq')
            .where(sql<SqlBool>`(a.rn - 1) % ${arg('step')} = 0`)
            .orderBy('a.seq'),
        { kind, owner, step: this.anchorStep },
      ).then((rows) => rows.map((r) => Number(r.seq)));
      anchors = { version, seqs };
      this.anchors.delete(key);
      if (this.anchors.size >= 1000) this.anchors.delete(this.anchors.keys().next().value!);
      this.anchors.set(key, anchors);
      // A failed pass is not kept (the next request tries again); its own request still sees the error.
      const entry = anchors;
      seqs.catch(() => this.anchors.get(key) === entry && this.anchors.delete(key));
    }
    const seqs = await anchors.seqs;
    const a = Math.floor(from / this.anchorStep);
    if (a >= seqs.length || count <= 0) return [];
    const rows = await this.shaped<{ seq: number }, 'kind' | 'owner' | 'from' | 'count' | 'skip'>(
      db,
      'own.window',
      (arg) =>
        db
          .selectFrom('resources')
          .select('seq')
          .where('kind', '=', arg('kind'))
          .where('owner_uuid', '=', arg('owner'))
          .where('seq', '>=', arg('from'))
          .orderBy('seq')
          .limit(arg('count'))
          .offset(arg('skip')),
      { kind, owner, from: seqs[a], count, skip: from - a * this.anchorStep },
    );
    return rows.map((r) => Number(r.seq));
  }

  /**
   * A deep page of an unfiltered list in creation order: own rows found from the anchors, merged in memory
   * with the shared rows (all of them are in hand, and they are bounded by what is shared), then read by seq
   * with their relations. The own window starts where the page can start at the earliest (every shared row
   * before it) and ends where it can end at the latest, so it is at most (shared rows + limit) long.
   * Several statements: the caller runs it in one snapshot.
   */
  private async deepPage(
    set: VisibleSet,
    shared: readonly number[],
    offset: number,
    limit: number,
    rel: Relations,
  ): Promise<{ rows: Resource[]; total: number }> {
    const db = set.db;
    const count = await this.countRow(db, set.kind, set.owner);
    const theirs = [...shared].sort((a, b) => a - b);
    const total = count.n + theirs.length;
    const start = Math.min(Math.max(0, offset - theirs.length), Math.max(0, count.n - 1));
    const own = await this.ownWindow(db, set.kind, set.owner, count.version, start, Math.min(count.n, offset + limit) - start);
    // Shared rows before the window sit at positions below `offset` (the window starts early enough), except
    // when the window starts at the very beginning: then every shared row takes part in the merge.
    let j = own.length && start > 0 ? lowerBound(theirs, own[0]) : 0;
    let pos = start + j;
    const page: number[] = [];
    for (let i = 0; page.length < limit && (i < own.length || j < theirs.length); pos++) {
      const next = i < own.length && (j >= theirs.length || own[i] < theirs[j]) ? own[i++] : theirs[j++];
      if (pos >= offset) page.push(next);
    }
    if (!page.length) return { rows: [], total };
    const rows = await this.shaped<RelRow, 'seqs' | 'me'>(
      db,
      `resources.by-seq:${relKey(rel)}`,
      (arg) =>
        db
          .selectFrom('resources')
          .select([...COLUMNS, ...this.relationColumns(rel, arg('me'))])
          .where(this.inList('seq', arg('seqs')))
          .orderBy('seq'),
      { seqs: this.listArg(page), me: set.owner },
    );
    return { rows: rows.map((r) => withRelated(r)), total };
  }

  /** Runs a compiled shape: directly on SQLite when it may (see `direct`), through Kysely otherwise. */
  private async exec<R>(db: Db | Tx, compiled: CompiledQuery): Promise<R[]> {
    const rows = this.direct?.(compiled.sql, compiled.parameters, !db.isTransaction);
    if (rows) return rows as R[];
    return (await db.executeQuery<R>(compiled)).rows;
  }

  private changeCount(tx: Tx, kind: string, owner: string | null, by: number): void {
    let m = this.countChanges.get(tx);
    if (!m) this.countChanges.set(tx, (m = new Map()));
    const key = `${kind}\n${owner ?? ''}`;
    m.set(key, (m.get(key) ?? 0) + by);
  }

  /**
   * Writes the transaction's count changes, last thing before it commits (Store.transaction calls this).
   * Late and in one sorted order: on PostgreSQL a count row stays locked until commit, and every
   * transaction taking them in the same order, after all its other locks, can never deadlock on them.
   */
  async flushCounts(tx: Tx): Promise<void> {
    const m = this.countChanges.get(tx);
    if (!m) return;
    this.countChanges.delete(tx);
    for (const key of [...m.keys()].sort()) {
      const by = m.get(key)!;
      if (by === 0) continue;
      const [kind, owner] = key.split('\n');
      await this.exec(
        tx,
        this.shapes.get(
          'counts.add',
          (arg: ArgOf<'kind' | 'owner' | 'by'>) =>
            tx
              .insertInto('resource_counts')
              .values({ kind: arg('kind'), owner_uuid: arg('owner'), n: arg('by') })
              .onConflict((oc) =>
                oc
                  .columns(['kind', 'owner_uuid'])
                  .doUpdateSet((eb) => ({ n: eb('resource_counts.n', '+', eb.ref('excluded.n')), version: eb('resource_counts.version', '+', 1) })),
              ),
          { kind, owner, by },
        ),
      );
    }
  }

  /**
   * How many objects of a kind an owner will have when this transaction commits, with no other
   * transaction able to change that until then (a limit is checked on it). On PostgreSQL an advisory
   * lock per (kind, owner), held to commit, makes the checkers take turns; SQLite runs one transaction at
   * a time. Take it before any row lock the check needs, in one order (see StoredHooks.beforeCreate).
   */
  async countForLimit(tx: Tx, kind: string, owner: string): Promise<number> {
    if (this.dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext(${`count/${kind}/${owner}`}))`.execute(tx);
    const pending = this.countChanges.get(tx)?.get(`${kind}\n${owner}`) ?? 0;
    return (await this.countOf(tx, kind, owner)) + pending;
  }

  /** How many objects of a kind an owner has (null: the ownerless library). */
  async countOf(db: Db | Tx, kind: string, owner: string | null): Promise<number> {
    return (await this.countRow(db, kind, owner)).n;
  }

  /** The kept count and its version (raised with every insert or delete of the kind by the owner). */
  private async countRow(db: Db | Tx, kind: string, owner: string | null): Promise<{ n: number; version: number }> {
    const rows = await this.exec<{ n: number; version: number }>(
      db,
      this.shapes.get(
        'counts.get',
        (arg: ArgOf<'kind' | 'owner'>) =>
          db.selectFrom('resource_counts').select(['n', 'version']).where('kind', '=', arg('kind')).where('owner_uuid', '=', arg('owner')),
        { kind, owner: owner ?? '' },
      ),
    );
    return { n: Number(rows[0]?.n ?? 0), version: Number(rows[0]?.version ?? 0) };
  }

  private select(db: Db | Tx, kind: string | readonly string[]) {
    const q = db.selectFrom('resources').select([...COLUMNS]);
    return typeof kind === 'string' ? q.where('kind', '=', kind) : q.where('kind', 'in', [...kind]);
  }

  /** One row (of one of `kind`s), unlocked. */
  async get(db: Db | Tx, kind: string | readonly string[], uuid: string): Promise<Resource | undefined> {
    if (typeof kind !== 'string') {
      const row = (await this.select(db, kind).where('uuid', '=', uuid).executeTakeFirst()) as Row | undefined;
      return row && toResource(row);
    }
    const rows = await this.exec<Row>(
      db,
      this.shapes.get('resources.get', (arg: ArgOf<'kind' | 'uuid'>) => this.select(db, arg('kind')).where('uuid', '=', arg('uuid')), { kind, uuid }),
    );
    return rows[0] && toResource(rows[0]);
  }

  /** Rows by uuid, in the order asked (missing ones left out). */
  async getMany(db: Db | Tx, kind: string | readonly string[], uuids: readonly string[]): Promise<Resource[]> {
    if (!uuids.length) return [];
    const rows =
      typeof kind === 'string'
        ? await this.shaped<Row, 'kind' | 'uuids'>(db, 'resources.many', (arg) => this.select(db, arg('kind')).where(this.inList('uuid', arg('uuids'))), {
            kind,
            uuids: this.listArg(uuids),
          })
        : ((await this.select(db, kind)
            .where('uuid', 'in', [...uuids])
            .execute()) as Row[]);
    const order = new Map(uuids.map((u, i) => [u, i]));
    return rows.map(toResource).sort((a, b) => order.get(a.uuid)! - order.get(b.uuid)!);
  }

  /** One row, locked until the transaction ends (the read a decision is made on). */
  async lock(tx: Tx, kind: string | readonly string[], uuid: string): Promise<Resource | undefined> {
    const build = (k: unknown, u: unknown) => {
      const q = this.select(tx, k as string).where('uuid', '=', u as string);
      return this.dialect === 'postgres' ? q.forUpdate() : q;
    };
    if (typeof kind !== 'string') {
      const row = (await build(kind, uuid).executeTakeFirst()) as Row | undefined;
      return row && toResource(row);
    }
    const rows = await this.exec<Row>(
      tx,
      this.shapes.get('resources.lock', (arg: ArgOf<'kind' | 'uuid'>) => build(arg('kind'), arg('uuid')), { kind, uuid }),
    );
    return rows[0] && toResource(rows[0]);
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
    const values = this.values(now, r);
    await this.shaped(tx, 'resources.insert', (arg: ArgOf<keyof typeof values>) => tx.insertInto('resources').values(argsOf(values, arg)), values);
    this.changeCount(tx, r.kind, r.owner, 1);
    this.changed(tx, r.kind, r.uuid, r.owner);
  }

  /** Many rows in few statements (seeding, the bench's large accounts); `chunk` rows per INSERT. */
  async insertMany(tx: Tx, now: Date, rows: readonly { kind: string; uuid: string; owner: string | null; body: Obj }[], chunk = 500): Promise<void> {
    for (let i = 0; i < rows.length; i += chunk)
      await tx
        .insertInto('resources')
        .values(rows.slice(i, i + chunk).map((r) => this.values(now, r)))
        .execute();
    for (const r of rows) {
      this.changeCount(tx, r.kind, r.owner, 1);
      this.changed(tx, r.kind, r.uuid, r.owner);
    }
  }

  /** Insert unless a row of that kind and uuid exists (also one a concurrent transaction is inserting). */
  async insertIfAbsent(tx: Tx, now: Date, r: { kind: string; uuid: string; owner: string | null; body: Obj }): Promise<boolean> {
    const res = await tx
      .insertInto('resources')
      .values(this.values(now, r))
      .onConflict((oc) => oc.columns(['uuid', 'kind']).doNothing())
      .executeTakeFirst();
    const inserted = Number(res.numInsertedOrUpdatedRows ?? 0) > 0;
    if (inserted) {
      this.changeCount(tx, r.kind, r.owner, 1);
      this.changed(tx, r.kind, r.uuid, r.owner);
    }
    return inserted;
  }

  private values(now: Date, r: { kind: string; uuid: string; owner: string | null; body: Obj }) {
    const t = stamp(now);
    return { kind: r.kind, uuid: r.uuid, owner_uuid: r.owner, ...mirrors(r.body), body: JSON.stringify(r.body), created_at: t, updated_at: t };
  }

  /** Replace the body of a row read through `lock()` in this transaction. */
  async write(tx: Tx, now: Date, row: Pick<Resource, 'seq'> & Partial<Pick<Resource, 'kind' | 'uuid' | 'owner_uuid'>>, body: Obj): Promise<void> {
    if (row.kind && row.uuid) this.changed(tx, row.kind, row.uuid, row.owner_uuid);
    const values = { body: JSON.stringify(body), ...mirrors(body), updated_at: stamp(now) };
    await this.shaped(
      tx,
      'resources.write',
      (arg: ArgOf<keyof typeof values | 'seq'>) =>
        tx
          .updateTable('resources')
          .set({ ...argsOf(values, arg), version: sql<number>`version + 1` })
          .where('seq', '=', arg('seq')),
      { ...values, seq: row.seq },
    );
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
    for (const gone of await q.returning(['owner_uuid', 'uuid']).execute()) {
      this.changeCount(tx, kind, gone.owner_uuid, -1);
      this.changed(tx, kind, gone.uuid, gone.owner_uuid);
    }
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
    if (typeof kinds === 'string' && owner === undefined) {
      const rows = await this.shaped<Row, 'kind' | 'uuids'>(
        db,
        'resources.existing',
        (arg) => this.select(db, arg('kind')).where(this.inList('uuid', arg('uuids'))),
        {
          kind: kinds,
          uuids: this.listArg(uuids),
        },
      );
      return new Map(rows.map((r) => [r.uuid, toResource(r)]));
    }
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

  /**
   * Every owned row of a kind, of every account or one (`owner`), optionally only in some states (the
   * indexed status column): what billing meters read at a poll, set-wise across accounts.
   */
  async owned(db: Db | Tx, kind: string, opts: { owner?: string; statuses?: readonly string[] } = {}): Promise<Resource[]> {
    let q = this.select(db, kind);
    q = opts.owner !== undefined ? q.where('owner_uuid', '=', opts.owner) : q.where('owner_uuid', 'is not', null);
    if (opts.statuses) q = q.where('status', 'in', [...opts.statuses]);
    return ((await q.orderBy('seq').execute()) as Row[]).map(toResource);
  }

  /**
   * `owned` without the bodies: each owned row's uuid, owner and creation time, and only the body fields
   * named in `fields` (strings as read, numbers as numbers or text, a list as its JSON text; null when
   * absent), in creation order; `bodyIn` keeps only rows whose body field is one of some values. What a
   * billing poll reads of every account's objects: whole bodies, kept as text and parsed, cost the server
   * process hundreds of MiB in a cloud of 100k objects. Read `chunk` rows per statement (by seq) and handed
   * on one by one, so no more than one chunk's rows are held here; each owner's uuid is one string for all
   * its rows.
   */
  async *ownedFields<F extends string>(
    db: Db | Tx,
    kind: string,
    fields: readonly F[],
    opts: { owner?: string; bodyIn?: { key: string; values: readonly string[] }; chunk?: number } = {},
  ): AsyncGenerator<{ uuid: string; owner_uuid: string; created_at: string; fields: Record<F, unknown> }> {
    const chunk = opts.chunk ?? 5000;
    const owners = new Map<string, string>();
    for (let after = 0; ;) {
      let q = db
        .selectFrom('resources')
        .select(['seq', 'uuid', 'owner_uuid', 'created_at', ...fields.map((f, i) => this.bodyText(f).as(`f${i}`))])
        .where('kind', '=', kind)
        .where('seq', '>', after);
      q = opts.owner !== undefined ? q.where('owner_uuid', '=', opts.owner) : q.where('owner_uuid', 'is not', null);
      if (opts.bodyIn) q = q.where(sql<SqlBool>`${this.bodyText(opts.bodyIn.key)} in (${sql.join([...opts.bodyIn.values])})`);
      let rows: ({ seq: number; uuid: string; owner_uuid: string; created_at: string } & Record<string, unknown>)[];
      // In a PostgreSQL transaction a failed statement aborts it: a savepoint keeps the fallback possible.
      const savepoint = this.dialect === 'postgres' && db.isTransaction;
      try {
        if (savepoint) await sql`savepoint owned_fields`.execute(db);
        rows = (await q.orderBy('seq').limit(chunk).execute()) as unknown as typeof rows;
        if (savepoint) await sql`release savepoint owned_fields`.execute(db);
      } catch (err) {
        if (savepoint) await sql`rollback to savepoint owned_fields`.execute(db);
        // PostgreSQL's json parser refuses a lone UTF-16 surrogate escape (`\udc00`), which JSON.stringify
        // writes for such a string and JSON.parse reads back: this chunk is read whole and picked apart here.
        if ((err as { code?: string }).code !== '22P02') throw err;
        const parsed = await this.ownedFieldsParsed(db, kind, fields, opts, after, chunk);
        yield* parsed.rows;
        if (!parsed.next) return;
        after = parsed.next;
        continue;
      }
      for (const r of rows) {
        let owner = owners.get(r.owner_uuid);
        if (owner === undefined) owners.set(r.owner_uuid, (owner = r.owner_uuid));
        const values = {} as Record<F, unknown>;
        fields.forEach((f, i) => (values[f] = r[`f${i}`] ?? null));
        yield { uuid: r.uuid, owner_uuid: owner, created_at: r.created_at, fields: values };
      }
      if (rows.length < chunk) return;
      after = Number(rows[rows.length - 1].seq);
    }
  }

  /**
   * One chunk of ownedFields with the bodies parsed here (what a chunk whose bodies PostgreSQL cannot parse
   * falls back to): the rows that match, and the seq to continue after (undefined: the last chunk).
   */
  private async ownedFieldsParsed<F extends string>(
    db: Db | Tx,
    kind: string,
    fields: readonly F[],
    opts: { owner?: string; bodyIn?: { key: string; values: readonly string[] } },
    after: number,
    chunk: number,
  ): Promise<{ rows: { uuid: string; owner_uuid: string; created_at: string; fields: Record<F, unknown> }[]; next?: number }> {
    let q = db.selectFrom('resources').select(['seq', 'uuid', 'owner_uuid', 'created_at', 'body']).where('kind', '=', kind).where('seq', '>', after);
    q = opts.owner !== undefined ? q.where('owner_uuid', '=', opts.owner) : q.where('owner_uuid', 'is not', null);
    const raw = await q.orderBy('seq').limit(chunk).execute();
    const rows = [];
    for (const r of raw) {
      const body = JSON.parse(r.body) as Record<string, unknown>;
      if (opts.bodyIn && !opts.bodyIn.values.includes(String(body[opts.bodyIn.key] ?? ''))) continue;
      const values = {} as Record<F, unknown>;
      // As `->>` gives them: text, objects and lists as their JSON.
      for (const f of fields) {
        const v = body[f];
        values[f] = v === undefined || v === null ? null : typeof v === 'object' ? JSON.stringify(v) : String(v);
      }
      rows.push({ uuid: r.uuid, owner_uuid: r.owner_uuid!, created_at: r.created_at, fields: values });
    }
    return { rows, next: raw.length < chunk ? undefined : Number(raw[raw.length - 1].seq) };
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
   * The rows of a kind a user may see: their own, plus rows whose uuids `shared(me)` selects (ACL grants,
   * the library, DHCP leases). Filters add conditions with `where`; `listPage` and `findVisibleWith`
   * turn it into SQL.
   */
  visible(db: Db | Tx, kind: string, owner: string, shared?: SharedRows): VisibleSet {
    return { db, kind, owner, shared, where: [] };
  }

  /** The caller's own rows of the set (seq and the order columns), filtered, not yet ordered. */
  private ownHalf(set: VisibleSet, arg: ArgOf<'kind' | 'me'>) {
    return this.half(set, arg).where('resources.owner_uuid', '=', arg('me'));
  }

  /** Seq and order column of the set's rows of its kind with its filters; each half adds whose rows. */
  private half(set: VisibleSet, arg: ArgOf<'kind' | 'me'>) {
    return this.withWhere(
      set.db.selectFrom('resources').select(['resources.seq', 'resources.updated_at']).where('resources.kind', '=', arg('kind')),
      set.where,
    );
  }

  /** Other users' rows the set shares with the caller, filtered, not yet ordered. */
  private theirHalf(set: VisibleSet, arg: ArgOf<'kind' | 'me'>) {
    return this.half(set, arg)
      .where('resources.uuid', 'in', set.shared!(arg('me')))
      .where((eb) => eb.or([eb('resources.owner_uuid', '!=', arg('me')), eb('resources.owner_uuid', 'is', null)]));
  }

  private sorted<Q extends AnyQuery>(q: Q, order: Order, prefix: string): Q {
    return ORDER_BY[order].reduce((acc, [col, dir]) => acc.orderBy(`${prefix}${col}`, dir) as Q, q);
  }

  /** LIMIT/OFFSET from arguments; which of them a shape has is part of the shape. */
  private paged<Q extends AnyQuery, K extends string>(q: Q, arg: ArgOf<K>, limitArg: K | undefined, offsetArg: K | undefined): Q {
    let out = q;
    if (limitArg) out = out.limit(arg(limitArg)) as Q;
    else if (offsetArg && this.dialect === 'sqlite') out = out.limit(-1) as Q;
    if (offsetArg) out = out.offset(arg(offsetArg)) as Q;
    return out;
  }

  private withWhere<Q extends AnyQuery>(q: Q, where: readonly Condition[]): Q {
    return where.reduce((acc, c) => acc.where(c) as Q, q);
  }

  /** The shape key of a visible set's query, or undefined when filters make it one of a kind. */
  private shapeKey(purpose: string, set: VisibleSet, ...flags: (string | boolean)[]): string | undefined {
    if (set.where.length) return undefined;
    return [purpose, set.kind, set.shared?.key ?? 'own', ...flags.map(String)].join(':');
  }

  /** Runs a visible-set query: compiled once when the set has no filters, built afresh otherwise. */
  private async run<R, K extends string>(key: string | undefined, db: Db | Tx, build: (arg: ArgOf<K>) => AnyQuery, args: Record<K, unknown>): Promise<R[]> {
    if (key) return this.exec<R>(db, this.shapes.get(key, build, args));
    return (await build(((name: K) => args[name]) as ArgOf<K>).execute()) as R[];
  }

  /**
   * Runs the query shape `key` (compiled on first use, see shapes.ts) with `args`. For the few request-path
   * queries outside this module (ACL evaluation); a list of values goes in as one argument through
   * `inList` and `listArg`, so its length does not change the shape.
   */
  async shaped<R, K extends string>(db: Db | Tx, key: string, build: (arg: ArgOf<K>) => Compilable, args: Record<K, unknown>): Promise<R[]> {
    return this.exec<R>(db, this.shapes.get(key, build, args));
  }

  /** `column IN (the list argument)`, as one parameter whatever the list's length. */
  inList(column: string, arg: unknown): RawBuilder<SqlBool> {
    return this.dialect === 'postgres'
      ? sql<SqlBool>`${sql.ref(column)} = any(${arg})`
      : sql<SqlBool>`${sql.ref(column)} in (select value from json_each(${arg}))`;
  }

  /** A list as the one parameter `inList` takes: an array for PostgreSQL, JSON text for SQLite's json_each. */
  listArg(values: readonly unknown[]): unknown {
    return this.dialect === 'postgres' ? [...values] : JSON.stringify(values);
  }

  /**
   * One visible row by uuid with the relations `rel` asks for, in one statement (a statement is its own
   * snapshot: no transaction, and on PostgreSQL one round trip).
   */
  async findVisibleWith(set: VisibleSet, uuid: string, rel: Relations): Promise<Resource | undefined> {
    const db = set.db;
    const rows = await this.run<RelRow, 'kind' | 'me' | 'uuid'>(
      this.shapeKey('visible.one-with', set, relKey(rel)),
      db,
      (arg) => {
        const me = arg('me');
        return this.withWhere(
          db
            .selectFrom('resources')
            .select([...COLUMNS, ...this.relationColumns(rel, me)])
            .where('resources.kind', '=', arg('kind'))
            .where('resources.uuid', '=', arg('uuid'))
            .where((eb) =>
              set.shared ? eb.or([eb('resources.owner_uuid', '=', me), eb('resources.uuid', 'in', set.shared(me))]) : eb('resources.owner_uuid', '=', me),
            ),
          set.where,
        );
      },
      { kind: set.kind, me: set.owner, uuid },
    );
    return rows[0] && withRelated(rows[0]);
  }

  /**
   * Rows of a kind by uuid (any owner), in the order asked (missing ones left out), with the relations `rel`
   * asks for as `me` sees them: one statement.
   */
  async findManyWith(db: Db | Tx, kind: string, uuids: readonly string[], me: string, rel: Relations): Promise<Resource[]> {
    if (!uuids.length) return [];
    const rows = await this.shaped<RelRow, 'kind' | 'uuids' | 'me'>(
      db,
      `resources.many-with:${relKey(rel)}`,
      (arg) =>
        db
          .selectFrom('resources')
          .select([...COLUMNS, ...this.relationColumns(rel, arg('me'))])
          .where('resources.kind', '=', arg('kind'))
          .where(this.inList('resources.uuid', arg('uuids'))),
      { kind, uuids: this.listArg(uuids), me },
    );
    const order = new Map(uuids.map((u, i) => [u, i]));
    return rows.map((r) => withRelated(r)).sort((a, b) => order.get(a.uuid)! - order.get(b.uuid)!);
  }

  /**
   * The JSON columns of the relations `rel` asks for, on rows of `resources` (the outer query's table, not
   * aliased) as the caller `me` sees them. Each is a subquery per row, run only for the rows the statement
   * returns, and each is a walk down indexes from that row, whatever the plan's estimates.
   */
  private relationColumns(rel: Relations, me: unknown) {
    const pg = this.dialect === 'postgres';
    const array = pg ? sql`json_build_array` : sql`json_array`;
    const cols = [];
    if (rel.tags) {
      const tags = sql`select tm.tag_uuid as v, tm.seq as s from tag_members as tm inner join resources as t on t.uuid = tm.tag_uuid and t.kind = 'tags' where t.owner_uuid = ${me} and tm.res_type = resources.kind and tm.res_uuid = resources.uuid`;
      cols.push(this.jsonList(tags).as('rel_tags'));
    }
    if (rel.sharing) {
      // In no particular order: granteeEntries and heldPermissions fold repeats and sort.
      const grants = sql`select ${array}(g.grantee_uuid, u.email, r.permission) as v from tag_members as tm inner join acl_tags as t on t.tag_uuid = tm.tag_uuid inner join acl_grantees as g on g.acl_uuid = t.acl_uuid inner join acl_rules as r on r.acl_uuid = t.acl_uuid inner join users as u on u.uuid = g.grantee_uuid where tm.res_type = resources.kind and tm.res_uuid = resources.uuid`;
      // CROSS JOINs in this order: SQLite starts from the caller's grants, as grantedUuids does.
      const held = sql`select r.permission as v from acl_grantees as g cross join acl_rules as r cross join acl_tags as t cross join tag_members as tm where g.grantee_uuid = ${me} and r.acl_uuid = g.acl_uuid and t.acl_uuid = g.acl_uuid and tm.tag_uuid = t.tag_uuid and tm.res_type = resources.kind and tm.res_uuid = resources.uuid`;
      // Grants show to the owner only, held permissions to everyone else: each is read only where it shows.
      cols.push(
        sql<string>`case when resources.owner_uuid = ${me} then ${this.jsonList(grants, { json: true, ordered: false })} else '[]' end`.as('rel_grants'),
      );
      cols.push(sql<string>`case when resources.owner_uuid = ${me} then '[]' else ${this.jsonList(held, { ordered: false })} end`.as('rel_held'));
    }
    if (rel.members) {
      // PostgreSQL plans a compiled shape once, for any tag: it guesses hundreds of members per tag and would
      // rather hash them against a scan of every resource. The LATERAL lookup (OFFSET 0 keeps it a subquery)
      // finds each member's row by its index instead. SQLite joins by the index anyway.
      const members = pg
        ? sql`select json_build_array(tm.res_type, tm.res_uuid, o.owner_uuid) as v, tm.seq as s from tag_members as tm cross join lateral (select r.owner_uuid from resources as r where r.uuid = tm.res_uuid and r.kind = tm.res_type offset 0) as o where tm.tag_uuid = resources.uuid`
        : sql`select json_array(tm.res_type, tm.res_uuid, r.owner_uuid) as v, tm.seq as s from tag_members as tm inner join resources as r on r.uuid = tm.res_uuid and r.kind = tm.res_type where tm.tag_uuid = resources.uuid`;
      cols.push(this.jsonList(members, { json: true }).as('rel_members'));
    }
    return cols;
  }

  /**
   * A subquery's values (its column `v`, in the order of its column `s` when it has one) as JSON array text,
   * `[]` when it has none. `json`: the values are JSON arrays themselves (SQLite loses that across a subquery
   * without `json()`).
   */
  private jsonList(sub: RawBuilder<unknown>, opts: { json?: boolean; ordered?: boolean } = {}): RawBuilder<string> {
    const ordered = opts.ordered ?? true;
    if (this.dialect === 'postgres')
      return sql<string>`(select coalesce(json_agg(x.v${ordered ? sql` order by x.s` : sql``}), '[]'::json)::text from (${sub}) as x)`;
    return sql<string>`(select json_group_array(${opts.json ? sql`json(x.v)` : sql`x.v`}) from (${sub}${ordered ? sql` order by s` : sql``}) as x)`;
  }

  /** Whether `listPage` reads this page in several statements (a deep page, from anchors): then it needs one snapshot. */
  pagesInSteps(set: VisibleSet, p: { order: Order; limit: number; offset: number }): boolean {
    return p.limit > 0 && p.order === 'created' && !set.where.length && p.offset >= this.anchorStep;
  }

  /**
   * A page of a visible set, in creation order (or most recently changed first), with the relations `rel`
   * asks for, and its total.
   *
   * On PostgreSQL one statement (see `pageQuery`): every statement is a round trip there. SQLite has none,
   * and there the shared rows (bounded by what others share with the caller, usually none) are read first:
   * the page is then a plain index range of the caller's own rows, which SQLite runs several times faster
   * than the merge of both halves in one statement. A deep page (`pagesInSteps`) starts from anchors
   * (`deepPage`). Either way the work is bounded by the page's end and by what is shared, never by the size
   * of the account.
   */
  async listPage(set: VisibleSet, p: { order: Order; limit: number; offset: number }, rel: Relations = {}): Promise<{ rows: Resource[]; total: number }> {
    const db = set.db;
    const args = { kind: set.kind, me: set.owner, end: p.offset + p.limit, limit: p.limit, offset: p.offset };
    type A = keyof typeof args;
    const deep = this.pagesInSteps(set, p);
    // No ORDER BY/LIMIT here: SQLite sorts with a bound LIMIT at a fixed cost of tens of microseconds.
    const first =
      set.shared && (deep || this.dialect === 'sqlite')
        ? await this.run<{ seq: number; updated_at: string }, A>(this.shapeKey('visible.theirs', set), db, (arg) => this.theirHalf(set, arg), args)
        : undefined;
    if (deep)
      return this.deepPage(
        set,
        (first ?? []).map((r) => Number(r.seq)),
        p.offset,
        p.limit,
        rel,
      );
    // Only the shared rows that can reach the page take part in the merge.
    const theirs = first && p.limit > 0 ? first.sort(JS_ORDER[p.order]).slice(0, args.end) : first;
    const mode: SharedIn = !set.shared ? 'none' : !theirs ? 'cte' : theirs.length ? 'list' : 'none';
    const found = await this.run<RelRow & { rel_own: number | null; rel_theirs?: number | null }, A | 'theirs'>(
      this.shapeKey('visible.page-with', set, p.order, p.limit > 0, p.offset > 0, relKey(rel), mode),
      db,
      (arg) => this.pageQuery(set, p, rel, arg, mode),
      { ...args, theirs: this.listArg((theirs ?? []).map((t) => t.seq)) },
    );
    const rows = found.map((r) => withRelated(r));
    // A page that is not full holds everything from the offset on.
    if ((p.offset === 0 || rows.length > 0) && (p.limit === 0 || rows.length < p.limit)) return { rows, total: p.offset + rows.length };
    const shared = (counted: { rel_theirs?: number | null } | undefined) => (first ? first.length : Number(counted?.rel_theirs ?? 0));
    if (found.length) return { rows, total: Number(found[0].rel_own ?? 0) + shared(found[0]) };
    // Past the end: only the totals.
    const totals = await this.run<{ rel_own: number | null; rel_theirs?: number | null }, A>(
      this.shapeKey('visible.total', set, first !== undefined),
      db,
      (arg) => db.selectNoFrom(this.totalColumns(set, arg, first ? undefined : 'half')) as unknown as AnyQuery,
      args,
    );
    return { rows, total: Number(totals[0]?.rel_own ?? 0) + shared(totals[0]) };
  }

  /**
   * A page as one statement: the page's seqs, then its rows by seq with their relation columns and the
   * set's totals (`rel_own`, and `rel_theirs` when the statement reads the shared rows itself) as columns
   * computed once for the statement.
   *
   * The seqs come from one index range of the caller's own rows (the index alone: PostgreSQL's plan for any
   * owner stays on it), merged in order, up to the page's end, with the shared rows: `none` (there are
   * none), `list` (read first, their seqs as the argument `theirs`), or `cte` (read by this statement once,
   * in a materialised CTE, and counted).
   */
  private pageQuery(
    set: VisibleSet,
    p: { order: Order; limit: number; offset: number },
    rel: Relations,
    arg: ArgOf<'kind' | 'me' | 'end' | 'limit' | 'offset' | 'theirs'>,
    shared: SharedIn,
  ) {
    const db = set.db;
    const limit = p.limit > 0 ? 'limit' : undefined;
    const offset = p.offset > 0 ? 'offset' : undefined;
    // Only the order's columns: in creation order the own half is then read from the index alone.
    const cols = ORDER_BY[p.order].map(([col]) => col);
    const own = this.sorted(
      this.ownHalf(set, arg)
        .clearSelect()
        .select(cols.map((c) => `resources.${c}`) as never[]) as AnyQuery,
      p.order,
      'resources.',
    );
    const rowsOf = (q: Db, seqs: AnyQuery, totals: ReturnType<ResourceRepository['totalColumns']>) =>
      this.sorted(
        q
          .selectFrom('resources')
          .select([...COLUMNS, ...this.relationColumns(rel, arg('me')), ...totals])
          .where(this.seqIn(seqs)),
        p.order,
        'resources.',
      );
    if (shared === 'none') return rowsOf(db as Db, this.paged(own, arg, limit, offset).clearSelect().select('resources.seq'), this.totalColumns(set, arg));
    const theirs =
      shared === 'cte'
        ? (db.selectFrom(sql<{ seq: number; updated_at: string }>`theirs`.as('t')).select(['t.seq', 't.updated_at']) as AnyQuery)
        : (db
            .selectFrom('resources as t')
            .select(['t.seq', 't.updated_at'])
            .where(this.inList('t.seq', arg('theirs'))) as AnyQuery);
    const end = p.limit > 0 ? 'end' : undefined;
    // Both sides ordered and cut at the page's end: SQLite merges them without sorting.
    const merged = db
      .selectFrom(this.paged(own, arg, end, undefined).as('a'))
      .select(cols.map((c) => `a.${c}`) as never[])
      .unionAll(
        db
          .selectFrom(this.paged(this.sorted(theirs, p.order, 't.'), arg, shared === 'cte' ? end : undefined, undefined).as('b'))
          .select(cols.map((c) => `b.${c}`) as never[]),
      ) as unknown as AnyQuery;
    const seqs = db.selectFrom(this.paged(this.sorted(merged, p.order, ''), arg, limit, offset).as('m')).select('m.seq') as unknown as AnyQuery;
    if (shared === 'list') return rowsOf(db as Db, seqs, this.totalColumns(set, arg));
    const withTheirs = db.with(
      (cte) => cte('theirs').materialized(),
      () => this.theirHalf(set, arg),
    );
    return rowsOf(withTheirs as unknown as Db, seqs, this.totalColumns(set, arg, 'cte'));
  }

  /**
   * `resources.seq` is one of the seqs `seqs` selects. On PostgreSQL as an array: each row is then looked up
   * by its key, where a plan made once for any caller could choose to merge against the whole table.
   */
  private seqIn(seqs: AnyQuery): RawBuilder<SqlBool> {
    return this.dialect === 'postgres' ? sql<SqlBool>`resources.seq = any(array(${seqs}))` : sql<SqlBool>`resources.seq in (${seqs})`;
  }

  /**
   * The set's totals as columns: `rel_own` the caller's own rows (the kept count; counted when filtered),
   * and `rel_theirs` the shared ones, counted from the statement's `theirs` CTE or from the shared half itself.
   */
  private totalColumns(set: VisibleSet, arg: ArgOf<'kind' | 'me'>, theirs?: 'cte' | 'half') {
    const own = set.where.length
      ? sql<number>`(select count(*) from (${this.ownHalf(set, arg)}) as c)`
      : sql<number>`(select n from resource_counts where kind = ${arg('kind')} and owner_uuid = ${arg('me')})`;
    if (!set.shared || !theirs) return [own.as('rel_own')];
    const shared = theirs === 'cte' ? sql<number>`(select count(*) from theirs)` : sql<number>`(select count(*) from (${this.theirHalf(set, arg)}) as c)`;
    return [own.as('rel_own'), shared.as('rel_theirs')];
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

  /**
   * The row is listed in the body list `key` of one of the `kind` objects `of` (the snapshots of some
   * drives): an index lookup of those objects, then of the uuids they list, never a scan of the kind.
   */
  listedIn(kind: string, key: string, of: readonly string[], column = 'resources.uuid'): RawBuilder<boolean> {
    const parents = sql`select p.body from resources p where p.kind = ${kind} and p.uuid in (${sql.join([...of])})`;
    return this.dialect === 'postgres'
      ? sql<boolean>`${sql.ref(column)} in (select l.value from (${parents}) as b cross join jsonb_array_elements_text(b.body::jsonb -> ${sql.lit(key)}) as l(value))`
      : sql<boolean>`${sql.ref(column)} in (select l.value from (${parents}) as b, json_each(b.body, ${sql.lit(`$.${key}`)}) as l)`;
  }

  /** LIMIT/OFFSET with the API's meaning (limit 0 = all), see paging.ts. */
  page<Q extends { limit(n: number): Q; offset(n: number): Q }>(q: Q, limit: number, offset: number): Q {
    return page(q, limit, offset, this.dialect);
  }
}

type Order = 'created' | 'recent';
const ORDER_BY: Record<Order, readonly (readonly [string, 'asc' | 'desc'])[]> = {
  created: [['seq', 'asc']],
  recent: [
    ['updated_at', 'desc'],
    ['seq', 'desc'],
  ],
};

/** The index of the first element of ascending `sorted` that is not below `value`. */
function lowerBound(sorted: readonly number[], value: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid] < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The list orders, for rows already in memory. */
const JS_ORDER: Record<Order, (a: { seq: number; updated_at: string }, b: { seq: number; updated_at: string }) => number> = {
  created: (a, b) => a.seq - b.seq,
  recent: (a, b) => (a.updated_at === b.updated_at ? b.seq - a.seq : a.updated_at < b.updated_at ? 1 : -1),
};

/** How a page's statement gets the rows shared with the caller (see `pageQuery`). */
type SharedIn = 'none' | 'list' | 'cte';

/** A condition on a `resources` row (a filter). */
export type Condition = (eb: ExpressionBuilder<Database, 'resources'>) => Expression<SqlBool>;

/**
 * The uuids of other users' rows a caller sees, as a subquery of the caller's uuid. `key` names its shape
 * (one per kind's rule), so the queries built on it are compiled once; the subquery must take the caller
 * as a parameter, never spelled into its SQL.
 */
export interface SharedRows {
  key: string;
  (me: string): AnyQuery;
}

/** The rows of a kind a caller may see, with the conditions filters put on them; not yet SQL. */
export interface VisibleSet {
  db: Db | Tx;
  kind: string;
  owner: string;
  shared?: SharedRows;
  where: Condition[];
}
