import type { Services } from '../core/context.js';

/**
 * Every table of stored state, children before what they refer to. `settings` stays (the Digest secret, the
 * demo login), and so do the recurring timers (the reconciler's cadence) and the drive library: what is
 * left is a service as it was just after its first start, with the same credentials.
 */
const TABLES = [
  'notification_fanout',
  'notification_deliveries',
  'notifications',
  'notification_preferences',
  'ledger',
  'subscriptions',
  'billing_accounts',
  'burst_levels',
  'event_outbox',
  'audit_log',
  'sim_state',
  'ip_servers',
  'vlan_servers',
  'tag_members',
  'acl_grantees',
  'acl_rules',
  'acl_tags',
  'resource_counts',
  'resources',
  'rate_counters',
  'rate_limit_overrides',
  'sessions',
  'signup_tokens',
  'digest_nonces',
  'login_failures',
  'users',
] as const;

/**
 * Empties the service (`POST /_stratus/admin/reset`, `stratus reset`): every user and everything they own,
 * every count, session, lock and pending timer, in one transaction. The caller puts back what a start puts
 * back (the library catalogue, the demo login) and drops what its process caches.
 */
export async function resetAll(s: Services): Promise<Record<string, number>> {
  return s.store.transaction(async (tx) => {
    const deleted: Record<string, number> = {};
    const timers = await tx.deleteFrom('timers').where('unique_key', 'is', null).executeTakeFirst();
    deleted.timers = Number(timers.numDeletedRows);
    for (const table of TABLES) {
      let q = tx.deleteFrom(table);
      // The drive library (no owner) is the deployment's, not state: it stays, with its count.
      if (table === 'resources') q = q.where('owner_uuid', 'is not', null);
      if (table === 'resource_counts') q = q.where('owner_uuid', '<>', '');
      deleted[table] = Number((await q.executeTakeFirst()).numDeletedRows);
    }
    return deleted;
  });
}
