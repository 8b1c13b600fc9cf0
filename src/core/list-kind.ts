import type { Ctx } from './context.js';
import { notFound } from './errors.js';
import type { CollectionDecl, CollectionService, ListQuery, ListResult } from './resource.js';
import { pageOfItems } from '../store/paging.js';

/**
 * A kind whose items are made in memory, not stored (the price list, discounts, licenses): the deployment's
 * catalogue, read per request. Declared as data — where the items come from, how each filter reads an
 * item, how one is found by id and shown — and served by the generic routes with the one paging rule.
 */
export interface ListKindDecl<Item> extends Omit<CollectionDecl, 'shape' | 'service'> {
  /** The items in list order, and values the list answer carries beside them (`wire.listBeside`). */
  items(ctx: Ctx): Promise<{ items: readonly Item[]; beside?: Record<string, unknown> }> | { items: readonly Item[]; beside?: Record<string, unknown> };
  /** How each declared filter reads an item (comma = any of the values; a repeated filter: every group must match). */
  filterValues?: Record<string, (item: Item) => string>;
  /** An item's id for `GET /<kind>/<id>/`; absent: no item is found by id (404). */
  idOf?: (item: Item) => string;
  present(item: Item): Record<string, unknown>;
  /** Writes the kind serves besides the list and detail (the subscription calculator's quotes: `create`). */
  service?: Omit<CollectionService, 'list' | 'get'>;
}

export function listKind<Item>(d: ListKindDecl<Item>): CollectionDecl {
  const { items, filterValues = {}, idOf, present, service, ...rest } = d;
  const matches = (item: Item, q: ListQuery): boolean =>
    [...q.filters].every(([name, groups]) => {
      const read = filterValues[name];
      return !read || groups.every((g) => g.includes(read(item)));
    });
  return {
    ...rest,
    shape: 'collection',
    service: {
      ...service,
      async list(ctx: Ctx, q: ListQuery): Promise<ListResult> {
        const made = await items(ctx);
        const { rows, total } = pageOfItems(
          made.items.filter((i) => matches(i, q)),
          q.limit,
          q.offset,
        );
        return { total, objects: rows.map(present), ...(made.beside ? { extra: made.beside } : {}) };
      },
      async get(ctx: Ctx, id: string): Promise<Record<string, unknown>> {
        const found = idOf ? (await items(ctx)).items.find((i) => idOf(i) === id) : undefined;
        if (found === undefined) throw notFound(id);
        return present(found);
      },
    },
  };
}
