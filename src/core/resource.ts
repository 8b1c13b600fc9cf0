import type { TSchema } from 'typebox';
import type { Field } from './fields.js';
import type { Permission } from './permissions.js';
import type { Ctx, Services } from './context.js';
import type { TimerHandler } from './timers.js';
import type { Meter } from './metering.js';
import type { Tx } from '../store/db.js';

export type Method = 'get' | 'post' | 'put' | 'delete';

/** A parsed list query: declared filters (repeated param = AND, comma = OR), paging and projection. */
export interface ListQuery {
  /** filter name -> list of OR-groups, all of which must match. */
  filters: Map<string, string[][]>;
  limit: number;
  offset: number;
  /** The keys the answer will show (`fields=`, or a short list form); absent: all. Work for others may be skipped. */
  fields?: readonly string[];
  /**
   * The caller serialises the answer as JSON and looks into no object: the objects may come as JSON text
   * already cut to `fields` (core/json.ts `preserialised`; the result then says `cut`).
   */
  json?: boolean;
}

export interface ListResult {
  total: number;
  objects: Record<string, unknown>[];
  /** The objects are cut to the query's `fields` already (and may be JSON text: see `ListQuery.json`). */
  cut?: boolean;
  /** Keys the envelope carries besides `meta` and `objects` (`/pricing/`: `current`, `next`). */
  extra?: Record<string, unknown>;
}

/**
 * What a write did, as data, where the objects alone do not say it: `started` — it only started work the
 * simulator finishes later (a virtual-router job); `beside` — values of the result beside the objects (the
 * total `price` of a subscription order). The kind's `wire` says how the answer shows them.
 */
export class Outcome<T> {
  constructor(
    readonly value: T,
    readonly info: { started?: boolean; beside?: Record<string, unknown> } = {},
  ) {}
}

/** The write only started work the simulator finishes later (a virtual-router job). */
export const started = <T>(value: T): Outcome<T> => new Outcome(value, { started: true });

/** A service's write result: the value, or the value with what else the write did. */
export type Written<T> = T | Outcome<T>;

/**
 * How a kind's answers look on the wire where they differ from the generic API (every key optional; the
 * recorded exchanges are the reason for each): one block per kind instead of a key per quirk.
 */
export interface WireShape {
  /** `POST /<kind>/` answers this status (default 201; the subscription calculator answers 200) with `beside` keys next to `objects`. */
  create?: { status?: 200 | 201; beside?: Record<string, TSchema> };
  /** Keys a create's objects show besides the declared fields (the recorded vrfwfilters create shows its policy; GET never does). */
  createdKeys?: Record<string, TSchema>;
  /** Keys an update's answer shows besides the declared fields (the recorded notification-contact PUT adds `pk`). */
  updatedKeys?: Record<string, TSchema>;
  /** Keys a list answer carries beside `meta` and `objects` (`/pricing/`: `current`, `next`; `/subscriptions/`: `price`). */
  listBeside?: Record<string, TSchema>;
  /** A write whose Outcome says `started` answers 202 with the same body (create, update) or the value (delete). */
  startsWork?: boolean;
  /** What each read-only view answers (absent: an object). */
  views?: Record<string, TSchema>;
  /** Keys `schema/` advertises differently from what is served (the recorded `ips` schema lists its list methods as "get"). */
  advertised?: Record<string, unknown>;
}

/** What a collection kind's service implements; the generic routes call only this. */
export interface CollectionService {
  list(ctx: Ctx, query: ListQuery): Promise<ListResult>;
  /** `json`: as for `ListQuery.json`, the object may come as JSON text (the whole object; no `fields=`). */
  get(ctx: Ctx, uuid: string, opts?: { json?: boolean }): Promise<Record<string, unknown>>;
  create?(ctx: Ctx, inputs: Record<string, unknown>[]): Promise<Written<Record<string, unknown>[]>>;
  update?(ctx: Ctx, uuid: string, input: Record<string, unknown>): Promise<Written<Record<string, unknown>>>;
  /** `params`: the kind's declared `deleteParams` (the last value of each). */
  remove?(ctx: Ctx, uuid: string, params?: Record<string, string | undefined>): Promise<void | Outcome<Record<string, unknown>>>;
  removeMany?(ctx: Ctx, uuids: string[]): Promise<void>;
  /** `PUT /<kind>/` with one object or a list (notification preferences): 202 with the changed objects. */
  updateMany?(ctx: Ctx, inputs: Record<string, unknown>[]): Promise<Record<string, unknown>[]>;
  /** The object if the caller may use `perm` on it: 404 when invisible, 403 when visible but not permitted. */
  authorize?(ctx: Ctx, uuid: string, perm: Permission): Promise<{ uuid: string; owner_uuid: string | null }>;
}

