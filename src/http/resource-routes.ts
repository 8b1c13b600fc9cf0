import type { TSchema } from 'typebox';
import type { Ctx, Services } from '../core/context.js';
import { createItems, objectBody, relatedId } from '../core/input.js';
import { validation } from '../core/errors.js';
import { Outcome, type CollectionDecl, type ResourceDecl, type SingletonDecl } from '../core/resource.js';
import { buildSchema } from '../core/schema.js';
import { fieldsParam, listQuery, project, type RawQuery } from './query.js';
import { actionAnswer, componentRef, filterNames, listEnvelope, plain, type JsonSchema } from '../core/contract.js';
import type { ApiRequest, Handler, OperationDoc, PathSpec } from './routes.js';
import type { Result } from './respond.js';

export const API_BASE = '/api/2.0/';

/** A query parameter given once or repeated: the last value counts. */
const lastValue = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[v.length - 1] : v);

const ok = (body: unknown, root: Result['root'] = 'object'): Result => ({ status: 200, body, root });

/** A list envelope, each object cut to `fields=` if asked, else to the given default projection. */
function envelope(
  query: RawQuery,
  limit: number,
  offset: number,
  total: number,
  objects: Record<string, unknown>[],
  short?: readonly string[],
  extra?: Record<string, unknown>,
  cut = false,
): Result {
  const keys = cut ? undefined : (fieldsParam(query) ?? short);
  return ok({ ...extra, meta: { limit, offset, total_count: total }, objects: keys ? objects.map((o) => project(o, keys)) : objects }, 'response');
}

const PAGING = {
  limit: "Objects per page (0: all); the default is the kind's default_limit.",
  offset: 'Objects to skip.',
  fields: 'Comma-separated keys each object is cut to (x-stratus-fields: any declared key may then be absent).',
};
const FIELDS = { fields: PAGING.fields };
const ref = (decl: ResourceDecl, variant = '') => componentRef(`${decl.kind}${variant}`);
/** A create takes `{objects: [...]}`, a bare list, or one object. */
const createBody = (item: JsonSchema): JsonSchema => ({
  anyOf: [{ type: 'object', properties: { objects: { type: 'array', items: item } }, required: ['objects'] }, { type: 'array', items: item }, item],
});
const objectsOf = (item: JsonSchema): JsonSchema => ({
  type: 'object',
  properties: { objects: { type: 'array', items: item } },
  required: ['objects'],
  additionalProperties: false,
});
/** A write that may only start work (`wire.startsWork`): 202 with the same body where the kind can answer so. */
const answers = (status: number, body: JsonSchema | null, mayAccept: boolean): OperationDoc['responses'] =>
  mayAccept ? { [status]: body, 202: body ?? { type: 'object' } } : { [status]: body };

/** An envelope schema with the keys a kind declares beside it (`wire.listBeside`, `wire.create.beside`). */
function withExtras(schema: JsonSchema, extras: Record<string, TSchema> | undefined): JsonSchema {
  if (!extras) return schema;
  const more = Object.fromEntries(Object.entries(extras).map(([k, s]) => [k, plain(s)]));
  return { ...schema, properties: { ...(schema.properties as object), ...more }, required: [...((schema.required as string[]) ?? []), ...Object.keys(more)] };
}

/** The contract of a list answer: the envelope of full objects, or of the short list form. */
function listDoc(decl: CollectionDecl, summary: string, short: boolean): OperationDoc {
  const filters = Object.fromEntries(
    filterNames(decl).map((n) => [n, `Filter (${String(decl.filtering[n] ?? 'exact')}); repeated: all must match, comma: any.`]),
  );
  return {
    summary,
    query: { ...PAGING, ...filters },
    responses: { 200: withExtras(listEnvelope(short && decl.listFields ? ref(decl, '_short') : ref(decl)), decl.wire?.listBeside) },
    projected: withExtras(listEnvelope(ref(decl, '_fields')), decl.wire?.listBeside),
  };
}

