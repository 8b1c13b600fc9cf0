import type { Database } from './schema.js';

/**
 * Every table of the schema, described once. Reset, export/import and the answer-change announcements
 * read this description instead of keeping their own lists, and the type makes a table added to
 * `schema.ts` without a description a compile error (a test checks the database has exactly these).
 *
 * - `family`: the store module that owns its SQL (`src/store/<family>`).
 * - `reset`: what resetting the whole service does to it: `empty` it, `keep` it (deployment settings,
 *   the drive library's catalogue), or keep only the rows `keepWhere` names (recurring timers, the library's
 *   own rows and counts).
 * - `exported`: travels in a state file (`stratus export`); every table does today.
 * - `announces`: on PostgreSQL its writes announce that kept answers may be stale (a statement trigger,
 *   migration 0021). Tables only authentication, rate limits and background bookkeeping write stay quiet.
 *
 * The order is the reset order: a table before what it refers to.
 */
export type TableFamily = 'data' | 'notifications' | 'billing' | 'audit' | 'sim' | 'network' | 'resources' | 'accounts' | 'limits' | 'timers' | 'settings';

export interface TableInfo {
  family: TableFamily;
  reset: 'empty' | 'keep' | { keepWhere: readonly [column: string, op: 'is' | 'is not' | '=' | '<>', value: string | null] };
  exported: boolean;
  announces: boolean;
}

const t = (family: TableFamily, reset: TableInfo['reset'], announces = true): TableInfo => ({ family, reset, exported: true, announces });

export const TABLES: { readonly [K in keyof Database]: TableInfo } = {
  // Changes in transit from an operator command to a serving SQLite process's event stream (usually empty).
  change_relay: { family: 'audit', reset: 'empty', exported: false, announces: false },
  // Announcements of committed transactions on their way to NOTIFY (migration 0131; usually empty).
  announce_pending: { family: 'audit', reset: 'empty', exported: false, announces: false },
  // Drive data (store/data/): bytes, not state. A state file is JSON and carries drives, not their bytes (a
  // 1 GiB image is no JSON document); an imported drive reads as zeroes. Only the maps change answers
  // (a snapshot's size is the difference of two).
  data_blocks: { family: 'data', reset: 'empty', exported: false, announces: false },
  data_maps: { family: 'data', reset: 'empty', exported: false, announces: true },
  upload_chunks: { family: 'data', reset: 'empty', exported: false, announces: false },
  notification_fanout: t('notifications', 'empty', false),
  notification_deliveries: t('notifications', 'empty'),
  notifications: t('notifications', 'empty'),
  notification_preferences: t('notifications', 'empty'),
  usage_records: t('billing', 'empty'),
  burst_usage: t('billing', 'empty'),
  burst_usage_daily: t('billing', 'empty'),
  ledger: t('billing', 'empty'),
  subscriptions: t('billing', 'empty'),
  billing_accounts: t('billing', 'empty'),
  burst_levels: t('billing', 'empty'),
  event_outbox: t('audit', 'empty', false),
  audit_log: t('audit', 'empty'),
  sim_state: t('sim', 'empty'),
  ip_servers: t('network', 'empty'),
  vlan_servers: t('network', 'empty'),
  fwpolicy_servers: t('network', 'empty'),
  tag_members: t('resources', 'empty'),
  acl_grantees: t('resources', 'empty'),
  acl_rules: t('resources', 'empty'),
  acl_tags: t('resources', 'empty'),
  // The drive library (no owner) is the deployment's, not state: it stays, with its count.
  resource_counts: t('resources', { keepWhere: ['owner_uuid', '=', ''] }),
  resources: t('resources', { keepWhere: ['owner_uuid', 'is', null] }),
  // Raised by triggers (migration 0050): derived from writes, never state of its own; a reset keeps it
  // (it only ever grows), and it stays out of state files.
  change_counters: { family: 'resources', reset: 'keep', exported: false, announces: false },
  // Raised by SQLite's triggers (migration 0090): which owners' answers may have changed; kept like change_counters.
  answer_scopes: { family: 'resources', reset: 'keep', exported: false, announces: false },
  rate_counters: t('limits', 'empty', false),
  rate_limit_overrides: t('limits', 'empty'),
  sessions: t('accounts', 'empty', false),
  signup_tokens: t('accounts', 'empty'),
  digest_nonces: t('accounts', 'empty', false),
  login_failures: t('accounts', 'empty', false),
  users: t('accounts', 'empty'),
  // Recurring timers (the reconciler's cadence, the billing poll) are the deployment's; one-off work goes.
  timers: t('timers', { keepWhere: ['unique_key', 'is not', null] }, false),
  // The Digest secret, the shared clock, the demo login.
  settings: t('settings', 'keep'),
};

export type TableName = keyof Database;

export const TABLE_NAMES = Object.keys(TABLES) as TableName[];

/** Tables whose writes never change an API answer (see `announces`). */
export const UNANNOUNCED = TABLE_NAMES.filter((name) => !TABLES[name].announces);
