import type { Compilable } from 'kysely';
import type { Db, Dialect, Tx } from './db.js';
import type { ChangeFeed } from './changes.js';
import type { ArgOf } from './shapes.js';
import * as aclTables from './resources/acls.js';
import { OwnAnchors } from './resources/anchors.js';
import { ResourceCounts } from './resources/counts.js';
import { OwnedRows } from './resources/owned.js';
import { ResourcePages } from './resources/pages.js';
import { ResourceRelations } from './resources/relations.js';
import { ResourceRows } from './resources/rows.js';
import { ResourceScans } from './resources/scans.js';
import { ResourceSql, type SqliteDirect } from './resources/sql.js';
import { TagMembership } from './resources/tags.js';
import { VisibleSets } from './resources/visible.js';
import { SharedSeqs } from './resources/shared-seqs.js';

export type {
  AnyExpressions,
  AnyQuery,
  Condition,
  Obj,
  Order,
  Related,
  Relations,
  Resource,
  ResourceExpressions,
  SharedRows,
  SqlCondition,
  VisibleSet,
} from './resources/model.js';
export { mirrors, type Mirrors } from './resources/model.js';
export { API_PREFIX, ownerRef, ref, resourceUri, userUri, type Ref } from './resources/uris.js';

/**
 * `store.resources`: the SQL of the `resources` family (the shared `resources` table, its kept counts, tag
 * membership and the ACL tables), split by concern under store/resources/. This facade builds the modules
 * over one ResourceSql (compiled shapes, the engines' differences) and keeps the one-call API every kind
 * uses (`get`, `lock`, `listPage`, ...); the ACL tables are reached through their module (`acls`).
 */
export class ResourceRepository {
  readonly sql: ResourceSql;
  readonly counts: ResourceCounts;
  readonly rows: ResourceRows;
  readonly scans: ResourceScans;
  readonly ownedReads: OwnedRows;
  readonly tags: TagMembership;
  readonly relations: ResourceRelations;
  readonly sets: VisibleSets;
  readonly anchors: OwnAnchors;
  readonly pages: ResourcePages;
  /** ACL-shared rows kept between requests (SQLite). */
  readonly shared: SharedSeqs;
  /** The ACL relation tables (acls.ts). */
  readonly acls = aclTables;

  /**
   * `direct`: SQLite's synchronous statement runner (see ResourceSql); `anchorStep`: positions between the
   * anchors of deep pages (anchors.ts); `changes`: where writes of users' objects are noted for the live stream.
   */
  constructor(
    readonly dialect: Dialect,
    direct?: SqliteDirect,
    anchorStep = 1000,
    changes?: ChangeFeed,
  ) {
    this.sql = new ResourceSql(dialect, direct);
    this.counts = new ResourceCounts(this.sql);
    this.rows = new ResourceRows(this.sql, this.counts, changes);
    this.scans = new ResourceScans(this.sql, this.rows);
    this.ownedReads = new OwnedRows(this.sql, this.rows);
    this.tags = new TagMembership(this.scans);
    this.relations = new ResourceRelations(this.sql);
    this.sets = new VisibleSets(this.sql, this.relations);
    this.anchors = new OwnAnchors(this.sql, this.counts, this.relations, anchorStep);
    this.shared = new SharedSeqs(this.sql);
    this.pages = new ResourcePages(this.sql, this.sets, this.relations, this.anchors, this.shared);
  }

  // ---- rows.ts
  get(...a: Parameters<ResourceRows['get']>) {
    return this.rows.get(...a);
  }
  getMany(...a: Parameters<ResourceRows['getMany']>) {
    return this.rows.getMany(...a);
  }
  lock(...a: Parameters<ResourceRows['lock']>) {
    return this.rows.lock(...a);
  }
  lockMany(...a: Parameters<ResourceRows['lockMany']>) {
    return this.rows.lockMany(...a);
  }
  insert(...a: Parameters<ResourceRows['insert']>) {
    return this.rows.insert(...a);
  }
  insertMany(...a: Parameters<ResourceRows['insertMany']>) {
    return this.rows.insertMany(...a);
  }
  insertIfAbsent(...a: Parameters<ResourceRows['insertIfAbsent']>) {
    return this.rows.insertIfAbsent(...a);
  }
  write(...a: Parameters<ResourceRows['write']>) {
    return this.rows.write(...a);
  }
  patch(...a: Parameters<ResourceRows['patch']>) {
    return this.rows.patch(...a);
  }
  remove(...a: Parameters<ResourceRows['remove']>) {
    return this.rows.remove(...a);
  }

