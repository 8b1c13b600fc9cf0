import type { Ctx } from '../../core/context.js';
import { validation } from '../../core/errors.js';
import { record } from '../../core/events.js';
import { isPlainObject, validateFields, type Obj } from '../../core/input.js';
import { started, type Outcome } from '../../core/resource.js';
import { StoredFront } from './front.js';
import { storedDecl, type Row } from '../../core/stored.js';
import { ACTION_RESULT } from '../../core/contract.js';
import type { Tx } from '../../store/db.js';
import { ref } from '../../store/repository.js';
import { existingJobs } from '../jobs/jobs.js';
import { policyFields } from './fields.js';
import { duplicateOrder, normaliseFilter } from './filters.js';
import { CATEGORY, FILTERS, inRouterOrder, jobRef, POLICIES, routerChanged, routerTimers, ruleView, startRouterJob, withJob } from './router.js';
import { filterItems, filtersOf, nestedFilter, parseFilterList, removeFilters, writeFilterList, type FilterItem } from './vrfwfilters.js';

/**
 * Virtual-router firewall policies (`/vrfwpolicies/`; spec "Virtual router firewall policies", reference
 * §14.2; dumps `vrfwpolicy_*`). A policy has a `name`, an `order`, `active`, the LAN interfaces it guards and
 * its filters (their own objects, vrfwfilters.ts, nested in full). The simulated virtual router (router.ts)
 * applies an active policy's filters and removes an inactive one's through a job per operation, after
 * `vrouter.firewall` ms of the injected clock.
 *
 * Statuses follow the recorded exchanges where they and the docs disagree (the dumps are the real service):
 * - POST answers 202 `{objects:[policy]}`: creating starts a job (also for an inactive policy, as recorded).
 * - PUT answers 202 with the policy when it started a job — the policy is or was active and what the router
 *   enforces changes (activation, order, interfaces, filters) — and 200 otherwise: the recorded `update`
 *   (activating) is 202, the recorded `safe_update_valid_order` (new filters on an inactive policy, no new
 *   job) is 200.
 * - DELETE answers 202 `{job, uuid}`, not the docs' 204: the recording shows the job that removes the policy
 *   from the router ("deletion started"). The policy and its filters are gone from the API at once; the job
 *   ends when the router has dropped them.
 * - `action/?do=enable|disable` answer 202 `{action, job, result, uuid}`; each starts a job (an enable of an
 *   active policy re-applies it).
 * Not recorded, so answered 405 although `schema/` lists them (as for the other kinds): PUT and DELETE on the
 * list, POST on a policy.
 *
 * `lan_interface` / `upstream_interface` name `/lans/` objects, which Stratus does not simulate: a reference
 * (uuid, `/api/2.0/lans/<uuid>/` or `{uuid}` / `{resource_uri, uuid}`) is checked for its form, kept, and
 * shown as `{resource_uri: "/api/2.0/lans/<uuid>/", uuid}` as recorded; null means none.
 *
 * Policies are never shared: they carry no `tags`, `permissions` or `grantees` (nor, as recorded, `owner`),
 * and the ACL permissions list no virtual-router kind; another user's policy is 404. The `tag` filter works
 * with tags whose `resources` list a policy. Audit entries: category `VRouter firewall` — create, update,
 * delete, enable, disable (the filters' own create/update/delete when a policy's write changes them), and
 * `firewall_applied` / `firewall_removed` by the system when a job ends.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const LAN_URI = /^(?:https?:\/\/[^/]+)?\/api\/2\.0\/lans\/([^/]+)\/?$/;

/** A LAN reference as a request gives it: its uuid (lower case), or null for none. */
function lanRef(value: unknown, point: string): string | null {
  if (value === null) return null;
  const wrong = () => validation(point, 'Value must name a LAN: its uuid, /api/2.0/lans/<uuid>/, {"uuid": ...} or null');
  let uuid: unknown;
  let uri: unknown;
  if (typeof value === 'string') [uuid, uri] = value.includes('/') ? [undefined, value] : [value, undefined];
  else if (isPlainObject(value)) [uuid, uri] = [value.uuid, value.resource_uri];
  else throw wrong();
  if (uri !== undefined && uri !== null) {
    const m = typeof uri === 'string' ? LAN_URI.exec(uri) : null;
    if (!m) throw wrong();
    if (uuid !== undefined && uuid !== null && uuid !== m[1]) throw validation(point, 'uuid and resource_uri name different LANs');
    uuid = m[1];
  }
  if (typeof uuid !== 'string' || !UUID.test(uuid)) throw wrong();
  return uuid.toLowerCase();
}

