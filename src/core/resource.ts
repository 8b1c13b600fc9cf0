import type { Field } from './fields.js';
import type { Ctx } from './context.js';

export type Method = 'get' | 'post' | 'put' | 'delete';

/** A parsed list query: declared filters (repeated param = AND, comma = OR), paging and projection. */
export interface ListQuery {
  /** filter name -> list of OR-groups, all of which must match. */
  filters: Map<string, string[][]>;
  limit: number;
  offset: number;
}

export interface ListResult {
  total: number;
  objects: Record<string, unknown>[];
}

/** What a collection kind's service implements; the generic routes call only this. */
export interface CollectionService {
  list(ctx: Ctx, query: ListQuery): Promise<ListResult>;
  get(ctx: Ctx, uuid: string): Promise<Record<string, unknown>>;
  create?(ctx: Ctx, inputs: Record<string, unknown>[]): Promise<Record<string, unknown>[]>;
  update?(ctx: Ctx, uuid: string, input: Record<string, unknown>): Promise<Record<string, unknown>>;
  remove?(ctx: Ctx, uuid: string): Promise<void>;
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
}

/** One declaration per resource kind: it drives validation, schema/, projections and the generic routes. */
export interface CollectionDecl extends Common {
  shape: 'collection';
  /** Keys of the short items of `GET /<kind>/`; absent means the full object. */
  listFields?: readonly string[];
  /** Declared filters as `schema/` prints them. */
  filtering: Record<string, string>;
  ordering?: string[];
  service: CollectionService;
}

export interface SingletonDecl extends Common {
  shape: 'singleton';
  service: SingletonService;
  /** A fixed body for `schema/` instead of the generated one (capabilities). */
  schemaOverride?: Record<string, unknown>;
}

export type ResourceDecl = CollectionDecl | SingletonDecl;
