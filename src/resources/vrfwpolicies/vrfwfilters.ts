import Type from 'typebox';
import type { Ctx } from '../../core/context.js';
import { validation } from '../../core/errors.js';
import { record } from '../../core/events.js';
import { isPlainObject, relatedId, type Obj } from '../../core/input.js';
import { started, type Outcome } from '../../core/resource.js';
import { StoredFront } from './front.js';
import { storedDecl, type Row, type StoredFilter } from '../../core/stored.js';
import { ACTION_RESULT } from '../../core/contract.js';
import type { Tx } from '../../store/db.js';
import { ref } from '../../store/repository.js';
import { existingJobs } from '../jobs/jobs.js';
import { filterFields } from './fields.js';
import { duplicateOrder, normaliseFilter, type FilterValues } from './filters.js';
import { CATEGORY, FILTERS, jobRef, POLICIES, routerChanged, ruleView, startRouterJob, withJob } from './router.js';

/**
 * Virtual-router firewall filters (`/vrfwfilters/`, reference §14.2; dumps `vrfwfilter_*`). A filter belongs
 * to one policy (its `policy`, given on create, never shown again by GET — as recorded) and to the policy's
 * owner; the policy lists it in `filters`. Validation is filters.ts.
 *
 * As recorded: POST answers 202 `{objects:[filter]}` (the filter with the `policy` it was given and a job),
 * DELETE answers 202 `{job, uuid}`, `action/?do=enable_logging|disable_logging` answer 202
 * `{action, result, uuid}` without a job (logging is switched at once). Every create and delete starts a
 * router job (listed by the filter and its policy); a PUT does when the policy is active and the filter
 * changed what the router enforces (then 202 with the filter, else 200). Not recorded, so answered 405
 * although `schema/` lists them: PUT and DELETE on the list, POST on a filter.
 *
 * Locks: a policy before its filters, everywhere (the router's timer locks the policy only).
 */

const KEYS = [
  'action',
  'action_queue',
  'dst',
  'dst_addr_op',
  'dst_port',
  'dst_port_op',
  'icmp_type',
  'log',
  'order',
  'protocol',
  'src',
  'src_addr_op',
  'src_port',
  'src_port_op',
] as const satisfies readonly (keyof FilterValues)[];

/** The filter's values as stored (without `jobs` and `policy`). */
export const valuesOf = (body: Obj): FilterValues => Object.fromEntries(KEYS.map((k) => [k, body[k]])) as unknown as FilterValues;

const jobsOf = (o: Obj) => (o.jobs as { uuid: string }[] | undefined) ?? [];

/** Jobs that expired (3 days after they finished) drop out of `jobs` lists; one query for a page. */
export async function dropExpiredJobs(ctx: Ctx, objects: Obj[]): Promise<void> {
  const withJobs = objects.filter((o) => jobsOf(o).length);
  if (!withJobs.length) return;
  const live = await existingJobs(
    ctx,
    withJobs.flatMap((o) => jobsOf(o).map((j) => j.uuid)),
  );
  for (const o of withJobs) o.jobs = jobsOf(o).filter((j) => live.has(j.uuid));
}

const filters: Record<string, StoredFilter> = {
  // `?policy=<uuid>`: the filters the policy lists (an index lookup of the policy, then of its filters).
  policy: (_eb, values, ctx) => ctx.store.resources.listedIn(POLICIES, 'filters', values),
};

const stored = storedDecl(
  {
    kind: FILTERS,
    flavour: 'custom',
    fields: filterFields,
    listMethods: ['get', 'post', 'delete', 'put'],
    detailMethods: ['get', 'post', 'delete', 'put'],
    filtering: { name: 'exact', name__contains: 'exact', tag: 'exact', uuid: 'exact' },
    unlistedFilters: ['policy'],
    ordering: ['uuid', 'name'],
    actions: {
      enable_logging: { permission: 'EDIT', async: true, answer: { schema: ACTION_RESULT }, run: (ctx, uuid) => setLogging(ctx, uuid, true) },
      disable_logging: { permission: 'EDIT', async: true, answer: { schema: ACTION_RESULT }, run: (ctx, uuid) => setLogging(ctx, uuid, false) },
    },
    wire: { startsWork: true, createdKeys: { policy: Type.String() } },
  },
  {
    filters,
    // The recorded filter shows neither its owner nor its policy.
    presentStatic: ({ owner: _owner, policy: _policy, ...f }) => ({ ...f, jobs: ((f.jobs as string[] | undefined) ?? []).map(jobRef) }),
    decorate: dropExpiredJobs,
  },
);

