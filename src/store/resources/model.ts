import type { Expression, ExpressionBuilder, SelectQueryBuilder, SqlBool } from 'kysely';
import type { Db, Tx } from '../db.js';
import type { Database } from '../schema.js';

/**
 * The data of the `resources` family: a stored row as callers get it, the relations a read can bring
 * along, the visible set a list is built from, and the row mapping every module of the family shares.
 * Types only callers need (conditions, subqueries) are named here so nothing outside the store imports Kysely.
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
  /**
   * `false`: the body is not read (a reader holding the object's presentation for this version already;
   * reading `body` then throws). The other columns and the relations are read as usual.
   */
  body?: false;
  /**
   * Where the store keeps relation stamps (SQLite, `ResourceRelations.stamps`): a stamp of the relations asked
   * for, one that moves whenever any of them may have, becomes their version (`Related.text`). `only`: the
   * relations themselves are not read (reading them then throws): a reader of kept object texts needs
   * nothing more. `also`: they are read too, in the same statement (a text made now is kept under it).
   */
  stamp?: 'only' | 'also';
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
  /**
   * The relations exactly as read (their JSON texts), or their stamp (`Relations.stamp`, prefixed `stamp:`):
   * equal texts, equal relations (a version of them to key on).
   */
  text: string;
}

/** A key naming which relations a shape reads (part of its shape key). */
export const relKey = (rel: Relations): string =>
  ((rel.tags ? 't' : '') + (rel.sharing ? 's' : '') + (rel.members ? 'm' : '') || 'none') +
  (rel.body === false ? '-nobody' : '') +
  (rel.stamp ? `-stamp-${rel.stamp}` : '');

/** A row of `resources` as read (the body still JSON text). */
export type Row = { seq: number; kind: string; uuid: string; owner_uuid: string | null; body: string; version: number; created_at: string; updated_at: string };
export const COLUMNS = ['seq', 'kind', 'uuid', 'owner_uuid', 'body', 'version', 'created_at', 'updated_at'] as const;
const NO_BODY = COLUMNS.filter((c) => c !== 'body');
/** What a reader of kept texts keys them on (`stamp: 'only'`): each column more costs a property on every row read. */
const KEYS = ['uuid', 'owner_uuid', 'version'] as const;
/**
 * The columns a read of `rel` selects: all of a row's, all but its body (`rel.body === false`), or only the
 * row's keys and version (`rel.stamp === 'only'`, which reads no body either).
 */
export const columnsOf = (rel: Relations): readonly (typeof COLUMNS)[number][] => (rel.stamp === 'only' ? KEYS : rel.body === false ? NO_BODY : COLUMNS);
/** A row with the JSON columns of its relations (those a shape reads). */
export type RelRow = Row & { rel_tags?: string; rel_grants?: string; rel_held?: string; rel_members?: string; rel_stamp?: string | number | null };

const listOf = (text: string | undefined): unknown[] => (text ? (JSON.parse(text) as unknown[]) : []);

/**
 * The relations of a row read with `relationColumns`, parsed when first read: a page whose objects' texts are
 * kept (core/stored.ts `fragments`) reads only `text`.
 */
class RowRelations implements Related {
  readonly text: string;
  #tags?: string[];
  #grants?: Related['grants'];
  #held?: string[];
  #members?: Related['members'];
  /** The columns as read (not the row: a kept row must not hold more than before). */
  private readonly r: Pick<RelRow, 'rel_tags' | 'rel_grants' | 'rel_held' | 'rel_members'>;
  constructor(row: RelRow, stamped: boolean) {
    this.r = { rel_tags: row.rel_tags, rel_grants: row.rel_grants, rel_held: row.rel_held, rel_members: row.rel_members };
    this.text = stamped ? stampText(row.rel_stamp) : `${row.rel_tags ?? ''}|${row.rel_grants ?? ''}|${row.rel_held ?? ''}|${row.rel_members ?? ''}`;
  }
  get tags(): string[] {
    return (this.#tags ??= listOf(this.r.rel_tags) as string[]);
  }
  get grants(): Related['grants'] {
    return (this.#grants ??= (listOf(this.r.rel_grants) as [string, string | null, string][]).map(([grantee_uuid, email, permission]) => ({
      grantee_uuid,
      email,
      permission,
    })));
  }
  get held(): string[] {
    return (this.#held ??= listOf(this.r.rel_held) as string[]);
  }
  get members(): Related['members'] {
    return (this.#members ??= (listOf(this.r.rel_members) as [string, string, string | null][]).map(([res_type, res_uuid, owner_uuid]) => ({
      res_type,
      res_uuid,
      owner_uuid,
    })));
  }
}

