import type { Ctx } from '../../core/context.js';
import type { Obj } from '../../core/input.js';
import type { CollectionDecl } from '../../core/resource.js';

/**
 * `GET /<kind>/availability_groups/` and `…/availability_groups/<uuid>/` (reference §5.1, §6.1): the
 * caller's objects grouped by the simulated host or storage node they share (`services.sim.placement`), as the
 * recorded answers have them: bare lists of uuids, `[[uuid, uuid], [uuid]]` and `[uuid, …]`.
 * Only objects that are on a host count (running servers; every drive); one that is not answers `[]`.
 */
export function availabilityGroups(opts: {
  /** Uuids of the caller's objects that are placed. */
  members(ctx: Ctx): Promise<string[]>;
  /** The object as the caller may see it (404 otherwise). */
  get(ctx: Ctx, uuid: string): Promise<Obj>;
  /** Whether a visible object is on a host now. */
  placed(obj: Obj): boolean;
}): NonNullable<CollectionDecl['collectionViews']>[string] {
  return {
    async all(ctx) {
      return ctx.sim.placement.groupsOf(ctx.store.db, await opts.members(ctx));
    },
    async of(ctx, uuid) {
      const obj = await opts.get(ctx, uuid);
      if (!opts.placed(obj)) return [];
      const own = obj.uuid as string;
      const members = await opts.members(ctx);
      // An object shared with the caller groups with the caller's own.
      return ctx.sim.placement.groupOf(ctx.store.db, own, members.includes(own) ? members : [...members, own]);
    },
  };
}