/** A policy of the caller's, locked; any other uuid is a 400 on `policy` (no existence leak). */
async function ownPolicy(tx: Tx, ctx: Ctx, uuid: string): Promise<Row> {
  const row = await ctx.store.resources.lock(tx, POLICIES, uuid);
  if (!row || row.owner_uuid !== ctx.caller.uuid) throw validation('policy', `Policy ${uuid} does not exist`);
  return row;
}

function policyOf(input: Obj): string {
  if (input.policy === undefined || input.policy === null) throw validation('policy', 'This field is required');
  return relatedId(input.policy, 'policy');
}

/** The first of `others` whose order `values` takes, as an error on `point`. */
function checkOrder(values: FilterValues, others: readonly Row[], point: string): void {
  const taken = others.find((o) => o.body.order === values.order);
  if (taken) throw validation(point, `Order ${values.order} is taken by filter ${taken.uuid} of this policy`);
}

const audit = (tx: Tx, ctx: Ctx, action: string, uuid: string, owner: string, details = '') =>
  record(tx, ctx, { action, category: CATEGORY, uuid, owner, actor: ctx.caller.uuid, details });

async function setLogging(ctx: Ctx, uuid: string, log: boolean): Promise<Obj> {
  const action = log ? 'enable_logging' : 'disable_logging';
  await ctx.store.transaction(async (tx) => {
    const row = await stored.service.authorize(ctx, uuid, 'EDIT', tx);
    if (row.body.log !== log) await ctx.store.resources.write(tx, ctx.clock.now(), row, { ...row.body, log });
    await audit(tx, ctx, action, uuid, row.owner_uuid ?? '');
  });
  return { action, result: 'success', uuid };
}

/** One item of a policy's `filters` in a request: a change of one of its filters (`uuid`) or a new one. */
export interface FilterItem {
  uuid?: string;
  values: FilterValues;
}

/** A `filters` value: a list, or `{}` for none (the recorded create sends `"filters": {}`). */
export function filterItems(value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  if (isPlainObject(value) && Object.keys(value).length === 0) return [];
  throw validation('filters', 'Value must be a list of filters');
}

/** The filter an item names by `uuid` or `resource_uri` (a string or `{resource_uri, uuid}`), if any. */
function namedIn(item: unknown): string | undefined {
  if (!isPlainObject(item)) return undefined;
  for (const v of [item.uuid, item.resource_uri])
    if (typeof v === 'string' || isPlainObject(v)) {
      try {
        return relatedId(v, 'uuid');
      } catch {
        // not a reference: the item is a new filter
      }
    }
  return undefined;
}

/**
 * A policy's `filters` as a request gives them, validated against its current filters: an item naming one of
 * them (by `uuid` or `resource_uri`, as GET shows them) changes that filter (only the keys it gives), any
 * other item is a new filter. Orders must be unique in the list.
 */
export function parseFilterList(value: unknown, current: readonly Row[]): FilterItem[] {
  const byUuid = new Map(current.map((r) => [r.uuid, r]));
  const claimed = new Set<string>();
  const items = filterItems(value).map((item, i): FilterItem => {
    const named = namedIn(item);
    const row = named !== undefined && !claimed.has(named) ? byUuid.get(named) : undefined;
    if (row) claimed.add(row.uuid);
    return { uuid: row?.uuid, values: normaliseFilter(item, `filters.${i}.`, row ? valuesOf(row.body) : undefined) };
  });
  const dup = duplicateOrder(items.map((i) => i.values));
  if (dup >= 0) throw validation(`filters.${dup}.order`, `Order ${items[dup].values.order} is taken by another filter of this policy`);
  return items;
}