const INTERFACES = ['lan_interface', 'upstream_interface'] as const;
const { active, name, order } = policyFields;
/** The plainly typed fields; `filters` and the interfaces are read by hand (see above and filters.ts). */
const SIMPLE = { active, name, order };

interface Parsed {
  values: Obj;
  /** `filters` as given (undefined: not given). */
  filters: unknown;
}

function parsePolicy(input: Obj, mode: 'create' | 'update'): Parsed {
  const values = validateFields(SIMPLE, input, mode);
  for (const key of INTERFACES) {
    if (Object.hasOwn(input, key) && input[key] !== undefined) values[key] = lanRef(input[key], key);
    else if (mode === 'create') values[key] = null;
  }
  const filters = input.filters ?? undefined;
  if (mode === 'create' && filters === undefined) throw validation('filters', 'This field is required');
  return { values, filters };
}

/** New filters of a new policy, validated before anything is written. */
function newFilters(value: unknown): FilterItem[] {
  const items = filterItems(value).map((item, i): FilterItem => ({ values: normaliseFilter(item, `filters.${i}.`) }));
  const dup = duplicateOrder(items.map((i) => i.values));
  if (dup >= 0) throw validation(`filters.${dup}.order`, `Order ${items[dup].values.order} is taken by another filter of this policy`);
  return items;
}

const audit = (tx: Tx, ctx: Ctx, action: string, uuid: string, owner: string, details = '') =>
  record(tx, ctx, { action, category: CATEGORY, uuid, owner, actor: ctx.caller.uuid, details });

/** A policy as stored, as everyone sees it: references built, no owner (as recorded); filters follow. */
function presentStatic({ owner: _owner, ...p }: Obj): Obj {
  const lan = (key: string) => (typeof p[key] === 'string' ? ref('lans', p[key]) : null);
  return {
    ...p,
    filters: p.filters ?? [],
    jobs: ((p.jobs as string[] | undefined) ?? []).map(jobRef),
    lan_interface: lan('lan_interface'),
    upstream_interface: lan('upstream_interface'),
  };
}

/** A page of policies: their filters in full (in the router's order) and their live jobs, in two queries. */
async function decorate(ctx: Ctx, policies: Obj[]): Promise<void> {
  const rows = await ctx.store.resources.getMany(
    ctx.store.db,
    FILTERS,
    policies.flatMap((p) => p.filters as string[]),
  );
  const byUuid = new Map(rows.map((r) => [r.uuid, r]));
  const nested = policies.map((p) =>
    inRouterOrder(
      p,
      (p.filters as string[]).map((u) => byUuid.get(u)).filter((r): r is Row => r !== undefined),
    ).map((r) => nestedFilter(ctx, r)),
  );
  const jobsOf = (o: Obj) => o.jobs as { uuid: string }[];
  const live = await existingJobs(
    ctx,
    [...policies, ...nested.flat()].flatMap((o) => jobsOf(o).map((j) => j.uuid)),
  );
  policies.forEach((p, i) => {
    for (const f of nested[i]) f.jobs = jobsOf(f).filter((j) => live.has(j.uuid));
    p.filters = nested[i];
    p.jobs = jobsOf(p).filter((j) => live.has(j.uuid));
  });
}

const stored = storedDecl(
  {
    kind: POLICIES,
    flavour: 'custom',
    fields: policyFields,
    listMethods: ['get', 'post', 'delete', 'put'],
    detailMethods: ['get', 'post', 'delete', 'put'],
    filtering: { name: 'exact', name__contains: 'exact', tag: 'exact', uuid: 'exact' },
    ordering: ['uuid', 'name'],
    actions: {
      enable: { permission: 'EDIT', async: true, answer: { schema: ACTION_RESULT }, run: (ctx, uuid) => setActive(ctx, uuid, true) },
      disable: { permission: 'EDIT', async: true, answer: { schema: ACTION_RESULT }, run: (ctx, uuid) => setActive(ctx, uuid, false) },
    },
    wire: { startsWork: true },
    timers: routerTimers,
  },
  { presentStatic, decorate },
);

