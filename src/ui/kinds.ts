import type { Obj } from './api.js';

/**
 * What the console shows of each kind of the account's objects, as one table: a generic list page
 * (pages/list.tsx) and a generic detail page (pages/detail.tsx) read a row each, so a kind is a few lines
 * here, never a page of its own. What is NOT here comes from the API itself at run time: the filters a list
 * offers are its `schema/`'s `filtering` (the API's own filters), the fields a detail shows are the object
 * as the API answers it, and any `resource_uri` (or a uuid under a field named in `related`) becomes a link.
 *
 * - `kind`: the API's path segment (`servers` → /api/2.0/servers/); also the console's path.
 * - `columns`: the list's columns; `get` picks a value (default: the key's value), `format` how to show it.
 * - `detailList`: list through `<kind>/detail/` (full objects: a server's NICs and runtime) rather than
 *   the short form.
 * - `search`: the filter the search box uses (`name__contains`, or `name__icontains` for library drives).
 * - `live`: the event stream's `resource_type`s that change this list (src/ui/live.ts).
 * - `related`: fields holding bare uuids (not `{resource_uri}`) and the kind they name.
 * - `actions`: buttons on an object's detail page; each is one call to the API (pages/actions.tsx runs them).
 * - `create`: the fields of the "Create" form (types and choices from the kind's schema), or a custom form name.
 * - `singleton`: the kind answers one object (no detail pages).
 */
export type Format = 'text' | 'status' | 'bytes' | 'mhz' | 'count' | 'time' | 'money' | 'bool' | 'ref' | 'refs' | 'ips';

export interface Column {
  key: string;
  label: string;
  format?: Format;
  get?: (o: Obj) => unknown;
}

export interface Action {
  /** The button's accessible name, e.g. "Start". */
  label: string;
  /** `POST <kind>/<uuid>/action/?do=<do>` */
  do?: string;
  /** `DELETE <kind>/<uuid>/` with these query choices (a server's `recurse`). */
  delete?: { recurse?: string[] };
  /** A custom action form (pages/actions.tsx). */
  form?: 'attach-firewall' | 'tag' | 'share' | 'snapshot';
  /** Shown only while this holds for the object. */
  when?: (o: Obj) => boolean;
  /** Ask before doing it. */
  confirm?: string;
  /** Where to go after it worked: the new object of a clone, the list after a delete. */
  after?: 'new' | 'list' | 'stay';
}

export interface KindDef {
  kind: string;
  label: string;
  group: 'Compute' | 'Storage' | 'Network' | 'Account' | 'Billing';
  columns: Column[];
  detailList?: boolean;
  search?: string;
  live?: string[];
  related?: Record<string, string>;
  actions?: Action[];
  create?: string[] | 'server';
  singleton?: boolean;
  /** Objects have no uuid of their own here: the detail key (a subscription's `id`, an IP's `uuid`). */
  idKey?: string;
}

const name: Column = { key: 'name', label: 'Name' };
const status: Column = { key: 'status', label: 'Status', format: 'status' };
const tags: Column = { key: 'tags', label: 'Tags', format: 'refs' };
const ownerUuid = (o: Obj) => o.owner?.uuid;