  // ---- counts.ts
  flushCounts(tx: Tx) {
    return this.counts.flush(tx);
  }
  countForLimit(...a: Parameters<ResourceCounts['forLimit']>) {
    return this.counts.forLimit(...a);
  }
  countOf(...a: Parameters<ResourceCounts['of']>) {
    return this.counts.of(...a);
  }

  // ---- scans.ts, owned.ts
  uuidsInStatus(...a: Parameters<ResourceScans['uuidsInStatus']>) {
    return this.scans.uuidsInStatus(...a);
  }
  anyInStatus(...a: Parameters<ResourceScans['anyInStatus']>) {
    return this.scans.anyInStatus(...a);
  }
  namesOf(...a: Parameters<ResourceScans['namesOf']>) {
    return this.scans.namesOf(...a);
  }
  existing(...a: Parameters<ResourceScans['existing']>) {
    return this.scans.existing(...a);
  }
  listWithOwnerEmail(...a: Parameters<ResourceScans['listWithOwnerEmail']>) {
    return this.scans.listWithOwnerEmail(...a);
  }
  ownedUuids(...a: Parameters<ResourceScans['ownedUuids']>) {
    return this.scans.ownedUuids(...a);
  }
  allUuids(...a: Parameters<ResourceScans['allUuids']>) {
    return this.scans.allUuids(...a);
  }
  kindsOf(...a: Parameters<ResourceScans['kindsOf']>) {
    return this.scans.kindsOf(...a);
  }
  owned(...a: Parameters<OwnedRows['owned']>) {
    return this.ownedReads.owned(...a);
  }
  ownedFields<F extends string>(db: Db | Tx, kind: string, fields: readonly F[], opts?: Parameters<OwnedRows['ownedFields']>[3]) {
    return this.ownedReads.ownedFields(db, kind, fields, opts);
  }
  ownerless(...a: Parameters<OwnedRows['ownerless']>) {
    return this.ownedReads.ownerless(...a);
  }

  // ---- tags.ts
  setTagMembers(...a: Parameters<TagMembership['setTagMembers']>) {
    return this.tags.setTagMembers(...a);
  }
  setResourceTags(...a: Parameters<TagMembership['setResourceTags']>) {
    return this.tags.setResourceTags(...a);
  }
  dropTag(...a: Parameters<TagMembership['dropTag']>) {
    return this.tags.dropTag(...a);
  }
  carriesOwnTag(...a: Parameters<TagMembership['carriesOwnTag']>) {
    return this.tags.carriesOwnTag(...a);
  }

  // ---- visible.ts, pages.ts, relations.ts
  visible(...a: Parameters<VisibleSets['of']>) {
    return this.sets.of(...a);
  }
  findVisibleWith(...a: Parameters<VisibleSets['findVisibleWith']>) {
    return this.sets.findVisibleWith(...a);
  }
  findManyWith(...a: Parameters<ResourceRelations['findManyWith']>) {
    return this.relations.findManyWith(...a);
  }
  lockWith(...a: Parameters<ResourceRelations['lockWith']>) {
    return this.relations.lockWith(...a);
  }
  pagesInSteps(...a: Parameters<ResourcePages['pagesInSteps']>) {
    return this.pages.pagesInSteps(...a);
  }
  deepAtOnce(...a: Parameters<ResourcePages['deepAtOnce']>) {
    return this.pages.deepAtOnce(...a);
  }
  listPage(...a: Parameters<ResourcePages['listPage']>) {
    return this.pages.listPage(...a);
  }

  // ---- sql.ts
  shaped<R, K extends string>(db: Db | Tx, key: string, build: (arg: ArgOf<K>) => Compilable, args: Record<K, unknown>): Promise<R[]> {
    return this.sql.shaped<R, K>(db, key, build, args);
  }
  get ilike() {
    return this.sql.ilike;
  }
  like(...a: Parameters<ResourceSql['like']>) {
    return this.sql.like(...a);
  }
  bodyText(...a: Parameters<ResourceSql['bodyText']>) {
    return this.sql.bodyText(...a);
  }
  bodyTextIn(...a: Parameters<ResourceSql['bodyTextIn']>) {
    return this.sql.bodyTextIn(...a);
  }
  bodyListHasAny(...a: Parameters<ResourceSql['bodyListHasAny']>) {
    return this.sql.bodyListHasAny(...a);
  }
  listedIn(...a: Parameters<ResourceSql['listedIn']>) {
    return this.sql.listedIn(...a);
  }
  inList(...a: Parameters<ResourceSql['inList']>) {
    return this.sql.inList(...a);
  }
  listArg(...a: Parameters<ResourceSql['listArg']>) {
    return this.sql.listArg(...a);
  }
  page<Q extends { limit(n: number): Q; offset(n: number): Q }>(q: Q, limit: number, offset: number): Q {
    return this.sql.page(q, limit, offset);
  }
}
