import { NO_DEFAULT, type Field } from './fields.js';
import type { ResourceDecl } from './resource.js';

function schemaDefault(field: Field): unknown {
  if (field.schemaDefault !== undefined) return field.schemaDefault;
  if (field.default === undefined) return NO_DEFAULT;
  return typeof field.default === 'function' ? (field.default as () => unknown)() : field.default;
}

function describeField(field: Field, flavour: ResourceDecl['flavour']): Record<string, unknown> {
  const common = { default: schemaDefault(field), help_text: field.help, readonly: field.readonly, type: field.type };
  if (flavour === 'model') return { ...common, blank: field.blank, nullable: field.nullable, unique: field.unique };
  const nested = field.fields && Object.fromEntries(Object.entries(field.fields).map(([k, f]) => [k, describeField(f, flavour)]));
  return { ...common, required: field.required, ...(field.choices ? { choices: [...field.choices] } : {}), ...(nested ? { fields: nested } : {}) };
}

/** `GET /<kind>/schema/` in tastypie's `build_schema` format, generated from the declaration. */
export function buildSchema(decl: ResourceDecl): Record<string, unknown> {
  if (decl.shape === 'singleton' && decl.schemaOverride) return decl.schemaOverride;
  const fields: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(decl.fields)) fields[name] = describeField(field, decl.flavour);
  const out: Record<string, unknown> = {
    allowed_detail_http_methods: decl.detailMethods,
    allowed_list_http_methods: decl.listMethods,
    default_format: 'application/json',
    default_limit: decl.defaultLimit,
    fields,
  };
  if (decl.shape === 'collection') {
    if (Object.keys(decl.filtering).length) out.filtering = decl.filtering;
    if (decl.ordering) out.ordering = decl.ordering;
  }
  return decl.wire?.advertised ? { ...out, ...decl.wire.advertised } : out;
}
