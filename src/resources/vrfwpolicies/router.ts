import type { Services } from '../../core/context.js';
import { record } from '../../core/events.js';
import type { Obj } from '../../core/input.js';
import { schedule, type TimerHandler } from '../../core/timers.js';
import type { Enforced } from '../../core/sim.js';
import type { Db, Tx } from '../../store/db.js';
import { ref, resourceUri } from '../../store/repository.js';
import { finishJob, startJob } from '../jobs/jobs.js';
import type { FilterValues } from './filters.js';

/**
 * The API side of the virtual router's firewall (spec: "when the policy is active all its filters are
 * applied, when it is deactivated all its filters are removed from the firewall"). The API records what the
 * user wants (a policy's `active`, its filters) at once; the simulated router (`src/sim/vrouter.ts`) catches
 * up through a job per operation: each job ends after `vrouter.firewall` ms of the injected clock (a durable
 * timer, so a restart finishes it), and then the router takes the policy's state of that moment — its
 * filters applied while it is active, none while it is inactive or gone. Jobs therefore converge in any
 * order, and two quick changes leave the router as the later one says. Every completed job writes an audit
 * entry (`firewall_applied` / `firewall_removed`, actor: the system).
 */
export const CATEGORY = 'VRouter firewall';
export const POLICIES = 'vrfwpolicies';
export const FILTERS = 'vrfwfilters';
const TIMER = 'vrfw.apply';

/** The keys of a filter the router enforces (`log` is read live; `action_queue` is no rule). */
const RULE_KEYS = [
  'order',
  'action',
  'protocol',
  'src',
  'src_addr_op',
  'src_port',
  'src_port_op',
  'dst',
  'dst_addr_op',
  'dst_port',
  'dst_port_op',
  'icmp_type',
] as const satisfies readonly (keyof FilterValues)[];
export type Rule = Pick<FilterValues, (typeof RULE_KEYS)[number]>;

/** What the router enforces for one active policy (filters in `order`, then position). */
export type Applied = Enforced<Rule>;

/** The filter rows of a policy body, in the router's order. */
export function inRouterOrder<T extends { uuid: string; body: Obj }>(policy: Obj, rows: readonly T[]): T[] {
  const position = new Map(((policy.filters as string[] | undefined) ?? []).map((u, i) => [u, i]));
  const at = (r: T) => position.get(r.uuid) ?? Infinity;
  return [...rows].sort((a, b) => Number(a.body.order) - Number(b.body.order) || at(a) - at(b));
}

/** What the router would enforce for this policy if it were active. */
export function ruleView(policy: Obj, filters: readonly { uuid: string; body: Obj }[]): Applied {
  return {
    order: policy.order as number,
    lan_interface: (policy.lan_interface as string | null) ?? null,
    upstream_interface: (policy.upstream_interface as string | null) ?? null,
    filters: inRouterOrder(policy, filters).map((f) => Object.fromEntries(RULE_KEYS.map((k) => [k, f.body[k]])) as Rule),
  };
}

/**
 * Whether a change of a policy (its body and filters before and after) needs the router: it was or becomes
 * active, and what the router would enforce differs. A change of an inactive policy touches nothing.
 */
export function routerChanged(before: { active: boolean; view: Applied }, after: { active: boolean; view: Applied }): boolean {
  if (!before.active && !after.active) return false;
  return before.active !== after.active || JSON.stringify(before.view) !== JSON.stringify(after.view);
}

/** What the router enforces for a policy now (null: nothing). */
export const appliedOf = (s: Pick<Services, 'sim'>, db: Db | Tx, policy: string) => s.sim.vrouter.enforcedFor<Rule>(db, policy);

/** The same for many policies (one query). */
export const appliedOfMany = (s: Pick<Services, 'sim'>, db: Db | Tx, policies: readonly string[]) => s.sim.vrouter.enforcedForMany<Rule>(db, policies);

/**
 * Start a router job for a policy in the caller's transaction (the policy, if it still exists, is locked by
 * the caller): the job exists and its timer is due iff the change commits. Returns the job's uuid.
 */
export async function startRouterJob(tx: Tx, s: Services, job: { policy: string; owner: string; operation: string; filter?: string }): Promise<string> {
  const uuid = s.ids.uuid();
  const durationMs = s.sim.vrouter.firewallMs();
  await startJob(tx, s, job.owner, {
    uuid,
    operation: job.operation,
    resources: [resourceUri(POLICIES, job.policy), ...(job.filter ? [resourceUri(FILTERS, job.filter)] : [])],
    durationMs,
  });
  await schedule(tx, s, { kind: TIMER, subject: job.policy, inMs: durationMs, payload: { job: uuid, owner: job.owner } });
  return uuid;
}

/** A `jobs` list with a new job, without jobs that have expired (so stored lists do not grow forever). */
export async function withJob(db: Db | Tx, s: Pick<Services, 'store'>, jobs: unknown, job: string): Promise<string[]> {
  const list = Array.isArray(jobs) ? (jobs as string[]) : [];
  const live = await s.store.resources.existing(db, 'jobs', list);
  return [...list.filter((j) => live.has(j)), job];
}

export const jobRef = (job: string) => ref('jobs', job);

interface Payload {
  job: string;
  owner: string;
}

/** The job's end: the router takes the policy's present state; the job succeeds. */
async function settle(s: Services, tx: Tx, policy: string, payload: Payload): Promise<void> {
  const row = await s.store.resources.lock(tx, POLICIES, policy);
  let applied: Applied | null = null;
  if (row?.body.active === true) {
    const filters = await s.store.resources.getMany(tx, FILTERS, (row.body.filters as string[] | undefined) ?? []);
    applied = ruleView(row.body, filters);
  }
  await s.sim.vrouter.enforce(tx, policy, applied);
  await finishJob(tx, s, payload.job, 'success');
  await record(tx, s, {
    action: applied ? 'firewall_applied' : 'firewall_removed',
    category: CATEGORY,
    uuid: policy,
    owner: row?.owner_uuid ?? payload.owner,
    actor: null,
    details: JSON.stringify({ job: payload.job, filters: applied?.filters.length ?? 0 }),
  });
}

export const routerTimers = {
  [TIMER]: {
    async run(s, tx, timer, payload) {
      await settle(s, tx, timer.subject, payload as Payload);
    },
    async failed(s, tx, _timer, payload, error) {
      await finishJob(tx, s, (payload as Payload).job, 'failed', error.message);
    },
  },
} satisfies Record<string, TimerHandler>;
