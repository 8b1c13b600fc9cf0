import type { Ctx } from '../../core/context.js';
import type { CollectionService, ListQuery } from '../../core/resource.js';
import type { StoredCollection } from '../../core/stored.js';

/**
 * A kind whose writes answer as the recorded virtual-router exchanges do (202 with a job) in front of the
 * generic stored collection: reads and permission checks are the stored collection's own.
 */
export abstract class StoredFront implements CollectionService {
  constructor(readonly stored: StoredCollection) {}

  list(ctx: Ctx, query: ListQuery) {
    return this.stored.list(ctx, query);
  }
  get(ctx: Ctx, uuid: string) {
    return this.stored.get(ctx, uuid);
  }
  authorize(ctx: Ctx, uuid: string, perm: 'LIST' | 'EDIT' | 'DELETE') {
    return this.stored.authorize(ctx, uuid, perm);
  }
}
