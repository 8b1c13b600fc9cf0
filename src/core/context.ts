import type { Clock } from './clock.js';
import type { IdGenerator } from './ids.js';
import type { Store } from '../store/db.js';
import type { Config } from '../config.js';
import type { EventSubscriptions } from './events.js';
import type { Simulator } from './sim.js';

export { ownerRef, userUri } from '../store/repository.js';

/** The authenticated user a request acts for. */
export interface Caller {
  uuid: string;
  email: string;
  state: string;
}

/** What every service needs, injected once at start-up (tests swap the clock and ids). */
export interface Services {
  store: Store;
  clock: Clock;
  ids: IdGenerator;
  config: Config;
  /** The simulated infrastructure (core/sim.ts): the only way resource code reaches "hardware". */
  sim: Simulator;
  /**
   * Where the deployment's shared clock offset is kept when it is not `store`: with several locations, the
   * first location's store (one clock for every location, admin/clock.ts).
   */
  clockStore?: Store;
  /** Event types something consumes (an outbox row is written for those); none when absent. */
  events?: EventSubscriptions;
  /** DNS for outgoing webhook deliveries (tests map names to addresses); the system's resolver when absent. */
  resolve?: Resolver;
}

/** A host name's addresses, as `dns.promises.lookup(host, {all: true})` gives them. */
export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

/** A service call: who asks, plus the injected services. */
export interface Ctx extends Services {
  caller: Caller;
}
