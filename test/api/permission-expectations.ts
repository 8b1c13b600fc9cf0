import type { Permission } from '../../src/core/permissions.js';

/**
 * What the permission matrix expects, written by hand from the spec and the reference, apart from the
 * declarations it checks (src/resources/**): per kind, who reaches its objects, which permissions an ACL can
 * grant on it, and per action the permission a grantee needs and the status it answers. The matrix test
 * derives every expected status from this table (and the caller), never from a declaration, and fails where
 * a declaration says otherwise: a wrong declaration no longer passes because the test read it too.
 *
 * Sources: api-2.0.md "Permissions applicable per resource kind" (server: LIST, EDIT, CLONE, START, STOP,
 * OPEN_VNC; drive: LIST, EDIT, CLONE, ATTACH; IP, VLAN, firewall policy: LIST, EDIT, ATTACH) and reference §9
 * (rules also carry DELETE); the actions' asynchrony from the recorded exchanges (202 for server and drive
 * actions, jobs).
 */
export interface KindExpectation {
  /**
   * `owned`: an owner's objects, reached by others only through ACLs (`grants`); `private`: an owner's
   * objects no one else ever reaches (a stranger, granted or not, gets 404 and never sees it listed);
   * `public`: objects of no one, open to every user; `account`: billing kinds, addressed by numeric id
   * and never shared (only "no login, no answer" is checked here: see ACCOUNT_KINDS_CHECKED_ELSEWHERE).
   */
  reach: 'owned' | 'private' | 'public' | 'account';
  /** The permissions an ACL can grant on the kind (`owned` kinds only). */
  grants?: readonly Permission[];
  /** Per action: the permission a grantee needs, and the answer's status (202 asynchronous, 200 at once). */
  actions?: Readonly<Record<string, { permission: Permission; status: 200 | 202 }>>;
}

const async = (permission: Permission) => ({ permission, status: 202 as const });
const sync = (permission: Permission) => ({ permission, status: 200 as const });

export const EXPECTED: Readonly<Record<string, KindExpectation>> = {
  servers: {
    reach: 'owned',
    grants: ['LIST', 'EDIT', 'CLONE', 'START', 'STOP', 'OPEN_VNC', 'DELETE'],
    actions: {
      start: async('START'),
      stop: async('STOP'),
      shutdown: async('STOP'),
      open_vnc: async('OPEN_VNC'),
      close_vnc: async('OPEN_VNC'),
      open_console: async('OPEN_VNC'),
      close_console: async('OPEN_VNC'),
      clone: async('CLONE'),
    },
  },
  // upload_chunk: the chunked upload protocol's link for a chunk (pycloudsigma's upload_client.py) writes the drive.
  drives: {
    reach: 'owned',
    grants: ['LIST', 'EDIT', 'CLONE', 'ATTACH', 'DELETE'],
    actions: { clone: async('CLONE'), resize: async('EDIT'), upload_chunk: sync('EDIT') },
  },
  // A snapshot is shared as its drive is, less ATTACH (a snapshot is never attached to a server).
  snapshots: { reach: 'owned', grants: ['LIST', 'EDIT', 'CLONE', 'DELETE'], actions: { clone: async('CLONE') } },
  fwpolicies: { reach: 'owned', grants: ['LIST', 'EDIT', 'ATTACH', 'DELETE'], actions: { evaluate: sync('LIST') } },
  // IPs and VLANs come from subscriptions: they are never deleted through the API, so DELETE is no grant.
  ips: { reach: 'owned', grants: ['LIST', 'EDIT', 'ATTACH'] },
  vlans: { reach: 'owned', grants: ['LIST', 'EDIT', 'ATTACH'] },
  // The test-only kind exercising the machinery (test/helpers/widgets.ts).
  widgets: { reach: 'owned', grants: ['LIST', 'EDIT', 'ATTACH', 'DELETE'], actions: { poke: async('ATTACH') } },

  libdrives: { reach: 'public', actions: { clone: async('CLONE') } },

  acls: { reach: 'private' },
  jobs: { reach: 'private' },
  logs: { reach: 'private' },
  keypairs: { reach: 'private' },
  pubkeys: { reach: 'private' },
  tags: { reach: 'private' },
  vrfwpolicies: { reach: 'private', actions: { enable: async('EDIT'), disable: async('EDIT') } },
  vrfwfilters: { reach: 'private', actions: { enable_logging: async('EDIT'), disable_logging: async('EDIT') } },
  notification_contacts: { reach: 'private' },
  notification_preferences: { reach: 'private' },
  notifications: { reach: 'private' },
  webhooks: { reach: 'private', actions: { test: async('EDIT') } },
  usage: { reach: 'private' },
  burstusage: { reach: 'private' },
  dailyburstusage: { reach: 'private' },

  pricing: { reach: 'account' },
  discount: { reach: 'account' },
  licenses: { reach: 'account' },
  ledger: { reach: 'account' },
  subscriptions: { reach: 'account', actions: { extend: sync('EDIT'), auto_renew: sync('EDIT') } },
  subscriptioncalculator: { reach: 'account', actions: { extend: sync('EDIT') } },
  groupedsubscriptions: { reach: 'account' },

  // Singletons: one per account (or the service's own), every authenticated user reads and writes their own.
  profile: { reach: 'private' },
  capabilities: { reach: 'private' },
  locations: { reach: 'private' },
  cloud_status: { reach: 'private' },
  balance: { reach: 'private' },
  currentusage: { reach: 'private' },
};

/**
 * Account kinds: only the anonymous caller is played here (401 on every route); that one account never
 * reads or acts on another's is checked where their numeric ids are made: billing.test.ts,
 * subscriptions.test.ts.
 */
export const ACCOUNT_KINDS_CHECKED_ELSEWHERE = 'billing.test.ts, subscriptions.test.ts';
