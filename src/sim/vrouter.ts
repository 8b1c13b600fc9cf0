import type { Services } from '../core/context.js';
import type { Enforced } from '../core/sim.js';
import type { Db, Tx } from '../store/db.js';
import { dropState, readState, readStates, writeState } from '../store/sim.js';

/**
 * The simulated virtual router's firewall: what it enforces for each active policy (its place in the
 * router's order, the interfaces, the filters in the order it tries them), kept in the simulator's table
 * (kind `vrouter_fw`, keyed by policy), never in the API body. The API side (resources/vrfwpolicies)
 * decides what the router should enforce and when (a job per operation); the router takes it when the
 * operation's time, `vrouter.firewall` ms of the injected clock, is over.
 */
export type { Enforced };

const STATE = 'vrouter_fw';

/** How long the router takes to apply or remove a policy's filters. */
export const routerMs = (s: Pick<Services, 'config'>) => s.config.delays['vrouter.firewall'];

/** What the router enforces for a policy now (null: nothing). */
export async function enforcedFor<R>(db: Db | Tx, policy: string): Promise<Enforced<R> | null> {
  return ((await readState<{ applied: Enforced<R> }>(db, STATE, policy)).applied as Enforced<R> | undefined) ?? null;
}

/** The same for many policies (one query); policies with nothing enforced are absent. */
export async function enforcedForMany<R>(db: Db | Tx, policies: readonly string[]): Promise<Map<string, Enforced<R>>> {
  const states = await readStates<{ applied: Enforced<R> }>(db, STATE, policies);
  return new Map([...states].filter(([, s]) => s.applied).map(([uuid, s]) => [uuid, s.applied as Enforced<R>]));
}

/** The router takes a policy's configuration (null: it removes the policy's filters). */
export async function enforce<R>(tx: Tx, policy: string, config: Enforced<R> | null): Promise<void> {
  if (config) await writeState(tx, STATE, policy, { applied: config });
  else await dropState(tx, STATE, policy);
}
