import { ApiError, validation } from './errors.js';
import { defaultOf, type Field } from './fields.js';

export type Obj = Record<string, unknown>;

export const isPlainObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Create bodies come as `{objects:[…]}`, a bare array, or one object; all become a list of objects. */
export function createItems(body: unknown): Obj[] {
  let items: unknown;
  if (Array.isArray(body)) items = body;
  else if (isPlainObject(body) && Array.isArray(body.objects)) items = body.objects;
  else if (isPlainObject(body)) items = [body];
  else throw validation(null, 'Request body must be an object, a list of objects or {"objects": [...]}');
  const list = items as unknown[];
  if (list.length === 0) throw validation('objects', 'At least one object is required');
  list.forEach((item, i) => {
    if (!isPlainObject(item)) throw validation('objects', `Item ${i} is not an object`);
  });
  return list as Obj[];
}

/** A single-object body (PUT, actions): absent or null counts as `{}`. */
export function objectBody(body: unknown): Obj {
  if (body === undefined || body === null) return {};
  if (!isPlainObject(body)) throw validation(null, 'Request body must be an object');
  return body;
}

function describe(field: Field): string {
  if (field.choices) return `Value must be one of: ${field.choices.join(', ')}`;
  switch (field.type) {
    case 'integer':
      return 'Value must be an integer within the allowed range';
    case 'boolean':
      return 'Value must be a boolean';
    case 'dict':
      return 'Value must be a dictionary with keys of at most 32 characters and scalar values';
    case 'decimal':
      return 'Value must be a decimal number';
    case 'list':
    case 'related':
      return 'Value has the wrong shape';
    default:
      return 'Value must be a string of the allowed length';
  }
}

/** Integers sent as numeric strings ("1024") are accepted, as the real service accepts them. */
function coerce(field: Field, value: unknown): unknown {
  if (field.type === 'integer' && typeof value === 'string' && /^\s*[+-]?\d+\s*$/.test(value)) return Number(value);
  return value;
}

/**
 * Validate the writable fields of one request object against a declaration.
 * Unknown and read-only keys are ignored (clients PUT whole objects back); a null for a field that is not
 * nullable means "not given". On create, defaults fill what is absent and required fields must be present.
 * Present is enough: `""` is a value like any other (the real service creates drives and servers named ""), and
 * only a kind's own rules (choices, an e-mail or URL check) refuse it.
 */
export function validateFields(fields: Record<string, Field>, input: Obj, mode: 'create' | 'update'): Obj {
  const out: Obj = {};
  for (const [name, field] of Object.entries(fields)) {
    if (field.readonly) continue;
    let value = Object.prototype.hasOwnProperty.call(input, name) ? input[name] : undefined;
    if (value === null && !field.nullable) value = undefined;
    if (value === undefined) {
      if (mode === 'create') {
        if (field.required) throw validation(name, 'This field is required');
        if (field.default !== undefined) out[name] = defaultOf(field);
      }
      continue;
    }
    value = coerce(field, value);
    if (!field.check(value)) throw validation(name, describe(field));
    out[name] = value;
  }
  return out;
}

/** Related inputs: a uuid string, a resource URI, `{uuid}` or `{resource_uri, uuid}` all name the same object. */
export function relatedId(value: unknown, point: string): string {
  if (typeof value === 'string') {
    const m = /\/api\/2\.0\/[^/]+\/([^/]+)\/?$/.exec(value);
    return m ? m[1] : value;
  }
  if (isPlainObject(value)) {
    if (typeof value.uuid === 'string') return value.uuid;
    if (typeof value.resource_uri === 'string' || isPlainObject(value.resource_uri)) return relatedId(value.resource_uri, point);
  }
  throw new ApiError('validation', 'Expected a uuid, a resource URI or an object with uuid', point);
}

const AVOID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(,[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})*$/i;

/** `avoid=<uuid>[,<uuid>…]`, the servers or drives a placement should keep away from: the uuids, or 400. */
export function avoidList(raw: string | undefined): string[] {
  if (raw === undefined || raw === '') return [];
  if (!AVOID.test(raw)) throw validation('avoid', 'avoid must be a uuid or a comma-separated list of uuids');
  return raw.toLowerCase().split(',');
}
