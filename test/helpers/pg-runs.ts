import { randomBytes } from 'node:crypto';
import pg from 'pg';

export const PG_URL = process.env.STRATUS_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/**
 * Test schemas are `t_<run id>_<12 hex>`: each run (test/run.ts, or one test file run on its own) has its own
 * prefix and drops only its own schemas, so runs of two clones on one database do not drop each other's.
 * The runner hands its id to the test processes in STRATUS_TEST_RUN_ID.
 */
export const newRunId = () => randomBytes(5).toString('hex');
// A location's own schema (`<schema>_sjc`, core/locations.ts) belongs to its run too.
const SCHEMA = /^t_([0-9a-f]{10})_[0-9a-f]{12}(_[a-z0-9]+)?$/;
export const schemaPrefix = (runId: string) => `t_${runId}_`;

/**
 * Who is alive is told by PostgreSQL advisory locks, held by a connection for the run's whole life (and so
 * released by its death, however it dies): every live run holds LIVE shared and its own key exclusively.
 * Schemas are dropped only by a run that can take LIVE exclusively, i.e. while no other run is live:
 * Kysely's stock introspector lists every schema of the database (Stratus's own reads only its schema,
 * src/store/pg-dialect.ts, but tests open older releases' schemas with the stock one), and a schema vanishing
 * mid-listing fails it ("schema … does not exist"). A run that ends beside a live one leaves its
 * schemas; the next run that ends (or starts) alone drops them as leftovers of a dead run.
 */
const LOCKS = 1398035028; // 'STRT': the advisory-lock namespace of the test runs
const LIVE = 0;

export interface RunLock {
  /** Ends the run: drops its schemas and dead runs' leftovers when no other run is live. */
  release: () => Promise<{ dropped: number; deferred: boolean }>;
}

/** Marks a run live on the test database (test/run.ts, for its whole PostgreSQL pass). */
export async function holdRun(runId: string): Promise<RunLock> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  await sweep(c, runId); // leftovers of interrupted runs, before this run is live
  await c.query('select pg_advisory_lock_shared($1, $2)', [LOCKS, LIVE]);
  await c.query('select pg_advisory_lock($1, hashtext($2))', [LOCKS, runId]);
  return {
    release: async () => {
      try {
        await c.query('select pg_advisory_unlock_shared($1, $2)', [LOCKS, LIVE]);
        return await sweep(c, runId, true);
      } finally {
        await c.end();
      }
    },
  };
}

/** Drop this run's schemas (`own`) and those of dead runs, if no other run is live; else leave them. */
async function sweep(c: pg.Client, runId: string, own = false): Promise<{ dropped: number; deferred: boolean }> {
  const { rows } = await c.query<{ alone: boolean }>('select pg_try_advisory_lock($1, $2) as alone', [LOCKS, LIVE]);
  if (!rows[0].alone) return { dropped: 0, deferred: true };
  try {
    const schemas = (await c.query<{ nspname: string }>(`select nspname from pg_namespace where nspname like 't\\_%'`)).rows.map((r) => r.nspname);
    const runs = new Set(schemas.map((s) => SCHEMA.exec(s)?.[1]).filter((r): r is string => !!r));
    const dead = new Set<string>();
    for (const r of runs) {
      if (r === runId) {
        if (own) dead.add(r);
        continue;
      }
      // Taken at once: nobody holds it, so that run is over (it cannot start again: ids are never reused).
      const free = (await c.query<{ free: boolean }>('select pg_try_advisory_lock($1, hashtext($2)) as free', [LOCKS, r])).rows[0].free;
      if (free) {
        dead.add(r);
        await c.query('select pg_advisory_unlock($1, hashtext($2))', [LOCKS, r]);
      }
    }
    const drop = schemas.filter((s) => dead.has(SCHEMA.exec(s)?.[1] ?? ''));
    for (const s of drop) await c.query(`drop schema if exists ${s} cascade`);
    return { dropped: drop.length, deferred: false };
  } finally {
    await c.query('select pg_advisory_unlock($1, $2)', [LOCKS, LIVE]);
  }
}

/** How many schemas this run has made so far (the runner's proof that the PostgreSQL pass used PostgreSQL). */
export async function countRunSchemas(runId: string): Promise<number> {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    const { rows } = await c.query<{ n: string }>('select count(*) as n from pg_namespace where starts_with(nspname, $1)', [schemaPrefix(runId)]);
    return Number(rows[0].n);
  } finally {
    await c.end();
  }
}
