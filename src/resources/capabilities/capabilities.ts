import type { SingletonDecl } from '../../core/resource.js';

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
      return structuredClone(ctx.config.capabilities);
    },
  },
};
