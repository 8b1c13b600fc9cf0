/**
 * The OpenAPI 3.1 document of this service, served at `GET /api/2.0/openapi.json` (public, never rate
 * limited, like the API index: a contract is no secret, and clients read it before they have credentials).
 *
 * Nothing in it is written by hand: every route registered through registerPath (or documentPath) brings its
 * own contract (routes.ts `OperationDoc`), and the kinds' schemas come from their declarations
 * (core/contract.ts). Conventions that apply below every route are added here once: the error array per
 * status, `?format=json|xml` (XML answers carry the same data), OPTIONS with the allowed methods.
 * Built on the first request after all routes are in, then served as the same bytes.
 */
import type { FastifyInstance } from 'fastify';
import { ApiError, STATUS_BY_TYPE, type ErrorType } from '../core/errors.js';
import { componentRef, DECIMAL_STRING, inputSchema, objectSchema, plain, REFERENCE } from '../core/contract.js';
import type { ResourceDecl } from '../core/resource.js';
import { VERSION } from '../version.js';
import { documentedPaths, registerPath, type HttpMethod, type JsonSchema, type OperationDoc } from './routes.js';
import { API_BASE } from './resource-routes.js';

export const OPENAPI_PATH = `${API_BASE}openapi.json`;

/** Error statuses any operation may answer (the conventions below every route: validation, auth, limits, faults). */
const ERROR_STATUSES = [...new Set(Object.values(STATUS_BY_TYPE))].sort();

/** `error_type` values a status answers with, as the wire shows them (errors.ts maps kinds onto the documented vocabulary). */
function wireTypesOf(status: number): string[] {
  const types = (Object.keys(STATUS_BY_TYPE) as ErrorType[]).filter((t) => STATUS_BY_TYPE[t] === status);
  return [...new Set(types.map((t) => new ApiError(t, '').toWire().error_type))].sort();
}

const errorSchema = (status: number): JsonSchema => ({
  type: 'array',
  minItems: 1,
  items: {
    type: 'object',
    properties: {
      error_type: { enum: wireTypesOf(status) },
      error_point: { type: ['string', 'null'] },
      error_message: { type: 'string' },
    },
    required: ['error_type', 'error_point', 'error_message'],
    additionalProperties: false,
  },
});

/** `/api/2.0/servers/:uuid/` -> `/api/2.0/servers/{uuid}/` and its path parameters. */
function openApiPath(url: string): { path: string; params: string[] } {
  const params: string[] = [];
  const path = url.replace(/:([A-Za-z_]+)/g, (_m, name: string) => {
    params.push(name);
    return `{${name}}`;
  });
  return { path, params };
}

const FORMAT_PARAM = {
  name: 'format',
  in: 'query',
  required: false,
  description: 'Answer as JSON (default) or XML; wins over Accept. XML answers carry the same data as the JSON schema describes.',
  schema: { enum: ['json', 'xml'] },
};

function content(schema: JsonSchema): JsonSchema {
  return { 'application/json': { schema }, 'application/xml': { schema: { type: 'string', description: 'The same data as XML (tastypie layout).' } } };
}

function operation(doc: OperationDoc, params: string[], isPublic: boolean): JsonSchema {
  const parameters: JsonSchema[] = [
    ...params.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
    FORMAT_PARAM,
    ...Object.entries(doc.query ?? {}).map(([name, description]) => ({ name, in: 'query', required: false, description, schema: { type: 'string' } })),
  ];
  const responses: Record<string, JsonSchema> = {};
  for (const [status, answer] of Object.entries(doc.responses)) {
    if (answer === null) responses[status] = { description: 'No content.' };
    else if (typeof answer.contentType === 'string') responses[status] = { description: 'Success.', content: { [answer.contentType]: {} } };
    else {
      const r: JsonSchema = { description: 'Success.', content: content(answer) };
      // Not an OpenAPI keyword: the schema that applies instead when `fields=` cut the objects (test/helpers/contract.ts).
      if (doc.projected) r['x-stratus-fields'] = doc.projected;
      responses[status] = r;
    }
  }
  for (const status of ERROR_STATUSES) responses[String(status)] ??= { $ref: `#/components/responses/Error${status}` };
  return {
    summary: doc.summary,
    ...(isPublic ? { security: [] } : {}),
    parameters,
    ...(doc.body
      ? { requestBody: { required: false, content: { 'application/json': { schema: doc.body }, 'application/xml': { schema: { type: 'string' } } } } }
      : {}),
    responses,
  };
}

