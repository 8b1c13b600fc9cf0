import { appliedOf } from '../core/sim.js';
import type { Db, Tx } from '../store/db.js';
import { usersOfPolicies } from '../store/network.js';
import { dropState, dropStateIfUnchanged, readStates, readStateTexts, updateState, writeState } from '../store/sim.js';

/**
 * Firewall policies as the simulated network applies them. Every change of a policy's rules raises its
 * version and marks it pending; the network applies pending policies to the public NICs of running
 * servers at the next propagation tick (every 30 s of the injected clock; spec "Limits" 2), never sooner.
 * A guest that powers on applies the versions of that moment. What a running server has applied is kept
 * in its guest state (`fw_applied`: policy -> version), so its runtime can show "applied" or "pending".
 */
export const PROPAGATION_MS = 30_000;

const POLICIES = 'fwpolicies';
const PENDING = 'fw_pending';
const SERVERS = 'servers';

interface PolicyState {
  version: number;
}

/** The current rules version of each policy (1 until its rules first change). */
export async function policyVersions(db: Db | Tx, policies: readonly string[]): Promise<Map<string, number>> {
  const states = await readStates<PolicyState>(db, POLICIES, [...new Set(policies)]);
  return new Map(policies.map((p) => [p, Number(states.get(p)?.version ?? 1)]));
}

/** A policy's rules changed: a new version, applied at the next tick. Returns the new version. */
export async function rulesChanged(tx: Tx, policy: string): Promise<number> {
  const version = ((await policyVersions(tx, [policy])).get(policy) ?? 1) + 1;
  await writeState(tx, POLICIES, policy, { version });
  await writeState(tx, PENDING, policy, { version });
  return version;
}

/** A guest powers on: its NICs apply the current versions of their policies. */
export async function applyOnBoot(tx: Tx, server: string, policies: readonly string[]): Promise<void> {
  const versions = await policyVersions(tx, policies);
  await updateState(tx, SERVERS, server, { fw_applied: policies.length ? Object.fromEntries(versions) : undefined });
}

export { appliedOf };

/**
 * The propagation tick: each policy changed since the last tick reaches the running servers using it.
 * Work is bounded by what changed (pending policies and their servers), never by the number of servers.
 * Servers are locked (in uuid order) before their guest state changes.
 */
export async function propagate(tx: Tx, lockServers: (uuids: string[]) => Promise<unknown>): Promise<number> {
  const pending = await readStateTexts(tx, PENDING);
  if (!pending.length) return 0;
  const policies = pending.map((p) => p.uuid);
  const using = await usersOfPolicies(tx, policies);
  const servers = [...new Set(using.map((u) => u.server_uuid))].sort();
  await lockServers(servers);
  const versions = await policyVersions(tx, policies);
  const guests = await readStates<{ active_since?: number; fw_applied?: Record<string, number> }>(tx, SERVERS, servers);
  let applied = 0;
  for (const server of servers) {
    const guest = guests.get(server);
    if (guest?.active_since === undefined) continue; // not running: it applies the current rules when it boots
    const mine = using.filter((u) => u.server_uuid === server).map((u) => [u.policy_uuid, versions.get(u.policy_uuid)!] as const);
    await updateState(tx, SERVERS, server, { fw_applied: { ...appliedOf(guest), ...Object.fromEntries(mine) } });
    applied++;
  }
  // Only the changes applied here: a change committed meanwhile (a newer version) stays pending.
  for (const p of pending) await dropStateIfUnchanged(tx, PENDING, p.uuid, p.state);
  return applied;
}

/** A deleted policy leaves nothing on the network. */
export async function forgetPolicy(tx: Tx, policy: string): Promise<void> {
  await dropState(tx, POLICIES, policy);
  await dropState(tx, PENDING, policy);
}