async function setActive(ctx: Ctx, uuid: string, on: boolean): Promise<Obj> {
  const action = on ? 'enable' : 'disable';
  const job = await ctx.store.transaction(async (tx) => {
    const row = await stored.service.authorize(ctx, uuid, 'EDIT', tx);
    const owner = row.owner_uuid ?? '';
    const job = await startRouterJob(tx, ctx, { policy: uuid, owner, operation: `vrfwpolicy_${action}` });
    await ctx.store.resources.write(tx, ctx.clock.now(), row, { ...row.body, active: on, jobs: await withJob(tx, ctx, row.body.jobs, job) });
    await audit(tx, ctx, action, uuid, owner, JSON.stringify({ job }));
    return job;
  });
  return { action, job: jobRef(job), result: 'success', uuid };
}

class PolicyService extends StoredFront {
  async create(ctx: Ctx, inputs: Obj[]): Promise<Outcome<Obj[]>> {
    // Everything is validated first: one bad object rejects the request and writes nothing.
    const all = inputs.map((input) => {
      const { values, filters } = parsePolicy(input, 'create');
      return { input, values, filters: newFilters(filters) };
    });
    const owner = ctx.caller.uuid;
    const uuids = await ctx.store.transaction(async (tx) => {
      const made: string[] = [];
      for (const { input, values, filters } of all) {
        const uuid = ctx.ids.uuid();
        await audit(tx, ctx, 'create', uuid, owner, JSON.stringify(input));
        const ids = await writeFilterList(tx, ctx, { uuid, owner }, filters, []);
        const job = await startRouterJob(tx, ctx, { policy: uuid, owner, operation: 'vrfwpolicy_create' });
        await this.stored.insert(tx, ctx, uuid, owner, { ...values, filters: ids, jobs: [job] });
        made.push(uuid);
      }
      return made;
    });
    return started(await this.stored.presentUuids(ctx, uuids));
  }

  async update(ctx: Ctx, uuid: string, input: Obj): Promise<Obj | Outcome<Obj>> {
    const { values, filters } = parsePolicy(input, 'update');
    const job = await ctx.store.transaction(async (tx) => {
      const row = await this.stored.authorize(ctx, uuid, 'EDIT', tx);
      const owner = row.owner_uuid ?? '';
      const current = await filtersOf(tx, ctx, row.body);
      const next: Obj = { ...row.body, ...values };
      let after = current;
      if (filters !== undefined) {
        next.filters = await writeFilterList(tx, ctx, { uuid, owner }, parseFilterList(filters, current), current);
        after = await ctx.store.resources.getMany(tx, FILTERS, next.filters as string[]);
      }
      let job: string | undefined;
      const before = { active: row.body.active === true, view: ruleView(row.body, current) };
      if (routerChanged(before, { active: next.active === true, view: ruleView(next, after) })) {
        job = await startRouterJob(tx, ctx, { policy: uuid, owner, operation: 'vrfwpolicy_update' });
        next.jobs = await withJob(tx, ctx, row.body.jobs, job);
      }
      if (JSON.stringify(next) !== JSON.stringify(row.body)) {
        await ctx.store.resources.write(tx, ctx.clock.now(), row, next);
        await audit(tx, ctx, 'update', uuid, owner);
      }
      return job;
    });
    const object = await this.get(ctx, uuid);
    return job ? started(object) : object;
  }

  /** DELETE: 202 `{job, uuid}` as recorded (see the header). */
  async remove(ctx: Ctx, uuid: string): Promise<Outcome<Obj>> {
    const job = await ctx.store.transaction(async (tx) => {
      const row = await this.stored.authorize(ctx, uuid, 'DELETE', tx);
      const owner = row.owner_uuid ?? '';
      const filters = await filtersOf(tx, ctx, row.body);
      await ctx.store.resources.remove(tx, POLICIES, uuid);
      const job = await startRouterJob(tx, ctx, { policy: uuid, owner, operation: 'vrfwpolicy_delete' });
      await audit(tx, ctx, 'delete', uuid, owner, JSON.stringify({ job }));
      await removeFilters(
        tx,
        ctx,
        owner,
        filters.map((f) => f.uuid),
      );
      return job;
    });
    return started({ job: jobRef(job), uuid });
  }
}

export const vrfwpolicies = { ...stored, service: new PolicyService(stored.service) };
