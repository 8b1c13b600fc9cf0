import Type, { type TSchema } from 'typebox';
import { Compile } from 'typebox/compile';

/** tastypie field types, as the `schema/` endpoints print them. */
export type FieldType = 'string' | 'integer' | 'boolean' | 'decimal' | 'datetime' | 'dict' | 'list' | 'related' | 'object';

/** Sentinel tastypie prints when a field has no default. */
export const NO_DEFAULT = 'No default provided.';

export interface Field {
  type: FieldType;
  /** JSON Schema (TypeBox) of an accepted value; one source for validation, `schema/` and OpenAPI. */
  schema: TSchema;
  check: (value: unknown) => boolean;
  /** What `schema/` prints as the default when it differs from `default` (tastypie hides computed ones). */
  schemaDefault?: unknown;
  /** Value a create takes when the field is absent; a function for fresh objects/lists. */
  default?: unknown | (() => unknown);
  required: boolean;
  readonly: boolean;
  nullable: boolean;
  unique: boolean;
  /**
   * tastypie's `blank`, printed by model-flavour `schema/` and nothing else. In tastypie it says whether the key may
   * be omitted, not whether `""` is refused: the recorded schemas pair `blank: false` with a default of `""` (acls
   * `name`, the profile's strings), so validation never refuses `""` on its account (core/input.ts).
   */
  blank: boolean;
  choices?: readonly string[];
  help: string;
  /** Integer fields: also accept numeric strings ("1024") as the real service does. */
  numericStrings?: boolean;
  /** Sub-fields of the items `schema/` describes under `fields` (a drive's `licenses`); documentation only. */
  fields?: Record<string, Field>;
  /** The value as answers show it, where the type's usual answer shape (core/contract.ts) does not fit. */
  output?: TSchema;
  /** A full object may leave the key out (a value that is only there when given). */
  mayBeAbsent?: boolean;
}

/** tastypie's stock help texts, reproduced because clients and the golden schemas show them. */
const HELP: Record<FieldType, string> = {
  string: 'Unicode string data. Ex: "Hello World"',
  integer: 'Integer data. Ex: 2673',
  boolean: 'Boolean data. Ex: True',
  decimal: 'Fixed precision numeric data. Ex: 26.73',
  datetime: 'A date & time as a string. Ex: "2010-11-10T03:07:43"',
  dict: "A dictionary of data. Ex: {'price': 26.73, 'name': 'Daniel'}",
  list: "A list of data. Ex: ['abc', 26.73, 8]",
  related: 'A single related resource. Can be either a URI or set of nested resource data.',
  object: "A dictionary of data. Ex: {'price': 26.73, 'name': 'Daniel'}",
};
export const HELP_RELATED_MANY = 'Many related resources. Can be either a list of URIs or list of individually nested resource data.';

type Opts = Partial<Omit<Field, 'type' | 'schema' | 'check'>>;

function make(type: FieldType, schema: TSchema, opts: Opts): Field {
  const nullable = opts.nullable ?? false;
  const accepted = nullable ? Type.Union([schema, Type.Null()]) : schema;
  // Compiled on the first check, not at start-up: ~200 fields cost ~20 ms and their code to compile, and
  // a process validates only the kinds it is asked to write.
  let validator: ReturnType<typeof Compile<TSchema>> | undefined;
  return {
    type,
    schema: accepted,
    check: (v) => (validator ??= Compile(accepted)).Check(v),
    required: false,
    readonly: false,
    unique: false,
    blank: false,
    help: HELP[type],
    ...opts,
    nullable,
  };
}

/** How answers show a subscription: numbered, not a uuid (`{id, resource_uri}`), or null. */
export const SUBSCRIPTION_REF = Type.Union([Type.Object({ id: Type.Integer(), resource_uri: Type.String() }, { additionalProperties: false }), Type.Null()]);

/** Field builders used by resource declarations. */
export const f = {
  string: (opts: Opts & { maxLength?: number } = {}) => {
    const { maxLength, ...rest } = opts;
    const schema = rest.choices ? Type.Union(rest.choices.map((c) => Type.Literal(c))) : Type.String(maxLength ? { maxLength } : {});
    return make('string', schema, rest);
  },
  integer: (opts: Opts & { minimum?: number; maximum?: number } = {}) => {
    const { minimum, maximum, ...rest } = opts;
    return make('integer', Type.Integer({ minimum, maximum }), rest);
  },
  boolean: (opts: Opts = {}) => make('boolean', Type.Boolean(), opts),
  /** Money and other exact numbers: decimal strings (numbers accepted on input, never floats on output). */
  decimal: (opts: Opts = {}) =>
    make('decimal', Type.Union([Type.String({ maxLength: 64, pattern: '^[+-]?(\\d+(\\.\\d*)?|\\.\\d+)([eE][+-]?\\d{1,2})?$' }), Type.Number()]), opts),
  datetime: (opts: Opts = {}) => make('datetime', Type.String(), opts),
  /** Free-form user data: keys up to 32 characters, values strings (numbers and booleans are kept). */
  dict: (opts: Opts = {}) =>
    make(
      'dict',
      Type.Record(Type.String(), Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Null()]), {
        propertyNames: { maxLength: 32 },
      } as Record<string, unknown>),
      { default: () => ({}), schemaDefault: NO_DEFAULT, ...opts },
    ),
  list: (item: TSchema, opts: Opts = {}) => make('list', Type.Array(item), { default: () => [], schemaDefault: NO_DEFAULT, ...opts }),
  /** A reference to many objects; requests give uuid strings, `{uuid}` or `{resource_uri, uuid}` items. */
  relatedMany: (opts: Opts = {}) =>
    make('related', Type.Array(Type.Union([Type.String(), Type.Object({ uuid: Type.Optional(Type.String()), resource_uri: Type.Optional(Type.String()) })])), {
      default: () => [],
      schemaDefault: NO_DEFAULT,
      help: HELP_RELATED_MANY,
      ...opts,
    }),
  /** A related list whose request items have their own shape (ACL rules `{permission}`). */
  relatedItems: (item: TSchema, opts: Opts = {}) =>
    make('related', Type.Array(item), { default: () => [], schemaDefault: NO_DEFAULT, help: HELP_RELATED_MANY, ...opts }),
  related: (opts: Opts = {}) =>
    make('related', Type.Union([Type.String(), Type.Object({ uuid: Type.Optional(Type.String()), resource_uri: Type.Optional(Type.String()) })]), opts),
  object: (opts: Opts = {}) => make('object', Type.Record(Type.String(), Type.Unknown()), opts),
};

export const defaultOf = (field: Field): unknown => (typeof field.default === 'function' ? (field.default as () => unknown)() : field.default);