/** The generic routes of one collection kind, driven only by its declaration. */
function collectionPaths(decl: CollectionDecl, ctxOf: (req: ApiRequest) => Ctx): PathSpec[] {
  const base = `${API_BASE}${decl.kind}/`;
  const svc = decl.service;
  const allows = (list: CollectionDecl['listMethods'], m: 'get' | 'post' | 'put' | 'delete') => list.includes(m);
  const filters = { ...decl.filtering, ...Object.fromEntries((decl.unlistedFilters ?? []).map((name) => [name, 'exact'])) };

  const lister =
    (short?: readonly string[]): Handler =>
    async (req) => {
      const q = listQuery(req.query, decl.defaultLimit, filters);
      q.fields = fieldsParam(req.query) ?? short;
      q.json = req.format === 'json';
      const { total, objects, extra, cut } = await svc.list(ctxOf(req), q);
      return envelope(req.query, q.limit, q.offset, total, objects, short, extra, cut);
    };

  const list: PathSpec = { url: base, methods: {}, doc: {} };
  const docs = list.doc!;
  // Kinds whose writes may only start work answer 202 when the service's Outcome says so; the declaration says which.
  const wire = decl.wire ?? {};
  const accepts = wire.startsWork === true;
  const started = (made: unknown): boolean => accepts && made instanceof Outcome && made.info.started === true;
  if (allows(decl.listMethods, 'get')) {
    list.methods.GET = lister(decl.listFields);
    docs.GET = listDoc(decl, `List ${decl.kind}${decl.listFields ? ' (short form)' : ''}`, true);
  }
  if (allows(decl.listMethods, 'post') && svc.create) {
    const create = svc.create.bind(svc);
    list.methods.POST = async (req) => {
      const made = await create(ctxOf(req), createItems(req.body));
      const objects = made instanceof Outcome ? made.value : made;
      const status = started(made) ? 202 : (wire.create?.status ?? 201);
      const headers: Record<string, string> = {};
      const first = objects[0]?.resource_uri;
      if (typeof first === 'string' && status === 201) headers.Location = `${req.origin}${first}`;
      return { status, body: { ...(made instanceof Outcome ? made.info.beside : {}), objects }, root: 'response', headers };
    };
    docs.POST = {
      summary: `Create ${decl.kind}`,
      body: createBody(ref(decl, '_create')),
      responses: answers(wire.create?.status ?? 201, withExtras(objectsOf(ref(decl, wire.createdKeys ? '_created' : '')), wire.create?.beside), accepts),
    };
  }

  if (allows(decl.listMethods, 'put') && svc.updateMany) {
    const updateMany = svc.updateMany.bind(svc);
    list.methods.PUT = async (req) => ({ status: 202, body: { objects: await updateMany(ctxOf(req), createItems(req.body)) }, root: 'response' });
    docs.PUT = {
      summary: `Update several ${decl.kind} (202: the changed objects)`,
      body: createBody(ref(decl, '_input')),
      responses: { 202: objectsOf(ref(decl)) },
    };
  }

  if (allows(decl.listMethods, 'delete') && svc.removeMany) {
    const removeMany = svc.removeMany.bind(svc);
    list.methods.DELETE = async (req) => {
      const items = createItems(req.body);
      await removeMany(
        ctxOf(req),
        items.map((o) => relatedId(o, 'objects')),
      );
      return { status: 204 };
    };
    docs.DELETE = { summary: `Delete several ${decl.kind}`, body: createBody(componentRef('Reference')), responses: { 204: null } };
  }

  const single: PathSpec = { url: `${base}:uuid/`, methods: {}, doc: {} };
  const one = single.doc!;
  if (allows(decl.detailMethods, 'get')) {
    single.methods.GET = async (req) => {
      const fields = fieldsParam(req.query);
      return ok(project(await svc.get(ctxOf(req), req.params.uuid, { json: !fields && req.format === 'json' }), fields));
    };
    one.GET = { summary: `One of ${decl.kind}`, query: FIELDS, responses: { 200: ref(decl) }, projected: ref(decl, '_fields') };
  }
  if (allows(decl.detailMethods, 'put') && svc.update) {
    const update = svc.update.bind(svc);
    single.methods.PUT = async (req) => {
      const updated = await update(ctxOf(req), req.params.uuid, objectBody(req.body));
      if (!(updated instanceof Outcome)) return ok(updated);
      return started(updated) ? { status: 202, body: updated.value, root: 'object' } : ok(updated.value);
    };
    one.PUT = {
      summary: `Update one of ${decl.kind} (partial)`,
      body: ref(decl, '_input'),
      responses: answers(200, ref(decl, wire.updatedKeys ? '_updated' : ''), accepts),
    };
  }
  if (allows(decl.detailMethods, 'delete') && svc.remove) {
    const remove = svc.remove.bind(svc);
    single.methods.DELETE = async (req) => {
      const params = Object.fromEntries((decl.deleteParams ?? []).map((p) => [p, lastValue(req.query[p])]));
      const removed = await remove(ctxOf(req), req.params.uuid, params);
      return started(removed) ? { status: 202, body: (removed as Outcome<unknown>).value, root: 'object' } : { status: 204 };
    };
    one.DELETE = { summary: `Delete one of ${decl.kind}`, responses: answers(204, null, accepts) };
  }

  // A kind never shared (no ACL permissions: tags) is made of the caller's own rows alone.
  const scoped = decl.answersFromVisibleOwners ? ({ answerScope: decl.permissions ? 'visible-owners' : 'own' } as const) : {};
  const paths: PathSpec[] = [
    { ...list, ...scoped },
    { url: `${base}detail/`, methods: { GET: lister() }, doc: { GET: listDoc(decl, `List ${decl.kind} (full objects)`, false) }, ...scoped },
    schemaPath(decl, base),
    // One object: its row, and what decides who sees it and how (sharing, tags).
    decl.answersFromVisibleOwners ? { ...single, answerScope: 'object' } : single,
  ];
  // Collection views (`availability_groups/`) before `:uuid/`: a static segment wins in the router anyway.
  for (const [name, view] of Object.entries(decl.collectionViews ?? {}))
    paths.push(
      {
        url: `${base}${name}/`,
        methods: { GET: async (req) => ({ status: 200, body: await view.all(ctxOf(req)) }) },
        doc: {
          GET: {
            summary: `The ${name} of the caller's ${decl.kind}: groups of uuids`,
            responses: { 200: { type: 'array', items: { type: 'array', items: { type: 'string' } } } },
          },
        },
      },
      {
        url: `${base}${name}/:uuid/`,
        methods: { GET: async (req) => ({ status: 200, body: await view.of(ctxOf(req), req.params.uuid) }) },
        doc: { GET: { summary: `The ${name} group one of ${decl.kind} belongs to`, responses: { 200: { type: 'array', items: { type: 'string' } } } } },
      },
    );
  for (const [name, view] of Object.entries(decl.views ?? {}))
    paths.push({
      url: `${base}:uuid/${name}/`,
      methods: { GET: async (req) => ok(await view(ctxOf(req), req.params.uuid)) },
      doc: {
        GET: {
          summary: `The ${name} of one of ${decl.kind}`,
          responses: { 200: wire.views?.[name] ? plain(wire.views[name]) : { type: 'object' } },
        },
      },
    });
  const actions = decl.actions;
  if (actions && svc.authorize) {
    const authorize = svc.authorize.bind(svc);
    paths.push({
      url: `${base}:uuid/action/`,
      methods: {
        POST: async (req) => {
          const name = lastValue(req.query.do);
          // Own keys only: `constructor`, `__proto__`, `toString` are no actions.
          const action = name !== undefined && Object.hasOwn(actions, name) ? actions[name] : undefined;
          if (!action) throw validation('do', `Unknown action ${JSON.stringify(name ?? null)}; allowed: ${Object.keys(actions).join(', ')}`);
          const ctx = ctxOf(req);
          await authorize(ctx, req.params.uuid, action.permission);
          const params = Object.fromEntries((action.params ?? []).map((p) => [p, lastValue(req.query[p])]));
          const body = await action.run(ctx, req.params.uuid, objectBody(req.body), params);
          return { status: action.async ? 202 : 200, body, root: 'object' };
        },
      },
      doc: { POST: actionDoc(decl, actions) },
    });
  }
  return paths;
}