/** The relations of a row read with their stamp only (`Relations.stamp`): reading them is a bug, and says so. */
class StampedRelations implements Related {
  readonly text: string;
  constructor(stamp: string | number | null | undefined) {
    this.text = stampText(stamp);
  }
  private unread(): never {
    throw new Error('the relations of this row were not read (only their stamp)');
  }
  get tags(): string[] {
    return this.unread();
  }
  get grants(): Related['grants'] {
    return this.unread();
  }
  get held(): string[] {
    return this.unread();
  }
  get members(): Related['members'] {
    return this.unread();
  }
}

/** A stamp as a version (`Related.text`); a read of no relations has none, and all such reads agree. */
const stampText = (stamp: string | number | null | undefined): string => `stamp:${stamp ?? ''}`;

/**
 * A row read with its keys and the stamp of its relations only (`stamp: 'only'`): what a reader of kept
 * texts keys them on. Reading anything else is a bug, and says so.
 */
class KeyRow implements Resource {
  readonly related: Related;
  readonly version: number;
  constructor(
    readonly uuid: string,
    readonly owner_uuid: string | null,
    version: number | bigint,
    stamp: string | number | null | undefined,
  ) {
    this.version = Number(version);
    this.related = new StampedRelations(stamp);
  }
  private unread(column: string): never {
    throw new Error(`the ${column} of ${this.uuid} was not read (its keys only)`);
  }
  get seq(): number {
    return this.unread('seq');
  }
  get kind(): string {
    return this.unread('kind');
  }
  get body(): Obj {
    return this.unread('body');
  }
  get created_at(): string {
    return this.unread('created_at');
  }
  get updated_at(): string {
    return this.unread('updated_at');
  }
}

/** A row read with relation columns (or their stamp only), as data with its relations. */
export const withRelated = (r: RelRow, rel: Relations): Resource =>
  rel.stamp === 'only'
    ? new KeyRow(r.uuid, r.owner_uuid, r.version, r.rel_stamp)
    : Object.assign(toResource(r), { related: new RowRelations(r, rel.stamp !== undefined) as Related });

/** Where each column of a statement's rows is, by name (rows read as arrays, see `ReadRows`). */
export type ColumnAt = Readonly<Record<string, number | undefined>>;

/**
 * A statement's rows as read: arrays, with where each column is (SQLite through ResourceSql's `direct`:
 * better-sqlite3's `.raw()` makes no object per row, which cost more than reading the row: 16 µs of 37 for a
 * 20-row page of keys), or objects (Kysely: PostgreSQL, and SQLite where `direct` may not run).
 */
export class ReadRows<R extends object> {
  constructor(
    readonly rows: readonly unknown[][] | readonly R[],
    private readonly at?: ColumnAt,
  ) {}

  get length(): number {
    return this.rows.length;
  }

  /** Column `name` of row `i` (undefined when the statement has no such column). */
  value<K extends keyof R & string>(i: number, name: K): R[K] | undefined {
    if (!this.at) return (this.rows[i] as R)[name];
    const j = this.at[name];
    return j === undefined ? undefined : ((this.rows[i] as unknown[])[j] as R[K]);
  }

  /** Row `i` as a resource with the relations `rel` asked for (`withRelated`). */
  resource(i: number, rel: Relations): Resource {
    const at = this.at;
    if (!at) return withRelated(this.rows[i] as RelRow, rel);
    const a = this.rows[i] as unknown[];
    const v = (name: keyof RelRow) => {
      const j = at[name];
      return j === undefined ? undefined : a[j];
    };
    if (rel.stamp === 'only') return new KeyRow(a[at.uuid!] as string, a[at.owner_uuid!] as string | null, a[at.version!] as number, v('rel_stamp') as string);
    // One literal of one shape, whatever the columns read.
    const r = {
      seq: v('seq'),
      kind: v('kind'),
      uuid: v('uuid'),
      owner_uuid: v('owner_uuid'),
      body: v('body'),
      version: v('version'),
      created_at: v('created_at'),
      updated_at: v('updated_at'),
      rel_tags: v('rel_tags'),
      rel_grants: v('rel_grants'),
      rel_held: v('rel_held'),
      rel_members: v('rel_members'),
      rel_stamp: v('rel_stamp'),
    } as RelRow;
    return withRelated(r, rel);
  }

