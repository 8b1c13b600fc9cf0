import type { SingletonDecl } from '../../core/resource.js';
import { frozenWhole } from '../../core/json.js';

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

/** Location capabilities (reference §12): limits that servers and drives are validated against, from config. */
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
      return servedOnce(ctx.config.capabilities);
    },
  },
};
