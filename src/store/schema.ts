import type { Generated, Selectable } from 'kysely';

/** A row of table `T` as a read returns it (callers outside the store never import kysely). */
export type RowOf<T> = Selectable<T>;

/** Row types of every table, as Kysely sees them. JSON columns hold text in both engines. */
export interface UsersTable {
  uuid: string;
  email: string;
  password_hash: string | null;
  /** MD5(email:users:password) for HTTP Digest; null until a password is set. */
  digest_ha1: string | null;
  state: string;
  profile: string;
  created_at: string;
}

/**
 * One table for every declared resource kind: the columns that filters, visibility and ordering need are
 * real indexed columns; the rest of the object is the JSON `body`.
 */
export interface ResourcesTable {
  seq: Generated<number>;
  kind: string;
  uuid: string;
  owner_uuid: string | null;
  name: string | null;
  /** Mirror of the kind's status/state field, for indexed filters. */
  status: string | null;
  body: string;
  /** Raised by every write of the body: (uuid, version) names one state of the object. */
  version: Generated<number>;
  created_at: string;
  updated_at: string;
}

/** Resources per (kind, owner); '' is the ownerless library. */
export interface ResourceCountsTable {
  kind: string;
  owner_uuid: string;
  n: number;
  /** Raised with every change of n. */
  version: Generated<number>;
}

/** Counters raised by triggers in the writing transaction (migration 0050): `sharing` for ACL and membership writes. */
export interface ChangeCountersTable {
  scope: string;
  n: number;
}

/** Counters per answer scope raised by SQLite's triggers (migration 0090, store/answer-scopes.ts): `o:<owner>`, `grants`. */
export interface AnswerScopesTable {
  scope: string;
  n: number;
}

/** Tag membership: which resources carry which tag (both directions are indexed). */
export interface TagMembersTable {
  seq: Generated<number>;
  tag_uuid: string;
  res_type: string;
  res_uuid: string;
}

export interface SettingsTable {
  key: string;
  value: string;
}

export interface AclGranteesTable {
  acl_uuid: string;
  grantee_uuid: string;
  position: number;
}

export interface AclRulesTable {
  acl_uuid: string;
  permission: string;
}

export interface AclTagsTable {
  acl_uuid: string;
  tag_uuid: string;
  position: number;
}

/** Cookie sessions: the session id only as its SHA-256, the CSRF token the session's unsafe requests must echo. */
export interface SessionsTable {
  id_hash: string;
  user_uuid: string;
  csrf_token: string;
  created_at: string;
  expires_ms: number;
}

/** One-time sign-up links (SHA-256 of the token). */
export interface SignupTokensTable {
  token_hash: string;
  user_uuid: string;
  created_at: string;
  expires_ms: number;
}

/** Highest Digest `nc` used per nonce, until the nonce expires. */
export interface DigestNoncesTable {
  nonce: string;
  max_nc: number;
  expires_ms: number;
}

/** Failed-login counters (login protection). */
export interface LoginFailuresTable {
  key: string;
  window_start_ms: number;
  failures: number;
  locked_until_ms: number;
  /** On pair counters: the keys of their account and address counters (for unlocking); null otherwise. */
  account_key: string | null;
  address_key: string | null;
}

/** One fixed window of one rate-limit rule for one user or client address (see src/http/ratelimit/). */
export interface RateCountersTable {
  bucket: string;
  count: number;
  /** The rule's limit when last counted; the upsert compares against it. */
  lim: number;
  /** Window end, ms since the epoch. */
  expires_at: number;
}

/** An operator's per-account rate-limit rules: `off`, or a rule list such as `GET=1000/min,PUT=off`. */
export interface RateLimitOverridesTable {
  user_uuid: string;
  rules: string;
  updated_at: string;
}