/**
 * Make a policy's filters what `items` say, in the caller's transaction (the policy and `current`, its
 * filters, locked): named filters change, new ones are made, the others are deleted; each change is
 * audited. Returns the policy's new `filters` (uuids, in the request's order).
 */
export async function writeFilterList(
  tx: Tx,
  ctx: Ctx,
  policy: { uuid: string; owner: string },
  items: readonly FilterItem[],
  current: readonly Row[],
): Promise<string[]> {
  const kept = new Set(items.map((i) => i.uuid).filter((u) => u !== undefined));
  const gone = current.filter((r) => !kept.has(r.uuid)).map((r) => r.uuid);
  await removeFilters(tx, ctx, policy.owner, gone);
  const now = ctx.clock.now();
  const byUuid = new Map(current.map((r) => [r.uuid, r]));
  const out: string[] = [];
  for (const item of items) {
    const row = item.uuid === undefined ? undefined : byUuid.get(item.uuid);
    if (row) {
      const next = { ...row.body, ...item.values };
      if (JSON.stringify(next) !== JSON.stringify(row.body)) {
        await ctx.store.resources.write(tx, now, row, next);
        await audit(tx, ctx, 'update', row.uuid, policy.owner);
      }
      out.push(row.uuid);
      continue;
    }
    const uuid = ctx.ids.uuid();
    await stored.service.insert(tx, ctx, uuid, policy.owner, { ...item.values, jobs: [], policy: policy.uuid });
    await audit(tx, ctx, 'create', uuid, policy.owner, JSON.stringify({ ...item.values, policy: policy.uuid }));
    out.push(uuid);
  }
  return out;
}

/** Delete filters (locked by the caller) with their audit entries. */
export async function removeFilters(tx: Tx, ctx: Ctx, owner: string, uuids: readonly string[]): Promise<void> {
  if (!uuids.length) return;
  await ctx.store.resources.remove(tx, FILTERS, uuids);
  for (const uuid of uuids) await audit(tx, ctx, 'delete', uuid, owner);
}

/** The policy's filter rows (locked in a transaction), in its order. */
export async function filtersOf(tx: Tx, ctx: Ctx, policy: Obj): Promise<Row[]> {
  return ctx.store.resources.lockMany(tx, FILTERS, (policy.filters as string[] | undefined) ?? []);
}

/** The kind's own writes: each one the router hears of through a job (see the header). */
class FilterService extends StoredFront {
  async create(ctx: Ctx, inputs: Obj[]): Promise<Outcome<Obj[]>> {
    // Everything is validated first: one bad object rejects the request and writes nothing.
    const all = inputs.map((input) => ({ policy: policyOf(input), values: normaliseFilter(input, '') }));
    const made = await ctx.store.transaction(async (tx) => {
      // Every policy of the request, locked in one order.
      for (const uuid of [...new Set(all.map((a) => a.policy))].sort()) await ownPolicy(tx, ctx, uuid);
      const out: { uuid: string; policy: string }[] = [];
      for (const { policy, values } of all) {
        const row = await ownPolicy(tx, ctx, policy);
        const owner = row.owner_uuid ?? '';
        checkOrder(values, await filtersOf(tx, ctx, row.body), 'order');
        const uuid = ctx.ids.uuid();
        const job = await startRouterJob(tx, ctx, { policy, owner, operation: 'vrfwfilter_create', filter: uuid });
        await this.stored.insert(tx, ctx, uuid, owner, { ...values, jobs: [job], policy });
        await ctx.store.resources.write(tx, ctx.clock.now(), row, {
          ...row.body,
          filters: [...((row.body.filters as string[] | undefined) ?? []), uuid],
          jobs: await withJob(tx, ctx, row.body.jobs, job),
        });
        await audit(tx, ctx, 'create', uuid, owner, JSON.stringify({ ...values, policy }));
        out.push({ uuid, policy });
      }
      return out;
    });
    const objects = await this.stored.presentUuids(
      ctx,
      made.map((m) => m.uuid),
    );
    // The recorded create answers the filter with the policy it was given (GET never shows it).
    return started(objects.map((o, i) => ({ ...o, policy: made[i].policy })));
  }

