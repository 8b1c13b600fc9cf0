import Type from 'typebox';
import { f } from '../../core/fields.js';
import { isoTimestamp } from '../../core/clock.js';
import type { Ctx, Services } from '../../core/context.js';
import type { Obj } from '../../core/input.js';
import { storedDecl } from '../../core/stored.js';
import { schedule } from '../../core/timers.js';
import type { Tx } from '../../store/db.js';

/**
 * Background jobs (reference §10): read-only records of long operations (drive_clone, server_clone).
 * Progress is derived from the injected clock between the job's start and the end the simulator planned
 * (kept in the simulator's state, not the job's body), so it moves 0..100 without any writes; completion
 * and expiry are durable timers. `children` is stored as job uuids and shown as full job objects.
 */
export const JOB_KEEP_MS = 3 * 24 * 3600 * 1000;

const fields = {
  children: f.relatedItems(Type.Unknown(), { readonly: true, nullable: true, help: 'Background jobs, initiated by this job.' }),
  created: f.datetime({ readonly: true }),
  data: f.object({ readonly: true, nullable: true, help: "Meta information related to this background job's execution." }),
  last_modified: f.datetime({ readonly: true }),
  operation: f.string({ readonly: true, nullable: true }),
  resource_uri: f.string({ readonly: true }),
  resources: f.list(Type.String(), { readonly: true, nullable: true, help: 'Resources linked to this background job.' }),
  state: f.string({ readonly: true, default: 'started' }),
  uuid: f.string({ readonly: true, unique: true }),
};

/** Fill `data.progress` of running jobs and nest `children` (full job objects), for a page. */
async function present(ctx: Ctx, jobs: Obj[]): Promise<void> {
  const now = ctx.clock.now().getTime();
  const childIds = jobs.flatMap((j) => (j.children as string[] | undefined) ?? []).filter((c) => typeof c === 'string');
  const children = childIds.length ? await jobService.presentUuids(ctx, childIds) : [];
  const timing = await ctx.sim.jobs.timings(
    ctx.store.db,
    jobs.filter((j) => j.state === 'started').map((j) => j.uuid as string),
  );
  for (const j of jobs) {
    delete j.owner; // job records carry no owner (recorded dumps)
    if (j.state === 'started') {
      const t = timing.get(j.uuid as string) ?? {};
      const start = Number(t.started_at ?? now);
      const end = Number(t.ends_at ?? start);
      const progress = end <= start ? 99 : Math.floor(((now - start) / (end - start)) * 100);
      j.data = { ...(j.data as Obj), progress: Math.max(0, Math.min(99, progress)) };
    }
    j.children = ((j.children as unknown[] | undefined) ?? []).map((id) => children.find((c) => c.uuid === id)).filter(Boolean);
  }
}

export const jobs = storedDecl(
  {
    kind: 'jobs',
    flavour: 'model',
    fields,
    listMethods: ['get'],
    detailMethods: ['get'],
    filtering: { state: 1 },
    ordering: ['-last_modified'],
    order: 'recent',
    timers: {
      'job.expire': {
        async run(s, tx, timer) {
          await s.store.resources.remove(tx, 'jobs', timer.subject);
        },
      },
    },
  },
  { decorate: present },
);
const jobService = jobs.service;

/** Start a job in the caller's transaction; it finishes when its operation's timer completes it. */
export async function startJob(
  tx: Tx,
  s: Services,
  owner: string,
  job: { uuid: string; operation: string; resources: string[]; durationMs: number; children?: string[] },
): Promise<void> {
  const now = s.clock.now();
  const stamp = isoTimestamp(now);
  await jobService.insert(tx, s, job.uuid, owner, {
    created: stamp,
    data: { progress: 0 },
    last_modified: stamp,
    operation: job.operation,
    children: job.children ?? [],
    resources: job.resources,
    state: 'started',
  });
  await s.sim.jobs.begin(tx, job.uuid, now, job.durationMs);
}

/** Finish a job (success or failure) and schedule its removal after three days. */
export async function finishJob(tx: Tx, s: Services, uuid: string, state: 'success' | 'failed', error?: string): Promise<void> {
  const body = await jobService.patch(tx, s, uuid, (b) => ({
    ...b,
    state,
    last_modified: isoTimestamp(s.clock.now()),
    data: { ...(b.data as Obj), progress: 100, ...(error ? { error } : {}) },
  }));
  await s.sim.jobs.forget(tx, uuid);
  if (body) await schedule(tx, s, { kind: 'job.expire', subject: uuid, inMs: JOB_KEEP_MS });
}

/** Which of these job uuids still exist (expired jobs drop out of resources' `jobs` lists). */
export async function existingJobs(ctx: Ctx, uuids: string[]): Promise<Set<string>> {
  if (!uuids.length) return new Set();
  return new Set((await ctx.store.resources.existing(ctx.store.db, 'jobs', uuids)).keys());
}
