import type { Clock } from './clock.js';
import type { IdGenerator } from './ids.js';
import type { Store } from '../store/db.js';
import type { Config } from '../config.js';

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
}

/** A service call: who asks, plus the injected services. */
export interface Ctx extends Services {
  caller: Caller;
}

export const userUri = (uuid: string) => `/api/2.0/user/${uuid}/`;
export const ownerRef = (uuid: string | null) => (uuid ? { resource_uri: userUri(uuid), uuid } : null);
