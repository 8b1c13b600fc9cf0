import type { SingletonDecl } from '../../core/resource.js';
import { copyOf, frozenWhole } from '../../core/json.js';

/**
 * The capabilities answer is the same for every request of a configuration: a frozen copy, serialised
 * once (core/json.ts), per configuration object.
 */
const copies = new WeakMap<object, Record<string, unknown>>();
function servedOnce(capabilities: Record<string, unknown>): Record<string, unknown> {
  let copy = copies.get(capabilities);
  if (!copy) copies.set(capabilities, (copy = frozenWhole(structuredClone(capabilities))));
  return copy;
}

/**
 * Location capabilities (reference §12): limits that servers, drives and snapshots are validated against,
 * from config. `snapshots.current` is the caller's own count (kept, one indexed read); the rest is static.
 */
export const capabilities: SingletonDecl = {
  shape: 'singleton',
  kind: 'capabilities',
  flavour: 'custom',
  fields: {},
  defaultLimit: 20,
  listMethods: ['get'],
  detailMethods: ['get'],
  schemaOverride: {
    allowed_methods: ['get'],
    help_text: 'Various API capabilities. Check documentation for reference',
  },
  service: {
    async get(ctx) {
      const answer = servedOnce(ctx.config.capabilities);
      const snapshots = answer.snapshots as Record<string, unknown> | undefined;
      if (!snapshots) return answer;
      const current = await ctx.store.resources.countOf(ctx.store.db, 'snapshots', ctx.caller.uuid);
      if (current === snapshots.current) return answer;
      const mine = copyOf(answer);
      mine.snapshots = { ...snapshots, current };
      return mine;
    },
  },
};
