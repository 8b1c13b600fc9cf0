import { sql } from 'kysely';
import type { Db, Tx } from '../db.js';
import type { ChangeFeed } from '../changes.js';
import { argsOf, type ArgOf } from '../shapes.js';
import { COLUMNS, inOrderOf, mirrors, stamp, toResource, type Mirrors, type Obj, type Resource, type Row } from './model.js';
import type { ResourceCounts } from './counts.js';
import type { ResourceSql } from './sql.js';

/**
 * Single rows of `resources` by kind and uuid: read, lock, insert, write, patch, delete. Every insert and
 * delete moves the owner's kept count (counts.ts) and is noted on the live change feed.
 *
 * Locking: `lock()` is `SELECT … FOR UPDATE` on PostgreSQL. A decision (is the drive free? is the server
 * stopped?) is made on rows read through `lock()` inside the transaction that writes its outcome, so a
 * concurrent transaction deciding on the same rows waits and then sees the committed result. SQLite runs
 * one transaction at a time on its single connection, so a plain read there is already a locked read.
 */

/** A row to insert. */
export interface NewRow {
  kind: string;
  uuid: string;
  owner: string | null;
  body: Obj;
}

export class ResourceRows {
  constructor(
    private readonly sql: ResourceSql,
    private readonly counts: ResourceCounts,
    /** Where inserts, writes and deletes of users' objects are noted for the live event stream. */
    private readonly changes?: ChangeFeed,
  ) {}

  /** A user's object changed in this transaction (nothing happens unless the change feed is on). */
  private changed(tx: Tx, kind: string, uuid: string, owner: string | null | undefined): void {
    this.writes++;
    if (owner && this.changes?.enabled) this.changes.note(tx, { owner, kind, uuid });
  }

  private writes = 0;
  /**
   * Rows this store has written, inserted or deleted so far (in any transaction): a caller holding a row it
   * locked may keep using it while the count has not moved (nothing, not even its own hooks, wrote since).
   */
  get writeCount(): number {
    return this.writes;
  }

  /** The whole rows of one kind (or of several). */
  select(db: Db | Tx, kind: string | readonly string[]) {
    const q = db.selectFrom('resources').select([...COLUMNS]);
    return typeof kind === 'string' ? q.where('kind', '=', kind) : q.where('kind', 'in', [...kind]);
  }

  /** One row (of one of `kind`s), unlocked. */
  async get(db: Db | Tx, kind: string | readonly string[], uuid: string): Promise<Resource | undefined> {
    if (typeof kind !== 'string') {
      const row = (await this.select(db, kind).where('uuid', '=', uuid).executeTakeFirst()) as Row | undefined;
      return row && toResource(row);
    }
    const rows = await this.sql.shaped<Row, 'kind' | 'uuid'>(db, 'resources.get', (arg) => this.select(db, arg('kind')).where('uuid', '=', arg('uuid')), {
      kind,
      uuid,
    });
    return rows[0] && toResource(rows[0]);
  }

  /** Rows by uuid, in the order asked (missing ones left out). */
  async getMany(db: Db | Tx, kind: string | readonly string[], uuids: readonly string[]): Promise<Resource[]> {
    if (!uuids.length) return [];
    const rows =
      typeof kind === 'string'
        ? await this.sql.shaped<Row, 'kind' | 'uuids'>(
            db,
            'resources.many',
            (arg) => this.select(db, arg('kind')).where(this.sql.inList('uuid', arg('uuids'))),
            {
              kind,
              uuids: this.sql.listArg(uuids),
            },
          )
        : ((await this.select(db, kind)
            .where('uuid', 'in', [...uuids])
            .execute()) as Row[]);
    return inOrderOf(rows.map(toResource), uuids);
  }

  /** One row, locked until the transaction ends (the read a decision is made on). */
  async lock(tx: Tx, kind: string | readonly string[], uuid: string): Promise<Resource | undefined> {
    const build = (k: unknown, u: unknown) => {
      const q = this.select(tx, k as string).where('uuid', '=', u as string);
      return this.sql.dialect === 'postgres' ? q.forUpdate() : q;
    };
    if (typeof kind !== 'string') {
      const row = (await build(kind, uuid).executeTakeFirst()) as Row | undefined;
      return row && toResource(row);
    }
    const rows = await this.sql.shaped<Row, 'kind' | 'uuid'>(tx, 'resources.lock', (arg) => build(arg('kind'), arg('uuid')), { kind, uuid });
    return rows[0] && toResource(rows[0]);
  }

