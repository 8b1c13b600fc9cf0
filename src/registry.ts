import type { ResourceDecl } from './core/resource.js';
import type { Services } from './core/context.js';
import type { TimerHandler } from './core/timers.js';
import type { Meter } from './core/metering.js';
import { billingTimer } from './billing/engine.js';
import { acls } from './resources/acls/acls.js';
import { balance } from './resources/billing/balance.js';
import { discount, licenses, pricing } from './resources/billing/catalogue-kinds.js';
import { currentUsage } from './resources/billing/currentusage.js';
import { ledger } from './resources/billing/ledger.js';
import { burstUsage, dailyBurstUsage, usage } from './resources/billing/usage.js';
import { groupedSubscriptions, subscriptionCalculator, subscriptions } from './resources/billing/subscription-kinds.js';
import { capabilities } from './resources/capabilities/capabilities.js';
import { drives } from './resources/drives/drives.js';
import { fwpolicies } from './resources/fwpolicies/fwpolicies.js';
import { ips } from './resources/ips/ips.js';
import { jobs } from './resources/jobs/jobs.js';
import { keypairs, pubkeys } from './resources/keypairs/keypairs.js';
import { libdrives } from './resources/libdrives/libdrives.js';
import { cloudStatus, locations } from './resources/location/location.js';
import { logs } from './resources/logs/logs.js';
import { notificationContacts } from './resources/notifications/contacts.js';
import { notificationFeed } from './resources/notifications/feed.js';
import { notificationPreferences } from './resources/notifications/preferences.js';
import { webhooks } from './resources/notifications/webhooks.js';
import { profile } from './resources/profile/profile.js';
import { servers } from './resources/servers/servers.js';
import { snapshots } from './resources/snapshots/snapshots.js';
import { tags } from './resources/tags/tags.js';
import { vlans } from './resources/vlans/vlans.js';
import { vrfwfilters } from './resources/vrfwpolicies/vrfwfilters.js';
import { vrfwpolicies } from './resources/vrfwpolicies/vrfwpolicies.js';

/**
 * The composition root's list of resource kinds: every kind the API serves, each a self-describing
 * declaration (fields, routes, actions, timers, start-up work). Adding a kind is adding it here; nothing
 * below this file imports a kind.
 */
export const registry: ResourceDecl[] = [
  acls,
  drives,
  fwpolicies,
  jobs,
  libdrives,
  servers,
  snapshots,
  ips,
  vlans,
  logs,
  keypairs,
  pubkeys,
  tags,
  profile,
  capabilities,
  vrfwpolicies,
  vrfwfilters,
  locations,
  cloudStatus,
  notificationContacts,
  notificationPreferences,
  notificationFeed,
  webhooks,
  balance,
  pricing,
  discount,
  licenses,
  ledger,
  subscriptions,
  subscriptionCalculator,
  groupedSubscriptions,
  currentUsage(() => metersOf(registry)),
  burstUsage,
  dailyBurstUsage,
  usage,
];

/** Every kind of durable follow-up work the kinds declare, and what runs it. */
export function timerHandlers(kinds: readonly ResourceDecl[] = registry): Record<string, TimerHandler> {
  const out: Record<string, TimerHandler> = {};
  for (const k of kinds)
    for (const [name, handler] of Object.entries(k.timers ?? {})) {
      if (out[name]) throw new Error(`timer kind ${name} is declared twice`);
      out[name] = handler;
    }
  // The billing poll meters every kind that declares what it uses.
  out['billing.cycle'] = billingTimer(
    metersOf(kinds),
    kinds.flatMap((k) => (k.outOfMoney ? [k.outOfMoney] : [])),
  );
  return out;
}

/** What the kinds use, for billing: each kind's meter. */
export const metersOf = (kinds: readonly ResourceDecl[] = registry): Meter[] => kinds.flatMap((k) => (k.meter ? [k.meter] : []));

/** The kinds' start-up work (the library catalogue into the database), before the service answers. */
export async function startKinds(s: Services, kinds: readonly ResourceDecl[] = registry): Promise<void> {
  for (const k of kinds) await k.startup?.(s);
}