export interface TimersTable {
  id: Generated<number>;
  kind: string;
  subject: string;
  /** Epoch ms of the injected clock (compared as time: see migration 0022). */
  due_ms: number;
  payload: string;
  state: 'pending' | 'failed';
  attempts: number;
  last_error: string | null;
  created_at: string;
  /** Set on recurring timers: one pending row per key across every process. */
  unique_key: string | null;
}

/** What the simulated infrastructure holds about one object (never part of its API body). */
export interface SimStateTable {
  kind: string;
  uuid: string;
  state: string;
}

/** Events with subscribers (billing, notifications, the event stream), written with their change. */
export interface EventOutboxTable {
  seq: Generated<number>;
  type: string;
  owner_uuid: string | null;
  resource_kind: string | null;
  resource_uuid: string | null;
  payload: string;
  created_at: string;
}

export interface AuditLogTable {
  seq: Generated<number>;
  /** Whose log the entry belongs to (the owner of the resource acted on). */
  owner_uuid: string;
  actor_uuid: string | null;
  action: string;
  category: string;
  uuid: string;
  details: string;
  /** 1 or 0 */
  success: number;
  error_type: string | null;
  error_point: string | null;
  error_message: string;
  timestamp: string;
}

/** A public IP in use by a server: statically configured (dynamic 0) or leased by DHCP (dynamic 1). */
export interface IpServersTable {
  address: string;
  server_uuid: string;
  dynamic: number;
}

/** A server with a NIC in a private VLAN. */
export interface VlanServersTable {
  vlan_uuid: string;
  server_uuid: string;
}

/** A server with a NIC that uses a firewall policy. */
export interface FwpolicyServersTable {
  policy_uuid: string;
  server_uuid: string;
}

/** A notification preference that differs from the default (notify/types.ts). */
export interface NotificationPreferencesTable {
  contact_uuid: string;
  medium: string;
  type: string;
  value: number;
}

/** An outbox event already turned into notifications. */
export interface NotificationFanoutTable {
  seq: number;
}

/** One e-mail or webhook call, retried until sent (or given up). */
export interface NotificationDeliveriesTable {
  id: Generated<number>;
  owner_uuid: string;
  channel: 'email' | 'webhook';
  target_uuid: string;
  address: string;
  type: string;
  message_id: string;
  /** JSON: what is sent (subject, text, html; or the webhook body). */
  content: string;
  state: 'pending' | 'sent' | 'failed';
  attempts: number;
  due_ms: number;
  last_error: string | null;
  created_at: string;
  sent_at: string | null;
}

/** The user's notification feed (`api` medium). */
export interface NotificationsTable {
  seq: Generated<number>;
  uuid: string;
  owner_uuid: string;
  contact_uuid: string;
  type: string;
  subject: string;
  text: string;
  created_at: string;
  read_at: string | null;
}

/** An account's money (reference §16.1): an exact decimal as text. */
export interface BillingAccountsTable {
  owner_uuid: string;
  balance: string;
  currency: string;
  credit_limit: string | null;
  notice: string | null;
  updated_at: string;
}

/** A debit (positive `amount`) or credit (negative) of an account (reference §16.4). */
export interface LedgerTable {
  id: Generated<number>;
  owner_uuid: string;
  amount: string;
  billing_cycle: number | null;
  initial: string;
  end_balance: string;
  interval: number | null;
  human_interval: string | null;
  poll_time: string;
  reason: string;
  resource: string | null;
  resource_amount: string | null;
  time: string;
}

/** What an account's objects used at one poll (`/usage/`): `records` is `[[resource, uuid, amount], …]` as JSON. */
export interface UsageRecordsTable {
  id: Generated<number>;
  owner_uuid: string;
  poll_ms: number;
  n: number;
  records: string;
}

/** An account's burst of one charged resource at one poll (`/burstusage/`). */
export interface BurstUsageTable {
  id: Generated<number>;
  uuid: string;
  owner_uuid: string;
  date_ms: number;
  resource_type: string;
  amount: string;
  usage: number;
}