/**
 * `POST /<kind>/<uuid>/action/?do=<name>`: the generic route finds the object, checks the permission and
 * answers 202 for an asynchronous action (the work goes on after the answer), 200 otherwise.
 */
export interface ActionDecl {
  /** ACL permission a user other than the owner needs (spec rules: START, STOP, OPEN_VNC, CLONE, ...). */
  permission: Permission;
  /** The API answers 202: the action starts work that finishes later. */
  async: boolean;
  /** Query parameters the action reads besides `do` (e.g. `avoid`); the last value of each. */
  params?: readonly string[];
  /** What the action answers, for the OpenAPI document: a kind's full object, `{objects: [...]}` of one, or a schema. */
  answer?: { object: string } | { objects: string } | { schema: object };
  run(ctx: Ctx, uuid: string, body: Record<string, unknown>, params: Record<string, string | undefined>): Promise<unknown>;
}

/** What a single-object kind (profile, capabilities, balance) implements. */
export interface SingletonService {
  get(ctx: Ctx): Promise<Record<string, unknown>>;
  update?(ctx: Ctx, input: Record<string, unknown>): Promise<Record<string, unknown>>;
}

interface Common {
  /** URL segment under /api/2.0/ and the `res_type` of tag members. */
  kind: string;
  /** tastypie `schema/` flavour: "model" prints blank/nullable/unique, "custom" prints the short descriptor. */
  flavour: 'model' | 'custom';
  fields: Record<string, Field>;
  defaultLimit: number;
  detailMethods: Method[];
  listMethods: Method[];
  /** How answers differ on the wire from the generic API (status, extra keys, advertised methods). */
  wire?: WireShape;
  /** Durable follow-up work of this kind (timer kind -> handler), run by the scheduler. */
  timers?: Record<string, TimerHandler>;
  /** What this kind's objects use, for billing (reference §16.6); absent = free. */
  meter?: Meter;
  /** An account's money ran out: stop what it runs (servers); returns how many stopped. */
  outOfMoney?: (tx: Tx, s: Services, owner: string) => Promise<number>;
  /** Work before the service answers (the library catalogue into the database); idempotent, any process. */
  startup?(s: Services): Promise<void>;
}

/** One declaration per resource kind: it drives validation, schema/, projections and the generic routes. */
export interface CollectionDecl extends Common {
  shape: 'collection';
  /** Keys of the short items of `GET /<kind>/`; absent means the full object. */
  listFields?: readonly string[];
  /** Declared filters as `schema/` prints them. */
  filtering: Record<string, string | number>;
  /** Filters lists accept that `schema/` does not print (the recorded snapshot schema omits `drive`). */
  unlistedFilters?: readonly string[];
  ordering?: string[];
  /** ACL permissions that apply to this kind; absent = never shared (tags, ACLs). */
  permissions?: readonly Permission[];
  /** Carries tags (a `tags` field of tag references, kept as tag membership). */
  taggable?: boolean;
  actions?: Record<string, ActionDecl>;
  /**
   * Read-only views of one object at `GET /<kind>/<uuid>/<name>/` (a server's `runtime/`): the value the
   * function answers for an object the caller can see (it answers 404 otherwise, as a GET of the object).
   */
  views?: Record<string, (ctx: Ctx, uuid: string) => Promise<unknown>>;
  /**
   * Read-only views over the caller's collection at `GET /<kind>/<name>/` and of one object's place in it
   * at `GET /<kind>/<name>/<uuid>/` (availability groups): the bare JSON value each answers.
   */
  collectionViews?: Record<string, { all(ctx: Ctx): Promise<unknown>; of(ctx: Ctx, uuid: string): Promise<unknown> }>;
  /**
   * Its list, detail list and single GET answers are made only of the caller's visible owners' rows (their
   * own, those ACLs share with them, ownerless ones) and those owners' tags and ACLs: no other table, no
   * other owner's row (a drive's size, a lease). They are kept while none of those owners wrote
   * (store/answer-scopes.ts, http/routes.ts `answerScope`). Absent: kept while nothing at all was written.
   */
  answersFromVisibleOwners?: boolean;
  /** Query parameters `DELETE /<kind>/<uuid>/` reads (a server's `recurse`), as actions declare theirs; the last value of each. */
  deleteParams?: readonly string[];
  service: CollectionService;
}

export interface SingletonDecl extends Common {
  shape: 'singleton';
  service: SingletonService;
  /** A fixed body for `schema/` instead of the generated one (capabilities). */
  schemaOverride?: Record<string, unknown>;
  /** The answer is a list envelope `{meta, objects}` (locations): XML names its root `response`. */
  envelope?: boolean;
}

export type ResourceDecl = CollectionDecl | SingletonDecl;
