import { sql, type SqlBool } from 'kysely';
import type { Db, Tx } from '../db.js';
import { toResource, type Resource, type Row } from './model.js';
import type { ResourceRows } from './rows.js';
import type { ResourceSql } from './sql.js';

/**
 * Every owned row of a kind, across accounts: what billing meters read at a poll and what the library's
 * synchronisation compares. Set-wise reads in creation order, the large ones a chunk at a time.
 */
export class OwnedRows {
  constructor(
    private readonly sql: ResourceSql,
    private readonly rows: ResourceRows,
  ) {}

  /**
   * Every owned row of a kind, of every account or one (`owner`), optionally only in some states (the
   * indexed status column): what billing meters read at a poll, set-wise across accounts.
   */
  async owned(db: Db | Tx, kind: string, opts: { owner?: string; statuses?: readonly string[] } = {}): Promise<Resource[]> {
    let q = this.rows.select(db, kind);
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
        .select(['seq', 'uuid', 'owner_uuid', 'created_at', ...fields.map((f, i) => this.sql.bodyText(f).as(`f${i}`))])
        .where('kind', '=', kind)
        .where('seq', '>', after);
      q = opts.owner !== undefined ? q.where('owner_uuid', '=', opts.owner) : q.where('owner_uuid', 'is not', null);
      if (opts.bodyIn) q = q.where(sql<SqlBool>`${this.sql.bodyText(opts.bodyIn.key)} in (${sql.join([...opts.bodyIn.values])})`);
      let rows: ({ seq: number; uuid: string; owner_uuid: string; created_at: string } & Record<string, unknown>)[];
      // In a PostgreSQL transaction a failed statement aborts it: a savepoint keeps the fallback possible.
      const savepoint = this.sql.dialect === 'postgres' && db.isTransaction;
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
    return ((await this.rows.select(db, kind).where('owner_uuid', 'is', null).execute()) as Row[]).map(toResource);
  }
}
