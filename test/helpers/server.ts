import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import type { ResourceDecl } from '../../src/core/resource.js';
import { loadConfig, type Config } from '../../src/config.js';
import { AdjustableClock } from '../../src/core/clock.js';
import type { Resolver, Services } from '../../src/core/context.js';
import { randomIds } from '../../src/core/ids.js';
import { Store } from '../../src/store/db.js';
import { createUser } from '../../src/resources/users/users.js';
import { freshDatabase } from './db.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { timerHandlers } from '../../src/registry.js';
import { EventSubscriptions } from '../../src/core/events.js';
import { Client } from './client.js';
import { knownContract } from './contract.js';
import { withSimulator } from '../../src/sim/index.js';

export interface TestServer {
  base: string;
  port: number;
  /** The database this server runs on (a file, `:memory:` or a PostgreSQL URL with its test schema). */
  dbUrl: string;
  app: FastifyInstance;
  services: Services;
  clock: AdjustableClock;
  scheduler: Scheduler;
  /** Move the injected clock forward and run every timer that fell due (no sleeping). */
  advance(ms: number): Promise<void>;
  /** A client logged in as a fresh user (Basic auth). */
  user(email?: string): Promise<Client & { uuid: string; email: string; password: string }>;
  /** A client with no credentials. */
  anon(): Client;
  close(): Promise<void>;
}

let counter = 0;

/**
 * The real HTTP server on a loopback port, on a fresh database of the engine under test. Rate limits are
 * off unless the flags ask for them (`{'rate-limits': 'default'}`): suites make hundreds of requests a minute.
 */
export async function startServer(
  flags: Record<string, string> = {},
  kinds?: ResourceDecl[],
  /**
   * `clock`: share another server's clock (two API processes on one database see one time). `resolve`: the
   * DNS webhook deliveries use (map a public-looking name to a local address).
   */
  opts: { clock?: AdjustableClock; anchorStep?: number; resolve?: Resolver } = {},
): Promise<TestServer> {
  // `db` in the flags reopens an existing database (restart tests); otherwise a fresh one.
  const db = flags.db ? { url: flags.db, drop: async () => {} } : await freshDatabase();
  const config: Config = loadConfig({ db: db.url, port: '0', 'log-level': 'silent', 'rate-limits': 'off', ...flags }, {});
  const store = await Store.open(config.db, { poolSize: 4, cacheMiB: config.cacheMiB, statementCache: config.statementCache, anchorStep: opts.anchorStep });
  const clock = opts.clock ?? new AdjustableClock();
  const services: Services = withSimulator({ store, clock, ids: randomIds, config, events: new EventSubscriptions(), resolve: opts.resolve });
  const app = await buildApp(services, kinds);
  // No polling loop: tests drive the simulator by moving the clock (`advance`).
  const scheduler = new Scheduler(services, timerHandlers(kinds));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const port = (app.server.address() as { port: number }).port;
  const base = `http://127.0.0.1:${port}`;
  // The contract the test client checks every answer against, read in-process (test/helpers/contract.ts).
  knownContract(base, (await app.inject({ method: 'GET', url: '/api/2.0/openapi.json' })).body);
  return {
    base,
    port,
    dbUrl: db.url,
    app,
    services,
    clock,
    scheduler,
    async advance(ms: number) {
      clock.advance(ms);
      await scheduler.runDue();
    },
    async user(email = `user${++counter}-${Date.now()}@example.com`) {
      const password = `pw-${counter}-secret`;
      const row = await createUser(services, { email, password });
      return Object.assign(new Client(base, { email, password }), { uuid: row.uuid, email: row.email, password });
    },
    anon: () => new Client(base),
    async close() {
      await app.close();
      await scheduler.stop();
      await store.close();
      await db.drop();
    },
  };
}

/**
 * A second API server on the same database as `first` (PostgreSQL: the same schema, its own connection
 * pool and scheduler), sharing `first`'s clock so both schedulers see the same timers fall due. SQLite's
 * `:memory:` database cannot be shared: there, use one server.
 */
export async function startPeer(first: TestServer, flags: Record<string, string> = {}, kinds?: ResourceDecl[]): Promise<TestServer> {
  if (first.dbUrl === ':memory:') throw new Error('startPeer: an in-memory SQLite database cannot be shared by two servers');
  return startServer({ ...flags, db: first.dbUrl }, kinds, { clock: first.clock });
}