  /** Every row as a resource (`resource`). */
  resources(rel: Relations): Resource[] {
    const out: Resource[] = [];
    for (let i = 0; i < this.rows.length; i++) out.push(this.resource(i, rel));
    return out;
  }
}

/** A row as data; the body is parsed when first read. */
export function toResource(r: Row): Resource {
  const text = r.body;
  if (text === undefined) return withoutBody(r);
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

/**
 * A row read without its body (`Relations.body === false`): reading the body is a bug, and says so. A class:
 * an object literal with a getter costs ~2 µs to make on Node 20, an instance ~40 ns (a page makes 20).
 */
class BodilessRow implements Resource {
  readonly seq: number;
  readonly kind: string;
  readonly uuid: string;
  readonly owner_uuid: string | null;
  readonly version: number;
  readonly created_at: string;
  readonly updated_at: string;
  constructor(r: Omit<Row, 'body'>) {
    this.seq = r.seq;
    this.kind = r.kind;
    this.uuid = r.uuid;
    this.owner_uuid = r.owner_uuid;
    this.version = Number(r.version);
    this.created_at = r.created_at;
    this.updated_at = r.updated_at;
  }
  get body(): Obj {
    throw new Error(`the body of ${this.kind}/${this.uuid} was not read`);
  }
}

function withoutBody(r: Omit<Row, 'body'>): Resource {
  return new BodilessRow(r);
}

/** The indexed mirrors of a body: `name` and `status` (jobs keep theirs as `state`). */
export type Mirrors = { name: string | null; status: string | null };
export function mirrors(body: Obj): Mirrors {
  const status = typeof body.status === 'string' ? body.status : typeof body.state === 'string' ? body.state : null;
  return { name: typeof body.name === 'string' ? body.name : null, status };
}

/** The API's timestamp form (microseconds, `+00:00`), as every other stored time. */
export const stamp = (now: Date): string => {
  const t = now.toISOString();
  // Four-digit years print `YYYY-MM-DDTHH:MM:SS.sssZ`: cut, not matched with a regular expression.
  return t.length === 24 ? t.slice(0, 23) + '000+00:00' : t.replace(/\.(\d{3})Z$/, '.$1000+00:00');
};

/** Rows by uuid in the order the uuids were asked for (missing ones left out). */
export function inOrderOf<T extends { uuid: string }>(rows: T[], uuids: readonly string[]): T[] {
  const order = new Map(uuids.map((u, i) => [u, i]));
  return rows.sort((a, b) => order.get(a.uuid)! - order.get(b.uuid)!);
}

/** A list's order: creation order, or most recently changed first (jobs). */
export type Order = 'created' | 'recent';
/** A condition on a `resources` row (a filter), and what a filter builds it from. */
export type ResourceExpressions = ExpressionBuilder<Database, 'resources'>;
export type SqlCondition = Expression<SqlBool>;
export type Condition = (eb: ResourceExpressions) => SqlCondition;

/**
 * The uuids of other users' rows a caller sees, as a subquery of the caller's uuid. `key` names its shape
 * (one per kind's rule), so the queries built on it are compiled once; the subquery must take the caller
 * as a parameter, never spelled into its SQL.
 */
export interface SharedRows {
  key: string;
  (me: string): AnyQuery;
  /**
   * The same rule for one row, correlated to the outer `resources` row (an EXISTS probe): a single read then
   * walks that row's memberships instead of building the list of everything shared with the caller.
   */
  holds?: (me: string) => AnyQuery;
}

/** The rows of a kind a caller may see, with the conditions filters put on them; not yet SQL. */
export interface VisibleSet {
  db: Db | Tx;
  kind: string;
  owner: string;
  shared?: SharedRows;
  where: Condition[];
}
