import { loadConfig, type Config } from '../../src/config.js';
import { AdjustableClock } from '../../src/core/clock.js';
import type { Ctx, Services } from '../../src/core/context.js';
import { EventSubscriptions } from '../../src/core/events.js';
import { randomIds } from '../../src/core/ids.js';
import { Outcome, type CollectionDecl, type ListQuery, type ResourceDecl } from '../../src/core/resource.js';
import { registry, startKinds, timerHandlers } from '../../src/registry.js';
import { createUser } from '../../src/resources/users/users.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { Store } from '../../src/store/db.js';
import { freshDatabase } from './db.js';
import type { Simulator } from '../../src/core/sim.js';
import { createSimulator, type SimDeps } from '../../src/sim/index.js';

/**
 * The service tier's fixture: the services a server is built on (store, injected clock, ids, config, the
 * kinds' timers), with no HTTP. Business rules are tested here by calling a kind's service with a caller's
 * context (`ctx`), and time moves with `advance` (the scheduler runs what fell due; nothing sleeps).
 * On the engine under test (`STRATUS_TEST_DB`): `:memory:` SQLite, or a fresh PostgreSQL schema.
 */
export interface ServiceFixture<S extends Simulator = Simulator> {
  services: Services;
  /** The simulator the services run on (the scripted one when the test gave one). */
  sim: S;
  clock: AdjustableClock;
  scheduler: Scheduler;
  /** A new user (active, with the opening balance) and a context acting as them. */
  user(email?: string): Promise<Ctx>;
  /** The declared kind `name` (its service is what the HTTP routes call). */
  kind(name: string): ResourceDecl;
  /** The collection kind `name`, for `.service.list/get/create/...`. */
  collection(name: string): CollectionDecl;
  /** Moves the clock forward and runs every timer that fell due; answers how many ran. */
  advance(ms: number): Promise<number>;
  close(): Promise<void>;
}

let counter = 0;

export interface ServiceOptions<S extends Simulator> {
  /** The simulator the services run on (test/helpers/scripted-sim.ts); the real one when absent. */
  sim?: (deps: SimDeps) => S;
  /** The injected clock; one following real time when absent (a FrozenClock when counts must not depend on speed). */
  clock?: AdjustableClock;
}

export async function openServices<S extends Simulator = Simulator>(
  flags: Record<string, string> = {},
  kinds: ResourceDecl[] = registry,
  opts: ServiceOptions<S> = {},
): Promise<ServiceFixture<S>> {
  const db = await freshDatabase();
  const config: Config = loadConfig({ db: db.url, port: '0', 'log-level': 'silent', 'rate-limits': 'off', ...flags }, {});
  const store = await Store.open(config.db, { poolSize: 4, cacheMiB: config.cacheMiB, statementCache: config.statementCache });
  const clock = opts.clock ?? new AdjustableClock();
  // The simulator reads the services' clock and config at every call (a test may swap the clock).
  const base = { store, clock, ids: randomIds, config, events: new EventSubscriptions() };
  const sim = (opts.sim ?? (createSimulator as (deps: SimDeps) => S))(base);
  const services: Services = Object.assign(base, { sim });
  await startKinds(services, kinds);
  const scheduler = new Scheduler(services, timerHandlers(kinds));
  const byName = new Map(kinds.map((k) => [k.kind, k]));
  const kind = (name: string): ResourceDecl => {
    const k = byName.get(name);
    if (!k) throw new Error(`no kind ${name}`);
    return k;
  };
  return {
    services,
    sim,
    clock,
    scheduler,
    async user(email = `svc${++counter}-${process.pid}@example.com`) {
      const row = await createUser(services, { email, password: `pw-${counter}-secret` });
      return { ...services, caller: { uuid: row.uuid, email: row.email, state: row.state } };
    },
    kind,
    collection(name) {
      const k = kind(name);
      if (k.shape !== 'collection') throw new Error(`${name} is a singleton`);
      return k;
    },
    async advance(ms) {
      clock.advance(ms);
      return scheduler.runDue();
    },
    async close() {
      await scheduler.stop();
      await store.close();
      await db.drop();
    },
  };
}

/** A list query as the HTTP layer parses one: `filters` as name -> AND-groups of OR-values. */
export function listQuery(q: { filters?: Record<string, string | string[]>; limit?: number; offset?: number } = {}): ListQuery {
  const filters = new Map<string, string[][]>();
  for (const [k, v] of Object.entries(q.filters ?? {})) filters.set(k, [Array.isArray(v) ? v : [v]]);
  return { filters, limit: q.limit ?? 0, offset: q.offset ?? 0 };
}

/** A service call's value, whether it answered plainly or as an Outcome (a status or headers besides). */
export const value = <T>(w: T | Outcome<T>): T => (w instanceof Outcome ? w.value : w);
