import type { Services } from '../core/context.js';
import { endAllSessions, endUserSessions } from '../resources/accounts/sessions.js';

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
  'usage_records',
  'burst_usage',
  'burst_usage_daily',
  'ledger',
  'subscriptions',
  'billing_accounts',
  'burst_levels',
  'event_outbox',
  'audit_log',
  'sim_state',
  'ip_servers',
  'vlan_servers',
  'fwpolicy_servers',
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
      // Ended sessions are announced: their event-stream sockets close.
      deleted[table] = table === 'sessions' ? await endAllSessions(tx, s) : Number((await q.executeTakeFirst()).numDeletedRows);
    }
    return deleted;
  });
}

/**
 * Empties one account (`POST /_stratus/admin/reset {"email"}`, `stratus reset EMAIL`): everything it owns
 * (resources, their tags, ACLs, network and simulator state, pending timers), its counts, sessions,
 * audit log and events, in one transaction. The user stays with its password, state, profile and rate-limit
 * override: a pipeline resets its test account between runs and logs in as before. Other accounts are
 * untouched (their tags lose members that were this account's objects).
 */
export async function resetAccount(s: Services, userUuid: string): Promise<Record<string, number>> {
  return s.store.transaction(async (tx) => {
    const deleted: Record<string, number> = {};
    const owned = () => tx.selectFrom('resources').select('uuid').where('owner_uuid', '=', userUuid);
    const run = async (table: string, q: { executeTakeFirst(): Promise<{ numDeletedRows: bigint }> }) => {
      deleted[table] = (deleted[table] ?? 0) + Number((await q.executeTakeFirst()).numDeletedRows);
    };
    await run('timers', tx.deleteFrom('timers').where('unique_key', 'is', null).where('subject', 'in', owned()));
    await run('sim_state', tx.deleteFrom('sim_state').where('uuid', 'in', owned()));
    await run(
      'tag_members',
      tx.deleteFrom('tag_members').where((eb) => eb.or([eb('tag_uuid', 'in', owned()), eb('res_uuid', 'in', owned())])),
    );
    await run('acl_grantees', tx.deleteFrom('acl_grantees').where('acl_uuid', 'in', owned()));
    await run('acl_rules', tx.deleteFrom('acl_rules').where('acl_uuid', 'in', owned()));
    await run(
      'acl_tags',
      tx.deleteFrom('acl_tags').where((eb) => eb.or([eb('acl_uuid', 'in', owned()), eb('tag_uuid', 'in', owned())])),
    );
    await run(
      'ip_servers',
      tx.deleteFrom('ip_servers').where((eb) => eb.or([eb('server_uuid', 'in', owned()), eb('address', 'in', owned())])),
    );
    await run(
      'vlan_servers',
      tx.deleteFrom('vlan_servers').where((eb) => eb.or([eb('server_uuid', 'in', owned()), eb('vlan_uuid', 'in', owned())])),
    );
    await run(
      'fwpolicy_servers',
      tx.deleteFrom('fwpolicy_servers').where((eb) => eb.or([eb('server_uuid', 'in', owned()), eb('policy_uuid', 'in', owned())])),
    );
    await run('notification_preferences', tx.deleteFrom('notification_preferences').where('contact_uuid', 'in', owned()));
    await run('resources', tx.deleteFrom('resources').where('owner_uuid', '=', userUuid));
    // Its money: subscriptions (and their renewal timers), the ledger, the balance (back to the opening one).
    const subscriptions = tx
      .selectFrom('subscriptions')
      .select((eb) => eb.cast<string>('id', 'varchar(32)').as('id'))
      .where('owner_uuid', '=', userUuid);
    await run('timers', tx.deleteFrom('timers').where('kind', 'in', ['subscription.notice', 'subscription.end']).where('subject', 'in', subscriptions));
    await run('subscriptions', tx.deleteFrom('subscriptions').where('owner_uuid', '=', userUuid));
    await run('ledger', tx.deleteFrom('ledger').where('owner_uuid', '=', userUuid));
    // Its usage records (/usage/, /burstusage/, /dailyburstusage/).
    await run('usage_records', tx.deleteFrom('usage_records').where('owner_uuid', '=', userUuid));
    await run('burst_usage', tx.deleteFrom('burst_usage').where('owner_uuid', '=', userUuid));
    await run('burst_usage_daily', tx.deleteFrom('burst_usage_daily').where('owner_uuid', '=', userUuid));
    await run('billing_accounts', tx.deleteFrom('billing_accounts').where('owner_uuid', '=', userUuid));
    await run('notifications', tx.deleteFrom('notifications').where('owner_uuid', '=', userUuid));
    await run('notification_deliveries', tx.deleteFrom('notification_deliveries').where('owner_uuid', '=', userUuid));
    // Counts go to 0 with a new version (kept rows: the repository caches by (kind, owner, version)).
    const counts = await tx
      .updateTable('resource_counts')
      .set((eb) => ({ n: 0, version: eb('version', '+', 1) }))
      .where('owner_uuid', '=', userUuid)
      .executeTakeFirst();
    deleted.resource_counts = Number(counts.numUpdatedRows);
    await run('audit_log', tx.deleteFrom('audit_log').where('owner_uuid', '=', userUuid));
    await run('event_outbox', tx.deleteFrom('event_outbox').where('owner_uuid', '=', userUuid));
    deleted.sessions = await endUserSessions(tx, s, userUuid);
    await run('signup_tokens', tx.deleteFrom('signup_tokens').where('user_uuid', '=', userUuid));
    return deleted;
  });
}