/** The document for the routes registered on `app` and the kinds it serves. */
export function openApiDocument(app: FastifyInstance, kinds: readonly ResourceDecl[]): JsonSchema {
  const paths: Record<string, JsonSchema> = {};
  for (const { url, public: isPublic, doc } of documentedPaths(app)) {
    if (!doc) continue;
    const { path, params } = openApiPath(url);
    const item: JsonSchema = (paths[path] ??= {});
    for (const [method, op] of Object.entries(doc) as [HttpMethod, OperationDoc][]) item[method.toLowerCase()] = operation(op, params, isPublic);
    item.options = {
      summary: 'The methods this URL allows (also in the Allow header).',
      security: [],
      parameters: params.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
      responses: { '200': { description: 'Allowed methods, comma-separated.', content: { 'text/plain': { schema: { type: 'string' } } } } },
    };
  }
  const schemas: Record<string, JsonSchema> = {
    ListMeta: {
      type: 'object',
      properties: { limit: { type: 'integer' }, offset: { type: 'integer' }, total_count: { type: 'integer' } },
      required: ['limit', 'offset', 'total_count'],
      additionalProperties: false,
    },
    Reference: REFERENCE,
    Decimal: DECIMAL_STRING,
  };
  const errorResponses: Record<string, JsonSchema> = {};
  for (const status of ERROR_STATUSES) {
    schemas[`Error${status}`] = errorSchema(status);
    errorResponses[`Error${status}`] = { description: 'Error in the API format.', content: content(componentRef(`Error${status}`)) };
  }
  for (const decl of kinds) {
    schemas[decl.kind] = objectSchema(decl);
    schemas[`${decl.kind}_input`] = inputSchema(decl, false);
    schemas[`${decl.kind}_create`] = inputSchema(decl, true);
    schemas[`${decl.kind}_fields`] = objectSchema(decl, undefined, { allOptional: true });
    if (decl.shape !== 'collection') continue;
    const created = decl.wire?.createdKeys;
    const updated = decl.wire?.updatedKeys;
    if (created) {
      const full = schemas[decl.kind];
      const extra = Object.fromEntries(Object.entries(created).map(([k, s]) => [k, plain(s)]));
      schemas[`${decl.kind}_created`] = {
        ...full,
        properties: { ...(full.properties as object), ...extra },
        required: [...(full.required as string[]), ...Object.keys(extra)],
      };
    }
    if (updated) {
      const full = schemas[decl.kind];
      const extra = Object.fromEntries(Object.entries(updated).map(([k, s]) => [k, plain(s)]));
      schemas[`${decl.kind}_updated`] = { ...full, properties: { ...(full.properties as object), ...extra } };
    }
    const short = objectSchema(decl, decl.listFields);
    if (decl.listFields) schemas[`${decl.kind}_short`] = short;
    // A tag's member lists nest `resource_uri` as a reference (resource-routes.ts taggedPaths).
    if (decl.taggable) schemas[`${decl.kind}_tagged`] = { ...short, properties: { ...(short.properties as object), resource_uri: componentRef('Reference') } };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Stratus: CloudSigma API 2.0',
      version: VERSION,
      description:
        'Generated from the resource declarations and the routes. Lists answer {meta:{limit,offset,total_count}, objects}; ' +
        'money is a decimal string, sizes are integers; fields= projects objects to the keys named (x-stratus-fields); ' +
        'errors are an array of {error_type, error_point, error_message}.',
    },
    servers: [{ url: '/' }],
    security: [{ basic: [] }, { digest: [] }, { session: [] }],
    paths,
    components: {
      schemas,
      responses: errorResponses,
      securitySchemes: {
        basic: { type: 'http', scheme: 'basic' },
        digest: { type: 'http', scheme: 'digest' },
        session: { type: 'apiKey', in: 'cookie', name: 'sessionid' },
      },
    },
  };
}

/** Serves the document; call after every other route is registered (it reads them on the first request). */
export function registerOpenApi(app: FastifyInstance, kinds: readonly ResourceDecl[]): void {
  let body: JsonSchema | undefined;
  const noAuth = async () => {
    throw new Error('never called: the document is public');
  };
  registerPath(
    app,
    {
      url: OPENAPI_PATH,
      public: true,
      methods: { GET: async () => ({ status: 200, body: (body ??= openApiDocument(app, kinds)) }) },
      doc: { GET: { summary: 'This OpenAPI 3.1 document.', responses: { 200: { type: 'object', required: ['openapi', 'paths'] } } } },
    },
    noAuth,
    null,
  );
}