/** `POST …/action/?do=`: one operation for all the kind's actions; each declares its status (async: 202) and answer. */
function actionDoc(decl: CollectionDecl, actions: NonNullable<CollectionDecl['actions']>): OperationDoc {
  const byStatus = new Map<number, JsonSchema[]>();
  for (const action of Object.values(actions)) {
    const status = action.async ? 202 : 200;
    byStatus.set(status, [...(byStatus.get(status) ?? []), actionAnswer(action)]);
  }
  const names = Object.keys(actions);
  const params = [...new Set(Object.values(actions).flatMap((a) => a.params ?? []))];
  return {
    summary: `Actions on one of ${decl.kind}: ${names.join(', ')}`,
    query: { do: `The action: ${names.join(', ')}.`, ...Object.fromEntries(params.map((p) => [p, 'Action parameter.'])) },
    body: { type: ['object', 'null'] },
    responses: Object.fromEntries([...byStatus].map(([status, list]) => [status, list.length === 1 ? list[0] : { anyOf: dedupe(list) }])),
  };
}

const dedupe = (list: JsonSchema[]): JsonSchema[] => [...new Map(list.map((s) => [JSON.stringify(s), s])).values()];

/** `GET /<kind>/schema/`: tastypie's description of the kind (core/schema.ts). */
function schemaPath(decl: ResourceDecl, base: string): PathSpec {
  return {
    url: `${base}schema/`,
    methods: { GET: async () => ok(buildSchema(decl), 'response') },
    doc: { GET: { summary: `The tastypie schema of ${decl.kind}`, responses: { 200: { type: 'object' } } } },
  };
}

