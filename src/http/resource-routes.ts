import type { Ctx, Services } from '../core/context.js';
import { createItems, objectBody, relatedId } from '../core/input.js';
import { validation } from '../core/errors.js';
import { Accepted, Answer, type CollectionDecl, type ResourceDecl, type SingletonDecl } from '../core/resource.js';
import { buildSchema } from '../core/schema.js';
import { fieldsParam, listQuery, project, type RawQuery } from './query.js';
import type { ApiRequest, Handler, PathSpec } from './routes.js';
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
): Result {
  const keys = fieldsParam(query) ?? short;
  return ok({ ...extra, meta: { limit, offset, total_count: total }, objects: keys ? objects.map((o) => project(o, keys)) : objects }, 'response');
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
      const { total, objects, extra } = await svc.list(ctxOf(req), q);
      return envelope(req.query, q.limit, q.offset, total, objects, short, extra);
    };

  const list: PathSpec = { url: base, methods: {} };
  if (allows(decl.listMethods, 'get')) list.methods.GET = lister(decl.listFields);
  if (allows(decl.listMethods, 'post') && svc.create) {
    const create = svc.create.bind(svc);
    list.methods.POST = async (req) => {
      const made = await create(ctxOf(req), createItems(req.body));
      const objects = made instanceof Accepted || made instanceof Answer ? made.value : made;
      const status = made instanceof Answer ? made.status : made instanceof Accepted ? 202 : 201;
      const headers: Record<string, string> = {};
      const first = objects[0]?.resource_uri;
      if (typeof first === 'string' && status === 201) headers.Location = `${req.origin}${first}`;
      return { status, body: { ...(made instanceof Answer ? made.extra : {}), objects }, root: 'response', headers };
    };
  }

  if (allows(decl.listMethods, 'put') && svc.updateMany) {
    const updateMany = svc.updateMany.bind(svc);
    list.methods.PUT = async (req) => ({ status: 202, body: { objects: await updateMany(ctxOf(req), createItems(req.body)) }, root: 'response' });
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
  }

  const single: PathSpec = { url: `${base}:uuid/`, methods: {} };
  if (allows(decl.detailMethods, 'get')) single.methods.GET = async (req) => ok(project(await svc.get(ctxOf(req), req.params.uuid), fieldsParam(req.query)));
  if (allows(decl.detailMethods, 'put') && svc.update) {
    const update = svc.update.bind(svc);
    single.methods.PUT = async (req) => {
      const updated = await update(ctxOf(req), req.params.uuid, objectBody(req.body));
      return updated instanceof Accepted ? { status: 202, body: updated.value, root: 'object' } : ok(updated);
    };
  }
  if (allows(decl.detailMethods, 'delete') && svc.remove) {
    const remove = svc.remove.bind(svc);
    single.methods.DELETE = async (req) => {
      const removed = await remove(ctxOf(req), req.params.uuid, req.query);
      return removed instanceof Accepted ? { status: 202, body: removed.value, root: 'object' } : { status: 204 };
    };
  }

  const paths: PathSpec[] = [
    list,
    { url: `${base}detail/`, methods: { GET: lister() } },
    { url: `${base}schema/`, methods: { GET: async () => ok(buildSchema(decl), 'response') } },
    single,
  ];
  // Collection views (`availability_groups/`) before `:uuid/`: a static segment wins in the router anyway.
  for (const [name, view] of Object.entries(decl.collectionViews ?? {}))
    paths.push(
      { url: `${base}${name}/`, methods: { GET: async (req) => ({ status: 200, body: await view.all(ctxOf(req)) }) } },
      { url: `${base}${name}/:uuid/`, methods: { GET: async (req) => ({ status: 200, body: await view.of(ctxOf(req), req.params.uuid) }) } },
    );
  for (const [name, view] of Object.entries(decl.views ?? {}))
    paths.push({ url: `${base}:uuid/${name}/`, methods: { GET: async (req) => ok(await view(ctxOf(req), req.params.uuid)) } });
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
    });
  }
  return paths;
}

/** A single-object kind: GET (and PUT) on the kind's URL, plus its schema. */
function singletonPaths(decl: SingletonDecl, ctxOf: (req: ApiRequest) => Ctx): PathSpec[] {
  const base = `${API_BASE}${decl.kind}/`;
  const root = decl.envelope ? 'response' : 'object';
  const main: PathSpec = { url: base, methods: { GET: async (req) => ok(project(await decl.service.get(ctxOf(req)), fieldsParam(req.query)), root) } };
  const update = decl.service.update;
  if (update) main.methods.PUT = async (req) => ok(await update(ctxOf(req), objectBody(req.body)));
  return [main, { url: `${base}schema/`, methods: { GET: async () => ok(buildSchema(decl), 'response') } }];
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
  return decls
    .filter((d): d is CollectionDecl => d.shape === 'collection' && d.taggable === true)
    .flatMap((decl) => [
      { url: `${API_BASE}tags/:uuid/${decl.kind}/`, methods: { GET: lister(decl, false) } },
      { url: `${API_BASE}tags/:uuid/${decl.kind}/detail/`, methods: { GET: lister(decl, true) } },
    ]);
}

/** Every route of every declared kind. */
export function resourcePaths(decls: ResourceDecl[], services: Services): PathSpec[] {
  const ctxOf = (req: ApiRequest): Ctx => ({ ...services, caller: req.caller });
  return [...decls.flatMap((d) => (d.shape === 'collection' ? collectionPaths(d, ctxOf) : singletonPaths(d, ctxOf))), ...taggedPaths(decls, ctxOf)];
}