/** An account's burst of one resource over one UTC day (`/dailyburstusage/`), summed poll by poll. */
export interface BurstUsageDailyTable {
  owner_uuid: string;
  day: string;
  resource_type: string;
  amount: string;
  unit_seconds: string;
}

/** The burst level in force (`current`) and the one that follows (`next`) per priced resource. */
export interface BurstLevelsTable {
  resource: string;
  current: number;
  next: number;
  updated_at: string;
}

/** A subscription bought (reference §16.8); `root_id` is the first of its extension chain. */
export interface SubscriptionsTable {
  id: Generated<number>;
  uuid: string;
  owner_uuid: string;
  resource: string;
  amount: number;
  start_time: string;
  end_time: string;
  /** The window as epoch ms: what queries compare (the text above is what the API prints). */
  start_ms: number;
  end_ms: number;
  period: string | null;
  price: string;
  discount_amount: string;
  discount_percent: string;
  auto_renew: number;
  subscribed_object: string | null;
  parent_id: number | null;
  root_id: number | null;
  created_at: string;
  /** Volume covered so far (traffic subscriptions); 0 for time-based ones. */
  consumed: Generated<number>;
}

/** Changes an operator command made on SQLite, for a serving process's event stream (store/changes.ts). */
/** A serving process's announcements of a committed transaction not yet NOTIFYed (migration 0131). */
export interface AnnouncePendingTable {
  id: Generated<number>;
  /** The answer payloads, each ending with a newline (the `stratus.announced` setting's form). */
  payloads: string;
  /** The event stream's changes (JSON), or null. */
  changes: string | null;
  created_ms: number;
}

export interface ChangeRelayTable {
  seq: Generated<number>;
  changes: string;
}

/** One distinct block of drive data (store/data/): its bytes and how many map entries refer to it. */
export interface DataBlocksTable {
  hash: string;
  data: Buffer;
  refs: number;
}

/** Which block is at each block index of a drive or snapshot (absent: zeroes). */
export interface DataMapsTable {
  map: string;
  idx: number;
  hash: string;
}

/** A chunk of a chunked or resumable upload that arrived: where it starts in the image, and its bytes. */
export interface UploadChunksTable {
  drive: string;
  offset: number;
  size: number;
}

export interface Database {
  change_relay: ChangeRelayTable;
  announce_pending: AnnouncePendingTable;
  data_blocks: DataBlocksTable;
  data_maps: DataMapsTable;
  upload_chunks: UploadChunksTable;
  notification_preferences: NotificationPreferencesTable;
  notification_fanout: NotificationFanoutTable;
  notification_deliveries: NotificationDeliveriesTable;
  notifications: NotificationsTable;
  subscriptions: SubscriptionsTable;
  billing_accounts: BillingAccountsTable;
  ledger: LedgerTable;
  usage_records: UsageRecordsTable;
  burst_usage: BurstUsageTable;
  burst_usage_daily: BurstUsageDailyTable;
  burst_levels: BurstLevelsTable;
  timers: TimersTable;
  sim_state: SimStateTable;
  event_outbox: EventOutboxTable;
  audit_log: AuditLogTable;
  ip_servers: IpServersTable;
  vlan_servers: VlanServersTable;
  fwpolicy_servers: FwpolicyServersTable;
  rate_counters: RateCountersTable;
  rate_limit_overrides: RateLimitOverridesTable;
  acl_grantees: AclGranteesTable;
  acl_rules: AclRulesTable;
  acl_tags: AclTagsTable;
  settings: SettingsTable;
  sessions: SessionsTable;
  signup_tokens: SignupTokensTable;
  digest_nonces: DigestNoncesTable;
  login_failures: LoginFailuresTable;
  users: UsersTable;
  resources: ResourcesTable;
  resource_counts: ResourceCountsTable;
  change_counters: ChangeCountersTable;
  answer_scopes: AnswerScopesTable;
  tag_members: TagMembersTable;
}