export const KINDS: KindDef[] = [
  {
    kind: 'servers',
    label: 'Servers',
    group: 'Compute',
    detailList: true,
    search: 'name__contains',
    live: ['servers'],
    columns: [
      name,
      status,
      { key: 'cpu', label: 'CPU', format: 'mhz' },
      { key: 'mem', label: 'RAM', format: 'bytes' },
      { key: 'ips', label: 'IPs', format: 'ips', get: (o) => o.nics },
      { key: 'drives', label: 'Drives', format: 'count' },
      tags,
    ],
    related: { vlan: 'vlans', firewall_policy: 'fwpolicies', drive: 'drives', pubkeys: 'keypairs' },
    create: 'server',
    actions: [
      { label: 'Start', do: 'start', when: (o) => o.status === 'stopped' },
      { label: 'Stop', do: 'stop', when: (o) => o.status === 'running' },
      { label: 'Shut down (ACPI)', do: 'shutdown', when: (o) => o.status === 'running' },
      { label: 'Clone', do: 'clone', after: 'new' },
      { label: 'Attach firewall policy', form: 'attach-firewall' },
      { label: 'Tag', form: 'tag' },
      { label: 'Share', form: 'share' },
      {
        label: 'Delete',
        delete: { recurse: ['', 'all_drives', 'disks', 'cdroms'] },
        when: (o) => o.status === 'stopped',
        confirm: 'Delete this server?',
        after: 'list',
      },
    ],
  },
  {
    kind: 'drives',
    label: 'Drives',
    group: 'Storage',
    detailList: true,
    search: 'name__contains',
    live: ['drives'],
    columns: [
      name,
      status,
      { key: 'size', label: 'Size', format: 'bytes' },
      { key: 'media', label: 'Media' },
      { key: 'storage_type', label: 'Storage' },
      { key: 'mounted_on', label: 'Mounted on', format: 'refs' },
      tags,
    ],
    create: ['name', 'size', 'media', 'storage_type'],
    actions: [
      { label: 'Clone', do: 'clone', after: 'new' },
      { label: 'Take snapshot', form: 'snapshot' },
      { label: 'Tag', form: 'tag' },
      { label: 'Share', form: 'share' },
      { label: 'Delete', delete: {}, when: (o) => !o.mounted_on?.length, confirm: 'Delete this drive and its data?', after: 'list' },
    ],
  },
  {
    kind: 'libdrives',
    label: 'Library drives',
    group: 'Storage',
    search: 'name__icontains',
    columns: [
      name,
      { key: 'os', label: 'OS' },
      { key: 'version', label: 'Version' },
      { key: 'arch', label: 'Arch' },
      { key: 'size', label: 'Size', format: 'bytes' },
      status,
    ],
    actions: [{ label: 'Clone', do: 'clone', after: 'new' }],
  },
  {
    kind: 'snapshots',
    label: 'Snapshots',
    group: 'Storage',
    detailList: true,
    search: 'name__contains',
    live: ['snapshots'],
    columns: [
      name,
      status,
      { key: 'drive', label: 'Drive', format: 'ref' },
      { key: 'allocated_size', label: 'Allocated', format: 'bytes' },
      { key: 'timestamp', label: 'Taken', format: 'time' },
    ],
    actions: [
      { label: 'Clone to a new drive', do: 'clone', after: 'new' },
      { label: 'Tag', form: 'tag' },
      { label: 'Delete', delete: {}, confirm: 'Delete this snapshot?', after: 'list' },
    ],
  },
  {
    kind: 'fwpolicies',
    label: 'Firewall policies',
    group: 'Network',
    detailList: true,
    search: 'name__contains',
    live: ['fwpolicies'],
    columns: [name, { key: 'rules', label: 'Rules', format: 'count' }, { key: 'servers', label: 'Servers', format: 'refs' }],
    create: ['name'],
    actions: [
      { label: 'Tag', form: 'tag' },
      { label: 'Share', form: 'share' },
      { label: 'Delete', delete: {}, confirm: 'Delete this firewall policy?', after: 'list' },
    ],
  },
  {
    kind: 'vrfwpolicies',
    label: 'Virtual-router policies',
    group: 'Network',
    detailList: true,
    search: 'name__contains',
    live: ['vrfwpolicies'],
    columns: [name, status, { key: 'filters', label: 'Filters', format: 'count' }],
    related: { filters: 'vrfwfilters' },
    actions: [{ label: 'Delete', delete: {}, confirm: 'Delete this policy?', after: 'list' }],
  },
  {
    kind: 'ips',
    label: 'IPs',
    group: 'Network',
    detailList: true,
    search: 'name__contains',
    live: ['ips'],
    columns: [
      { key: 'uuid', label: 'Address' },
      { key: 'server', label: 'Server', format: 'ref' },
      { key: 'subscription', label: 'Subscription', get: (o) => o.subscription?.id },
      tags,
    ],
    actions: [{ label: 'Tag', form: 'tag' }],
  },
  {
    kind: 'vlans',
    label: 'VLANs',
    group: 'Network',
    detailList: true,
    search: 'name__contains',
    live: ['vlans'],
    columns: [
      { key: 'uuid', label: 'VLAN' },
      { key: 'name', label: 'Name', get: (o) => o.meta?.name },
      { key: 'servers', label: 'Servers', format: 'refs' },
      tags,
    ],
    actions: [{ label: 'Tag', form: 'tag' }],
  },
  {
    kind: 'tags',
    label: 'Tags',
    group: 'Account',
    live: ['tags'],
    columns: [name, { key: 'resources', label: 'Resources', format: 'count' }],
    create: ['name'],
    actions: [{ label: 'Delete', delete: {}, confirm: 'Delete this tag (its objects stay)?', after: 'list' }],
  },
  {
    kind: 'acls',
    label: 'ACLs',
    group: 'Account',
    live: ['acls'],
    columns: [name, { key: 'grantees', label: 'Grantees', format: 'count' }, { key: 'rules', label: 'Rules', format: 'count' }],
    actions: [{ label: 'Delete', delete: {}, confirm: 'Delete this ACL (stop sharing)?', after: 'list' }],
  },
  {
    kind: 'keypairs',
    label: 'Keypairs',
    group: 'Account',
    search: 'name__contains',
    live: ['keypairs'],
    columns: [name, { key: 'fingerprint', label: 'Fingerprint' }, { key: 'has_private_key', label: 'Private key', format: 'bool' }],
    create: ['name', 'public_key'],
    actions: [{ label: 'Delete', delete: {}, confirm: 'Delete this keypair?', after: 'list' }],
  },
  {
    kind: 'subscriptions',
    label: 'Subscriptions',
    group: 'Billing',
    idKey: 'id',
    live: ['subscriptions', 'balance'],
    columns: [
      { key: 'id', label: 'Id' },
      { key: 'resource', label: 'Resource' },
      { key: 'amount', label: 'Amount' },
      { key: 'period', label: 'Period' },
      status,
      { key: 'end_time', label: 'Ends', format: 'time' },
      { key: 'price', label: 'Price', format: 'money' },
    ],
    create: ['resource', 'amount', 'period', 'auto_renew'],
  },
  {
    kind: 'notification_contacts',
    label: 'Notification contacts',
    group: 'Account',
    search: 'name__contains',
    columns: [name, { key: 'email', label: 'E-mail' }, { key: 'phone', label: 'Phone' }],
    create: ['name', 'email', 'phone'],
    actions: [{ label: 'Delete', delete: {}, confirm: 'Delete this contact?', after: 'list' }],
  },
  {
    kind: 'notification_preferences',
    label: 'Notification preferences',
    group: 'Account',
    singleton: true,
    columns: [
      { key: 'type', label: 'Type' },
      { key: 'medium', label: 'Medium' },
      { key: 'value', label: 'On', format: 'bool' },
      { key: 'contact', label: 'Contact', format: 'ref' },
    ],
  },
  {
    kind: 'logs',
    label: 'Audit log',
    group: 'Account',
    search: 'name__contains',
    live: ['logs'],
    idKey: '',
    columns: [
      { key: 'timestamp', label: 'Time', format: 'time' },
      { key: 'category', label: 'Category' },
      { key: 'action', label: 'Action' },
      { key: 'success', label: 'Succeeded', format: 'bool' },
      { key: 'error_message', label: 'Error' },
    ],
  },
];

export const kindOf = (kind: string): KindDef | undefined => KINDS.find((k) => k.kind === kind);

/** The key of an object in its kind (uuid, a subscription's id). */
export const idOf = (def: KindDef, o: Obj): string | undefined => {
  const key = def.idKey ?? 'uuid';
  return key ? (o[key] === undefined ? undefined : String(o[key])) : undefined;
};

export const isShared = (o: Obj, me: string | null): boolean => !!me && !!ownerUuid(o) && ownerUuid(o) !== me;