  /** Several rows locked in uuid order (one order for every caller, so two lockers never deadlock). */
  async lockMany(tx: Tx, kind: string | readonly string[], uuids: readonly string[]): Promise<Resource[]> {
    if (!uuids.length) return [];
    let q = this.select(tx, kind)
      .where('uuid', 'in', [...uuids])
      .orderBy('uuid');
    if (this.sql.dialect === 'postgres') q = q.forUpdate();
    return inOrderOf(((await q.execute()) as Row[]).map(toResource), uuids);
  }

  /** Answers the body as stored (its JSON text), for a caller that shows the row as written. */
  async insert(tx: Tx, now: Date, r: NewRow): Promise<string> {
    const values = this.values(now, r);
    await this.sql.shaped(tx, 'resources.insert', (arg: ArgOf<keyof typeof values>) => tx.insertInto('resources').values(argsOf(values, arg)), values);
    this.inserted(tx, r);
    return values.body;
  }

  /** Many rows in few statements (seeding, the bench's large accounts); `chunk` rows per INSERT. */
  async insertMany(tx: Tx, now: Date, rows: readonly NewRow[], chunk = 500): Promise<void> {
    for (let i = 0; i < rows.length; i += chunk)
      await tx
        .insertInto('resources')
        .values(rows.slice(i, i + chunk).map((r) => this.values(now, r)))
        .execute();
    for (const r of rows) this.inserted(tx, r);
  }

  /** Insert unless a row of that kind and uuid exists (also one a concurrent transaction is inserting). */
  async insertIfAbsent(tx: Tx, now: Date, r: NewRow): Promise<boolean> {
    const res = await tx
      .insertInto('resources')
      .values(this.values(now, r))
      .onConflict((oc) => oc.columns(['uuid', 'kind']).doNothing())
      .executeTakeFirst();
    const inserted = Number(res.numInsertedOrUpdatedRows ?? 0) > 0;
    if (inserted) this.inserted(tx, r);
    return inserted;
  }

  private inserted(tx: Tx, r: NewRow): void {
    this.counts.note(tx, r.kind, r.owner, 1);
    this.changed(tx, r.kind, r.uuid, r.owner);
  }

  private values(now: Date, r: NewRow) {
    const t = stamp(now);
    return { kind: r.kind, uuid: r.uuid, owner_uuid: r.owner, ...mirrors(r.body), body: JSON.stringify(r.body), created_at: t, updated_at: t };
  }

  /**
   * Replace the body of a row read through `lock()` in this transaction; answers the body as stored (its JSON
   * text). `stored`: the row's `name` and `status` columns as they are now (read under its lock, no write
   * since), so the one that does not change is not set: SQLite rewrites an index entry of every column set,
   * a page more in the commit (a PUT renaming a server: 12 pages -> 11).
   */
  async write(
    tx: Tx,
    now: Date,
    row: Pick<Resource, 'seq'> & Partial<Pick<Resource, 'kind' | 'uuid' | 'owner_uuid'>>,
    body: Obj,
    stored?: Mirrors,
  ): Promise<string> {
    if (row.kind && row.uuid) this.changed(tx, row.kind, row.uuid, row.owner_uuid);
    else this.writes++;
    const next = mirrors(body);
    const setName = !stored || stored.name !== next.name;
    const setStatus = !stored || stored.status !== next.status;
    const values: Record<string, unknown> & { body: string } = { body: JSON.stringify(body), updated_at: stamp(now) };
    if (setName) values.name = next.name;
    if (setStatus) values.status = next.status;
    await this.sql.shaped(
      tx,
      setName && setStatus ? 'resources.write' : `resources.write:${setName ? 'name' : setStatus ? 'status' : 'body'}`,
      (arg: ArgOf<string>) =>
        tx
          .updateTable('resources')
          .set({ ...argsOf(values, arg), version: sql<number>`version + 1` })
          .where('seq', '=', arg('seq')),
      { ...values, seq: row.seq },
    );
    return values.body;
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
      this.counts.note(tx, kind, gone.owner_uuid, -1);
      this.changed(tx, kind, gone.uuid, gone.owner_uuid);
    }
  }
}