/** A single-object kind: GET (and PUT) on the kind's URL, plus its schema. */
function singletonPaths(decl: SingletonDecl, ctxOf: (req: ApiRequest) => Ctx): PathSpec[] {
  const base = `${API_BASE}${decl.kind}/`;
  const root = decl.envelope ? 'response' : 'object';
  const main: PathSpec = {
    url: base,
    methods: { GET: async (req) => ok(project(await decl.service.get(ctxOf(req)), fieldsParam(req.query)), root) },
    doc: { GET: { summary: `The caller's ${decl.kind}`, query: FIELDS, responses: { 200: ref(decl) }, projected: ref(decl, '_fields') } },
  };
  const update = decl.service.update;
  if (update) {
    main.methods.PUT = async (req) => ok(await update(ctxOf(req), objectBody(req.body)));
    main.doc!.PUT = { summary: `Update the caller's ${decl.kind} (partial)`, body: ref(decl, '_input'), responses: { 200: ref(decl) } };
  }
  return [main, schemaPath(decl, base)];
}

/**
 * `GET /tags/<uuid>/<kind>/`: the caller's objects of a taggable kind that carry
 * the tag, in the kind's short list form. The recorded API nests `resource_uri` here as a reference
 * (`{resource_uri, uuid}`); clients that read it expect that quirk, so it is kept.
 */
function taggedPaths(decls: ResourceDecl[], ctxOf: (req: ApiRequest) => Ctx): PathSpec[] {
  const tags = decls.find((d): d is CollectionDecl => d.shape === 'collection' && d.kind === 'tags');
  if (!tags) return [];
  // `…/<kind>/` gives the short form (with the recorded nested resource_uri); `…/<kind>/detail/` full
  // objects, which libcloud's list_nodes(ex_tag=…) reads.
  const lister =
    (decl: CollectionDecl, detail: boolean): Handler =>
    async (req) => {
      const ctx = ctxOf(req);
      await tags.service.get(ctx, req.params.uuid); // 404 unless the caller owns the tag
      const q = listQuery(req.query, decl.defaultLimit, {});
      q.filters.set('tag', [[req.params.uuid]]);
      const { total, objects } = await decl.service.list(ctx, q);
      if (detail) return envelope(req.query, q.limit, q.offset, total, objects);
      const nested = objects.map((o) => ({ ...o, resource_uri: { resource_uri: o.resource_uri, uuid: o.uuid } }));
      return envelope(req.query, q.limit, q.offset, total, nested, decl.listFields);
    };
  // The tag's and its members' kinds both made of visible owners' rows: so is the answer.
  const scoped = (decl: CollectionDecl) => (tags.answersFromVisibleOwners && decl.answersFromVisibleOwners ? ({ answerScope: 'visible-owners' } as const) : {});
  return decls
    .filter((d): d is CollectionDecl => d.shape === 'collection' && d.taggable === true)
    .flatMap((decl): PathSpec[] => [
      {
        ...scoped(decl),
        url: `${API_BASE}tags/:uuid/${decl.kind}/`,
        methods: { GET: lister(decl, false) },
        doc: {
          GET: { ...listDoc(decl, `The caller's ${decl.kind} that carry the tag (short form)`, true), responses: { 200: listEnvelope(taggedItem(decl)) } },
        },
      },
      {
        ...scoped(decl),
        url: `${API_BASE}tags/:uuid/${decl.kind}/detail/`,
        methods: { GET: lister(decl, true) },
        doc: { GET: listDoc(decl, `The caller's ${decl.kind} that carry the tag (full objects)`, false) },
      },
    ]);
}

/** A short item of a tag's member list: `resource_uri` is itself a reference there (the recorded quirk). */
function taggedItem(decl: CollectionDecl): JsonSchema {
  return ref(decl, '_tagged');
}

/** Every route of every declared kind. */
export function resourcePaths(decls: ResourceDecl[], services: Services): PathSpec[] {
  // A GET whose answer may be reused reads time through the request's watched clock (http/answer-cache.ts).
  // Object.assign, not a spread: the same object, made ~15x faster (a spread of services costs ~2.5 µs on Node 20).
  const ctxOf = (req: ApiRequest): Ctx => Object.assign({}, services, { caller: req.caller, clock: req.clock ?? services.clock });
  const paths = [...decls.flatMap((d) => (d.shape === 'collection' ? collectionPaths(d, ctxOf) : singletonPaths(d, ctxOf))), ...taggedPaths(decls, ctxOf)];
  // Every GET here is made by the kind's service from stored rows, the caller, the URL and ctx.clock.
  return paths.map((p) => (p.methods.GET ? { ...p, reusable: true } : p));
}
