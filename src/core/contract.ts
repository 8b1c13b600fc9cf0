/**
 * JSON Schemas (2020-12, the OpenAPI 3.1 dialect) of what a kind answers and accepts, read from its
 * declaration: the same fields that drive validation, `schema/` and projections. http/openapi.ts puts them
 * into the OpenAPI document; nothing here is written by hand per kind.
 *
 * Answers differ from requests in known ways, each stated once below: money is a decimal string (requests may
 * give numbers), related objects come back as `{resource_uri, uuid}` references (requests may give a uuid
 * string), and a full object carries every declared key (a `fields=` projection carries any subset).
 */
import type { TSchema } from 'typebox';
import type { Field } from './fields.js';
import type { ActionDecl, CollectionDecl, ResourceDecl } from './resource.js';

export type JsonSchema = Record<string, unknown>;

/** Plain JSON of a TypeBox schema (its symbol-keyed bookkeeping dropped). */
export const plain = (schema: TSchema | JsonSchema): JsonSchema => JSON.parse(JSON.stringify(schema)) as JsonSchema;

/** Where a kind's components live in the document (`#/components/schemas/<name>`). */
export const componentRef = (name: string): JsonSchema => ({ $ref: `#/components/schemas/${name}` });

/** A decimal as answers print it: an exact string, never a float (zero keeps Python's exponent: `0E-16`). */
export const DECIMAL_STRING: JsonSchema = { type: 'string', pattern: '^-?\\d+(\\.\\d+)?([eE][+-]?\\d+)?$' };

/** A reference to another object as answers print it; nested resources may carry more keys (owner, res_type). */
export const REFERENCE: JsonSchema = {
  type: 'object',
  properties: { resource_uri: { type: ['string', 'null'] }, uuid: { type: 'string' } },
  required: ['uuid'],
};

const nullable = (schema: JsonSchema, field: Field): JsonSchema => (field.nullable ? { anyOf: [schema, { type: 'null' }] } : schema);

/** The value a field shows in answers. */
export function fieldOutput(field: Field): JsonSchema {
  if (field.output) return plain(field.output);
  const description = field.help;
  const base = ((): JsonSchema => {
    switch (field.type) {
      case 'string':
        return field.choices ? { type: 'string', enum: [...field.choices] } : { type: 'string' };
      case 'integer':
        return { type: 'integer' };
      case 'boolean':
        return { type: 'boolean' };
      case 'decimal':
        return DECIMAL_STRING;
      case 'datetime':
        return { type: 'string' };
      case 'dict':
        return { type: 'object', additionalProperties: { type: ['string', 'number', 'boolean', 'null'] } };
      case 'object':
        return { type: 'object' };
      case 'list':
        return { type: 'array', items: itemsOf(field) };
      case 'related':
        // One reference, or a list of them (related-many: the items' own request shape, answered as references
        // or the nested objects).
        return isList(field) ? { type: 'array', items: relatedItem(field) } : REFERENCE;
    }
  })();
  return { ...nullable(base, field), description };
}

function isList(field: Field): boolean {
  const s = plain(field.schema);
  const inner = Array.isArray(s.anyOf) ? (s.anyOf as JsonSchema[]).find((x) => x.type !== 'null') : s;
  return inner?.type === 'array';
}

function itemsOf(field: Field): JsonSchema {
  const s = plain(field.schema);
  const arr = Array.isArray(s.anyOf) ? (s.anyOf as JsonSchema[]).find((x) => x.type === 'array') : s;
  return (arr?.items as JsonSchema | undefined) ?? {};
}

/** An item of a related list: an object (reference or nested object) unless the declaration says otherwise. */
function relatedItem(field: Field): JsonSchema {
  const items = itemsOf(field);
  return Object.keys(items).length ? { anyOf: [REFERENCE, items] } : {};
}

/** The full object of a kind: every declared key, nothing else. A kind declaring no fields answers a free object. */
export function objectSchema(decl: ResourceDecl, keys?: readonly string[], opts: { allOptional?: boolean } = {}): JsonSchema {
  const names = (keys ?? Object.keys(decl.fields)).filter((k) => decl.fields[k]);
  if (!names.length) return { type: 'object' };
  const properties: Record<string, JsonSchema> = {};
  for (const name of names) properties[name] = fieldOutput(decl.fields[name]);
  const required = opts.allOptional ? [] : names.filter((n) => !decl.fields[n].mayBeAbsent);
  return { type: 'object', properties, ...(required.length ? { required } : {}), additionalProperties: false };
}

/** What a create or update accepts: the writable fields' request shapes (read-only keys sent back are ignored). */
export function inputSchema(decl: ResourceDecl, forCreate: boolean): JsonSchema {
  const properties: Record<string, JsonSchema> = {};
  const required: string[] = [];
  for (const [name, field] of Object.entries(decl.fields)) {
    properties[name] = { ...plain(field.schema), description: field.help, ...(field.readonly ? { readOnly: true } : {}) };
    if (forCreate && field.required && !field.readonly && field.default === undefined) required.push(name);
  }
  return { type: 'object', properties, ...(required.length ? { required } : {}) };
}

/** The list envelope every list answers. */
export function listEnvelope(item: JsonSchema): JsonSchema {
  return {
    type: 'object',
    properties: { meta: componentRef('ListMeta'), objects: { type: 'array', items: item } },
    required: ['meta', 'objects'],
    additionalProperties: false,
  };
}

/** Filters a list accepts: the printed ones and the unlisted ones, each a query parameter. */
export function filterNames(decl: CollectionDecl): string[] {
  return [...Object.keys(decl.filtering), ...(decl.unlistedFilters ?? [])];
}

/** `{action, result: "success", uuid}` and what the action adds (a console URL, the job): CloudSigma's action answer. */
export const ACTION_RESULT: JsonSchema = {
  type: 'object',
  properties: { action: { type: 'string' }, result: { const: 'success' }, uuid: { type: 'string' } },
  required: ['action', 'result', 'uuid'],
};

/** The answer an action declares, as a schema (`{kind}` → that kind's full object). */
export function actionAnswer(action: ActionDecl): JsonSchema {
  const a = action.answer;
  if (!a) return { type: 'object', description: 'Not declared by the action.' };
  if ('object' in a) return componentRef(a.object);
  if ('objects' in a) return { type: 'object', properties: { objects: { type: 'array', items: componentRef(a.objects) } }, required: ['objects'] };
  return plain(a.schema);
}