  async update(ctx: Ctx, uuid: string, input: Obj): Promise<Obj | Outcome<Obj>> {
    const current = await this.stored.authorize(ctx, uuid, 'EDIT');
    const job = await ctx.store.transaction(async (tx) => {
      const policy = await ctx.store.resources.lock(tx, POLICIES, current.body.policy as string);
      const row = await this.stored.authorize(ctx, uuid, 'EDIT', tx);
      if (input.policy !== undefined && input.policy !== null && relatedId(input.policy, 'policy') !== row.body.policy)
        throw validation('policy', 'A filter cannot move to another policy');
      const values = normaliseFilter(input, '', valuesOf(row.body));
      const siblings = policy ? await filtersOf(tx, ctx, policy.body) : [];
      checkOrder(
        values,
        siblings.filter((s) => s.uuid !== uuid),
        'order',
      );
      const next: Obj = { ...row.body, ...values };
      if (JSON.stringify(next) === JSON.stringify(row.body)) return undefined;
      const owner = row.owner_uuid ?? '';
      let job: string | undefined;
      if (policy) {
        const after = siblings.map((s) => (s.uuid === uuid ? { ...s, body: next } : s));
        const active = policy.body.active === true;
        if (routerChanged({ active, view: ruleView(policy.body, siblings) }, { active, view: ruleView(policy.body, after) })) {
          job = await startRouterJob(tx, ctx, { policy: policy.uuid, owner, operation: 'vrfwfilter_update', filter: uuid });
          await ctx.store.resources.write(tx, ctx.clock.now(), policy, { ...policy.body, jobs: await withJob(tx, ctx, policy.body.jobs, job) });
          next.jobs = await withJob(tx, ctx, row.body.jobs, job);
        }
      }
      await ctx.store.resources.write(tx, ctx.clock.now(), row, next);
      await audit(tx, ctx, 'update', uuid, owner);
      return job;
    });
    const object = await this.get(ctx, uuid);
    return job ? started(object) : object;
  }

  /** DELETE: 202 `{job, uuid}` as recorded; the filter is gone at once, the router drops it when the job ends. */
  async remove(ctx: Ctx, uuid: string): Promise<Outcome<Obj>> {
    const current = await this.stored.authorize(ctx, uuid, 'DELETE');
    const job = await ctx.store.transaction(async (tx) => {
      const policy = await ctx.store.resources.lock(tx, POLICIES, current.body.policy as string);
      const row = await this.stored.authorize(ctx, uuid, 'DELETE', tx);
      const owner = row.owner_uuid ?? '';
      await removeFilters(tx, ctx, owner, [uuid]);
      const policyUuid = row.body.policy as string;
      const job = await startRouterJob(tx, ctx, { policy: policyUuid, owner, operation: 'vrfwfilter_delete', filter: uuid });
      if (policy)
        await ctx.store.resources.write(tx, ctx.clock.now(), policy, {
          ...policy.body,
          filters: ((policy.body.filters as string[] | undefined) ?? []).filter((f) => f !== uuid),
          jobs: await withJob(tx, ctx, policy.body.jobs, job),
        });
      return job;
    });
    return started({ job: jobRef(job), uuid });
  }
}

export const vrfwfilters = { ...stored, service: new FilterService(stored.service) };

/** A filter as its policy shows it: `resource_uri` nested as `{resource_uri, uuid}` (recorded). */
export function nestedFilter(ctx: Ctx, row: Row): Obj {
  const shown = stored.service.present(ctx.store, row);
  return { ...shown, resource_uri: ref(FILTERS, row.uuid) };
}
