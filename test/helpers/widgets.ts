import { ACTION_RESULT } from '../../src/core/contract.js';
import { f } from '../../src/core/fields.js';
import type { CollectionDecl } from '../../src/core/resource.js';
import { storedDecl } from '../../src/core/stored.js';
import { registry } from '../../src/registry.js';

/**
 * A test-only resource kind declared exactly as real kinds are: it exercises the generic machinery
 * (short list form, taggable `tags`, every filter, coercion, choices) before the kinds that need
 * the simulator exist.
 */
const fields = {
  color: f.string({ default: 'blue', choices: ['blue', 'red', 'green'], help: 'Widget colour' }),
  enabled: f.boolean({ default: true }),
  meta: f.dict(),
  name: f.string({ required: true, maxLength: 64, help: 'Human readable name of widget' }),
  owner: f.related({ readonly: true }),
  resource_uri: f.string({ readonly: true }),
  size: f.integer({ required: true, minimum: 1, maximum: 1_000_000, numericStrings: true }),
  tags: f.relatedMany(),
  uuid: f.string({ readonly: true }),
};

export const widgets: CollectionDecl = storedDecl({
  kind: 'widgets',
  flavour: 'custom',
  fields,
  listMethods: ['get', 'post'],
  detailMethods: ['get', 'put', 'delete'],
  listFields: ['name', 'owner', 'resource_uri', 'uuid'],
  filtering: { name: 'exact', name__contains: 'exact', tag: 'exact', tag__name: 'exact', uuid: 'exact' },
  ordering: ['uuid', 'name'],
  permissions: ['LIST', 'EDIT', 'ATTACH', 'DELETE'],
  taggable: true,
  actions: {
    // An action as servers and drives declare theirs: the generic route checks the permission first.
    poke: { permission: 'ATTACH', async: true, answer: { schema: ACTION_RESULT }, run: async (_ctx, uuid) => ({ action: 'poke', result: 'success', uuid }) },
  },
});

export const withWidgets = [...registry, widgets];
