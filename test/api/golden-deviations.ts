/**
 * Every recorded value the golden replay (test/api/golden-replay.test.ts) finds different in Stratus's answer,
 * and why. The replay compares each answer with the record field by field: keys, list lengths, scalars,
 * normalising only the values another service at another moment must make differently (NORMALISATIONS in
 * test/helpers/replay.ts: new uuids one to one, timestamps, MACs, pool addresses, generated keys, console
 * endpoints). Anything else that differs must be listed here — dump, field path, recorded value, ours, why —
 * or the test fails; an entry that no longer matches a difference fails the suite too (a stale entry hides
 * nothing and misleads).
 *
 * A path is the answer's JSON path (`$.objects[0].name`); `[*]` stands for any index, and an entry covers the
 * path's subtree (`$.objects` covers `$.objects.length` and `$.objects[3].name`). `VARIES` stands for a value
 * that is not the same from run to run (a fresh account's e-mail, the time of the run, what the account holds
 * by then); a string ending in `…` is matched by its start (long keys).
 *
 * Most entries are not Stratus behaving differently but the replay's setup not reproducing the recording's
 * (the account's history, the objects make() creates with its own names): those are named as such below.
 * Behaviour differences are the few `intended` ones, each with its reason; none is left open (a test checks every
 * entry says `setup`, `recording` or `intended`).
 */
export const VARIES = Symbol('varies');

export interface ValueDeviation {
  dump: string;
  path: string;
  recorded: unknown;
  ours: unknown;
  why: string;
}

// Setup that does not reproduce the recording (not behaviour).
const LIST_HISTORY =
  "setup: a list of the recording account's objects, whose members and count are that account's history; the replay's account holds what the replay made by then";
const MADE =
  'setup: the object make() creates for the recorded id has the replay\'s name ("replay") and a minimal setup (no grantees, tags, rules, snapshots, NICs, filters, subscription), not the recorded object\'s';
const ACCOUNT = "setup: the recording's account and its grantee (e-mail, bank reference, uuid, currency); the replay's are fresh test accounts";
const BILLING_ACCOUNT =
  "setup: the recording account's balance, subscriptions, usage and its location's price levels; the replay's account is a fresh one on Stratus's catalogue, and a price for the rest of the month depends on the day of the run";
const CLONE_NAMING_HISTORY = "setup: the account's clone naming was last set by an earlier exchange (drive_clone_naming_set_profile_to_timestamp)";
const LIBRARY = "setup: Stratus's drive library is its own (Ubuntu, Debian, … images), not the recording location's 158 drives";
const LOCATIONS = 'setup: Stratus is one location; the recording lists the 13 of the real cloud';
const TAG_RESOURCES =
  "setup: make() cannot tell the kind of a uuid in a tag's `resources` and makes a server for each (the recording's were VLANs, drives, snapshots, servers)";
const JOB_AT_ONCE = 'setup: make() reads the job the moment it started (the clock stands still); the recording read it finished';
const JOB_KIND = "setup: make() makes a drive clone's job for any recorded job id (the recording's was a server clone)";
const KEYPAIR_KEYS =
  "setup: the key pair make() creates has keys of its own; the PUT sends the recording's keys, which are read-only, so Stratus answers its own";
const RECORDING_MISMATCH =
  'recording: the recorded answer names another object than the recorded request (the exchange was pieced together from two sessions); Stratus answers for the object the request names';

// Intended differences (Stratus answers this way on purpose).
const LIST_METHODS = 'intended: Stratus offers only GET and POST on the list URL (no PUT or bulk DELETE of the collection), and says so';
const DRIVE_SCHEMA = `${LIST_METHODS} (bulk DELETE is offered and listed)`;
const [ACLS_SCHEMA, SERVER_SCHEMA] = [LIST_METHODS, LIST_METHODS];
const JOBS_SCHEMA =
  "intended: jobs are made by the service, never written by clients: their fields say readonly where the record says writable; the recorded defaults of `created` and `last_modified` are the recording's own moments";
const LEDGER_SCHEMA = "intended: the recorded defaults of `poll_time` and `time` are the recording's own moments; Stratus prints no default";
const SUBSCRIPTION_SCHEMA = 'intended: the recorded default of `start_time` is the recording\'s own moment ("now"); Stratus prints no default';
const PROFILE_SCHEMA = "intended: the recorded default of `signup_time` is the recording's own moment; Stratus prints no default, and the field is read-only";
const OLDER_PROFILE =
  'intended: recorded before the profile had its tx-autotopup and network-restriction keys; Stratus answers as the later profile_update recording';
const OLDER_DRIVE = 'intended: recorded before drives showed their sharing (`grantees`, `permissions`); Stratus answers the shape of the later recordings';
const OLDER_SNAPSHOT = 'intended: recorded before snapshots showed their sharing; Stratus answers as snapshot_create';
const OLDER_SERVER = 'intended: recorded before servers showed `cpu_type`, `hypervisor` and `pubkeys`; Stratus answers as server_create_full';
const OTHER_LOCATION =
  'intended: capabilities of another location (solaris-kz hypervisor, other limits); Stratus answers its own, as recorded in `capabilities`';
const ZADARA = 'intended: a clone to `zadara` storage, which the default capabilities do not offer; Stratus clones to the default (dssd)';
const DECIMAL_ZERO = "intended: the same number: Python's Decimal writes a zero with an exponent (`0E-20`), Stratus in plain notation";
const SNAPSHOT_CLONE_URI =
  'recording: the recording nests `resource_uri` as {resource_uri, uuid}, a bug of that dump (reference §7.2); Stratus answers the string';
const PYTHON_REPRS =
  'recording: the recording shows the filters as Python object reprs (a bug of that dump); Stratus answers filter objects, as vrfwpolicy_get';

const IS_SNAPSHOTABLE =
  'intended: the record disagrees with itself: a drive just created (`creating`) or a clone in progress (`cloning_dst`) answers `runtime.is_snapshotable` null in 12 of its 14 answers (drive_create_minimal, _bulk, _zadara, drive_for_snapshots, drive_clone_naming_*, snapshot_clone, …) and true in this one; Stratus answers null until the drive is ready, then true (reference §6)';
const DRIVE_ORDER =
  'intended: the three recorded server creates with two drives (server_create_full, server_recurse_del_*_create) each sent virtio 0:0 (boot_order 1) then ide 0:0 and were answered ide first; the reference lists the rule as unknown (§5 attachments, open questions), and the record fits several (by device name, boot_order nulls first, the request reversed) that other requests would tell apart. Stratus keeps the order the client sent, which it can state and a client can rely on, rather than guess one';

export const DEVIATIONS: ValueDeviation[] = [
  { dump: 'acls_create_with_grantees', path: '$.objects[*].grantees[*].email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  {
    dump: 'acls_create_with_grantees',
    path: '$.objects[*].owner.resource_uri',
    recorded: '/api/2.0/user/3516e556-eb0e-4f0c-bf95-8b642194b8fd/',
    ours: VARIES,
    why: ACCOUNT,
  },
  { dump: 'acls_create_with_grantees', path: '$.objects[*].owner.uuid', recorded: '3516e556-eb0e-4f0c-bf95-8b642194b8fd', ours: VARIES, why: ACCOUNT },
  { dump: 'acls_get', path: '$.grantees.length', recorded: 1, ours: 0, why: MADE },
  { dump: 'acls_get', path: '$.name', recorded: 'test_acl', ours: 'replay', why: MADE },
  { dump: 'acls_get', path: '$.rules.length', recorded: 2, ours: 1, why: MADE },
  { dump: 'acls_get', path: '$.tags.length', recorded: 2, ours: 0, why: MADE },
  { dump: 'acls_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'acls_schema', path: '$.allowed_list_http_methods.length', recorded: 4, ours: 2, why: ACLS_SCHEMA },
  { dump: 'acls_schema', path: '$.allowed_list_http_methods[*]', recorded: 'put', ours: 'post', why: ACLS_SCHEMA },
  { dump: 'acls_update', path: '$.grantees[*].email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  { dump: 'audit_log_list', path: '$.meta.total_count', recorded: 3193934, ours: VARIES, why: LIST_HISTORY },
  { dump: 'audit_log_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'balance_list', path: '$.balance', recorded: '155367.99237092264288897986', ours: '10000.00000000000000000000', why: BILLING_ACCOUNT },
  { dump: 'create_drive_for_acls', path: '$.objects[*].runtime.is_snapshotable', recorded: true, ours: null, why: IS_SNAPSHOTABLE },
  { dump: 'drive_clone', path: '$.objects[*].runtime.is_snapshotable', recorded: true, ours: null, why: IS_SNAPSHOTABLE },
  { dump: 'create_server_audit_log', path: '$.meta.total_count', recorded: 3193929, ours: VARIES, why: LIST_HISTORY },
  { dump: 'create_server_audit_log', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'currentusage_list', path: '$.balance.balance', recorded: '155367.99237092264288897986', ours: '10000.00000000000000000000', why: BILLING_ACCOUNT },
  { dump: 'currentusage_list', path: '$.usage.amd_cpu.subscribed', recorded: 10000, ours: 0, why: BILLING_ACCOUNT },
  { dump: 'currentusage_list', path: '$.usage.amd_mem.subscribed', recorded: 17179869184, ours: 0, why: BILLING_ACCOUNT },
  { dump: 'currentusage_list', path: '$.usage.cpu.subscribed', recorded: 10000, ours: 0, why: BILLING_ACCOUNT },
  { dump: 'currentusage_list', path: '$.usage.dssd.burst', recorded: 0, ours: 2147483648, why: BILLING_ACCOUNT },
  { dump: 'currentusage_list', path: '$.usage.dssd.subscribed', recorded: 32212254720, ours: 0, why: BILLING_ACCOUNT },
  { dump: 'currentusage_list', path: '$.usage.dssd.using', recorded: 30064771072, ours: 2147483648, why: BILLING_ACCOUNT },
  { dump: 'currentusage_list', path: '$.usage.ip.subscribed', recorded: 1, ours: 0, why: BILLING_ACCOUNT },
  { dump: 'currentusage_list', path: '$.usage.ip.using', recorded: 1, ours: 0, why: BILLING_ACCOUNT },
  { dump: 'currentusage_list', path: '$.usage.mem.subscribed', recorded: 17179869184, ours: 0, why: BILLING_ACCOUNT },
  { dump: 'currentusage_list', path: '$.usage.vlan.subscribed', recorded: 1, ours: 0, why: BILLING_ACCOUNT },
  { dump: 'currentusage_list', path: '$.usage.vlan.using', recorded: 1, ours: 0, why: BILLING_ACCOUNT },
  { dump: 'drive_clone_naming_counter', path: '$.objects[*].name', recorded: 'test_drive_x_1', ours: 'replay', why: MADE },
  { dump: 'drive_clone_naming_date', path: '$.objects[*].name', recorded: 'test_drive_x-2014-06-05', ours: 'replay', why: MADE },
  { dump: 'drive_clone_naming_none', path: '$.objects[*].name', recorded: 'test_drive_x', ours: 'replay', why: MADE },
  { dump: 'drive_clone_naming_set_profile_to_counter', path: '$.bank_reference', recorded: 'jdoe123', ours: VARIES, why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_counter', path: '$.currency', recorded: 'USD', ours: 'EUR', why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_counter', path: '$.email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_counter', path: '$.has_tx_autotopup', recorded: '<absent>', ours: false, why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_counter', path: '$.network_restrictions', recorded: '<absent>', ours: null, why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_counter', path: '$.tx_autotopup_amount', recorded: '<absent>', ours: '0E-16', why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_counter', path: '$.tx_autotopup_threshold', recorded: '<absent>', ours: '0E-16', why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_date', path: '$.bank_reference', recorded: 'jdoe123', ours: VARIES, why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_date', path: '$.currency', recorded: 'USD', ours: 'EUR', why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_date', path: '$.email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_date', path: '$.has_tx_autotopup', recorded: '<absent>', ours: false, why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_date', path: '$.network_restrictions', recorded: '<absent>', ours: null, why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_date', path: '$.tx_autotopup_amount', recorded: '<absent>', ours: '0E-16', why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_date', path: '$.tx_autotopup_threshold', recorded: '<absent>', ours: '0E-16', why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_none', path: '$.bank_reference', recorded: 'jdoe123', ours: VARIES, why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_none', path: '$.currency', recorded: 'USD', ours: 'EUR', why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_none', path: '$.email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_none', path: '$.has_tx_autotopup', recorded: '<absent>', ours: false, why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_none', path: '$.network_restrictions', recorded: '<absent>', ours: null, why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_none', path: '$.tx_autotopup_amount', recorded: '<absent>', ours: '0E-16', why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_none', path: '$.tx_autotopup_threshold', recorded: '<absent>', ours: '0E-16', why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_timestamp', path: '$.bank_reference', recorded: 'jdoe123', ours: VARIES, why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_timestamp', path: '$.currency', recorded: 'USD', ours: 'EUR', why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_timestamp', path: '$.email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  { dump: 'drive_clone_naming_set_profile_to_timestamp', path: '$.has_tx_autotopup', recorded: '<absent>', ours: false, why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_timestamp', path: '$.network_restrictions', recorded: '<absent>', ours: null, why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_timestamp', path: '$.tx_autotopup_amount', recorded: '<absent>', ours: '0E-16', why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_set_profile_to_timestamp', path: '$.tx_autotopup_threshold', recorded: '<absent>', ours: '0E-16', why: OLDER_PROFILE },
  { dump: 'drive_clone_naming_timestamp', path: '$.objects[*].name', recorded: 'test_drive_x-2014-06-05 09:45:56', ours: VARIES, why: MADE },
  { dump: 'drive_clone_zadara_dssd', path: '$.objects[*].name', recorded: 'test_zadara_drive_for_clone', ours: VARIES, why: MADE },
  { dump: 'drive_clone_zadara_dssd', path: '$.objects[*].grantees', recorded: '<absent>', ours: [], why: OLDER_DRIVE },
  { dump: 'drive_clone_zadara_dssd', path: '$.objects[*].permissions', recorded: '<absent>', ours: [], why: OLDER_DRIVE },
  { dump: 'drive_clone_zadara_zadara', path: '$.objects[*].name', recorded: 'test_zadara_drive', ours: VARIES, why: MADE },
  { dump: 'drive_clone_zadara_zadara', path: '$.objects[*].runtime.storage_type', recorded: 'zadara', ours: 'dssd', why: ZADARA },
  { dump: 'drive_clone_zadara_zadara', path: '$.objects[*].storage_type', recorded: 'zadara', ours: 'dssd', why: ZADARA },
  { dump: 'drive_clone_zadara_zadara', path: '$.objects[*].grantees', recorded: '<absent>', ours: [], why: OLDER_DRIVE },
  { dump: 'drive_clone_zadara_zadara', path: '$.objects[*].permissions', recorded: '<absent>', ours: [], why: OLDER_DRIVE },
  { dump: 'drive_get_unmounted', path: '$.name', recorded: 'test_drive_1', ours: 'replay', why: MADE },
  { dump: 'drive_list', path: '$.meta.total_count', recorded: 7, ours: VARIES, why: LIST_HISTORY },
  { dump: 'drive_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'drive_list_detail', path: '$.meta.total_count', recorded: 7, ours: VARIES, why: LIST_HISTORY },
  { dump: 'drive_list_detail', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'drive_list_just_uuid_and_status', path: '$.meta.total_count', recorded: 7, ours: VARIES, why: LIST_HISTORY },
  { dump: 'drive_list_just_uuid_and_status', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'drive_schema', path: '$.allowed_list_http_methods.length', recorded: 4, ours: 3, why: DRIVE_SCHEMA },
  { dump: 'drive_schema', path: '$.allowed_list_http_methods[*]', recorded: 'put', ours: 'post', why: DRIVE_SCHEMA },
  { dump: 'drive_with_one_snapshot', path: '$.name', recorded: 'test_drive_snapshot', ours: 'replay', why: MADE },
  { dump: 'drive_with_one_snapshot', path: '$.snapshots.length', recorded: 1, ours: 0, why: MADE },
  { dump: 'drive_with_two_snapshots', path: '$.name', recorded: 'test_drive_snapshot', ours: 'replay', why: MADE },
  { dump: 'drive_with_two_snapshots', path: '$.snapshots.length', recorded: 2, ours: 0, why: MADE },
  { dump: 'dssd_drive_clone_naming_set_profile_to_counter', path: '$.bank_reference', recorded: 'jdoe123', ours: VARIES, why: ACCOUNT },
  { dump: 'dssd_drive_clone_naming_set_profile_to_counter', path: '$.email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  { dump: 'dssd_drive_clone_naming_set_profile_to_date', path: '$.bank_reference', recorded: 'jdoe123', ours: VARIES, why: ACCOUNT },
  { dump: 'dssd_drive_clone_naming_set_profile_to_date', path: '$.email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  { dump: 'dssd_drive_clone_naming_set_profile_to_none', path: '$.bank_reference', recorded: 'jdoe123', ours: VARIES, why: ACCOUNT },
  { dump: 'dssd_drive_clone_naming_set_profile_to_none', path: '$.email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  { dump: 'dssd_drive_clone_naming_set_profile_to_timestamp', path: '$.bank_reference', recorded: 'jdoe123', ours: VARIES, why: ACCOUNT },
  { dump: 'dssd_drive_clone_naming_set_profile_to_timestamp', path: '$.email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  { dump: 'foreign_drive_permissions', path: '$.name', recorded: 'test_drive_acl', ours: 'replay', why: MADE },
  { dump: 'foreign_drive_permissions', path: '$.permissions.length', recorded: 2, ours: 0, why: MADE },
  { dump: 'fwpolicy_get', path: '$.name', recorded: 'My awesome policy', ours: 'replay', why: MADE },
  { dump: 'fwpolicy_get', path: '$.rules.length', recorded: 5, ours: 0, why: MADE },
  { dump: 'fwpolicy_list', path: '$.meta.total_count', recorded: 2, ours: VARIES, why: LIST_HISTORY },
  { dump: 'fwpolicy_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'fwpolicy_list_detail', path: '$.meta.total_count', recorded: 2, ours: VARIES, why: LIST_HISTORY },
  { dump: 'fwpolicy_list_detail', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'fwpolicy_server_attach', path: '$.objects[*].cpu_type', recorded: '<absent>', ours: 'amd', why: OLDER_SERVER },
  { dump: 'fwpolicy_server_attach', path: '$.objects[*].hypervisor', recorded: '<absent>', ours: 'kvm', why: OLDER_SERVER },
  { dump: 'fwpolicy_server_attach', path: '$.objects[*].pubkeys', recorded: '<absent>', ours: [], why: OLDER_SERVER },
  { dump: 'guest_for_context', path: '$.drives.length', recorded: 1, ours: 0, why: MADE },
  { dump: 'guest_for_context', path: '$.mem', recorded: 1073741824, ours: 536870912, why: MADE },
  {
    dump: 'guest_for_context',
    path: '$.meta.ssh_public_key',
    recorded: 'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCy4XpmD3kEfRZ+LCwFh3Xm\u2026',
    ours: '<absent>',
    why: MADE,
  },
  { dump: 'guest_for_context', path: '$.name', recorded: 'test_srv_test_guest_context', ours: 'replay', why: MADE },
  { dump: 'guest_for_context', path: '$.nics.length', recorded: 1, ours: 0, why: MADE },
  { dump: 'guest_for_context', path: '$.runtime.nics.length', recorded: 1, ours: 0, why: MADE },
  { dump: 'ip_get', path: '$.subscription', recorded: { id: 7273, resource_uri: '/api/2.0/subscriptions/7273/' }, ours: null, why: MADE },
  { dump: 'ip_list_detail', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'ip_update', path: '$.subscription', recorded: { id: 7273, resource_uri: '/api/2.0/subscriptions/7273/' }, ours: null, why: MADE },
  { dump: 'jobs_drive_clone', path: '$.data.progress', recorded: 100, ours: 0, why: JOB_AT_ONCE },
  { dump: 'jobs_drive_clone', path: '$.state', recorded: 'success', ours: 'started', why: JOB_AT_ONCE },
  { dump: 'jobs_list', path: '$.meta.total_count', recorded: 500, ours: VARIES, why: LIST_HISTORY },
  { dump: 'jobs_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'jobs_schema', path: '$.fields.children.readonly', recorded: false, ours: true, why: JOBS_SCHEMA },
  { dump: 'jobs_schema', path: '$.fields.created.default', recorded: '2014-06-05T09:46:41.793232+00:00', ours: 'No default provided.', why: JOBS_SCHEMA },
  { dump: 'jobs_schema', path: '$.fields.created.readonly', recorded: false, ours: true, why: JOBS_SCHEMA },
  { dump: 'jobs_schema', path: '$.fields.data.readonly', recorded: false, ours: true, why: JOBS_SCHEMA },
  { dump: 'jobs_schema', path: '$.fields.last_modified.default', recorded: '2014-06-05T09:46:41.793249+00:00', ours: 'No default provided.', why: JOBS_SCHEMA },
  { dump: 'jobs_schema', path: '$.fields.last_modified.readonly', recorded: false, ours: true, why: JOBS_SCHEMA },
  { dump: 'jobs_schema', path: '$.fields.operation.readonly', recorded: false, ours: true, why: JOBS_SCHEMA },
  { dump: 'jobs_schema', path: '$.fields.resources.readonly', recorded: false, ours: true, why: JOBS_SCHEMA },
  { dump: 'jobs_schema', path: '$.fields.state.readonly', recorded: false, ours: true, why: JOBS_SCHEMA },
  { dump: 'jobs_schema', path: '$.fields.uuid.readonly', recorded: false, ours: true, why: JOBS_SCHEMA },
  { dump: 'jobs_server_clone', path: '$.children.length', recorded: 1, ours: 0, why: JOB_AT_ONCE },
  { dump: 'jobs_server_clone', path: '$.data.progress', recorded: 100, ours: 0, why: JOB_AT_ONCE },
  { dump: 'jobs_server_clone', path: '$.operation', recorded: 'server_clone', ours: 'drive_clone', why: JOB_KIND },
  { dump: 'jobs_server_clone', path: '$.resources[*]', recorded: VARIES, ours: VARIES, why: JOB_KIND },
  { dump: 'jobs_server_clone', path: '$.state', recorded: 'success', ours: 'started', why: JOB_AT_ONCE },
  { dump: 'keypair_get', path: '$.name', recorded: 'test_name', ours: 'replay', why: MADE },
  { dump: 'keypair_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'keypair_update', path: '$.fingerprint', recorded: '99:1e:71:ea:d1:43:80:55:14:ca:27:5c:64:69:3b:10', ours: VARIES, why: KEYPAIR_KEYS },
  {
    dump: 'keypair_update',
    path: '$.private_key',
    recorded: '-----BEGIN RSA PRIVATE KEY-----\nMIIEpwIBAAKCAQEAs4068mFSGTm0\u2026',
    ours: VARIES,
    why: KEYPAIR_KEYS,
  },
  {
    dump: 'keypair_update',
    path: '$.public_key',
    recorded: 'ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCzjTryYVIZObTbmhqdVKmK\u2026',
    ours: VARIES,
    why: KEYPAIR_KEYS,
  },
  { dump: 'ledger_list', path: '$.meta.total_count', recorded: 98203, ours: VARIES, why: LIST_HISTORY },
  { dump: 'ledger_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'ledger_schema', path: '$.fields.poll_time.default', recorded: '2014-06-05T09:41:58.809494+00:00', ours: 'No default provided.', why: LEDGER_SCHEMA },
  { dump: 'ledger_schema', path: '$.fields.time.default', recorded: '2014-06-05T09:41:58.809480+00:00', ours: 'No default provided.', why: LEDGER_SCHEMA },
  { dump: 'libdrive_get', path: '$.category.length', recorded: 1, ours: 3, why: LIBRARY },
  { dump: 'libdrive_get', path: '$.category[*]', recorded: 'dbserver', ours: 'general', why: LIBRARY },
  {
    dump: 'libdrive_get',
    path: '$.description',
    recorded: 'Pre-installed SQL Server 2012 Standard Edition with SP1 64bi\u2026',
    ours: 'Ubuntu 24.04.1 LTS (Noble Numbat) Server - 64bit - pre-insta\u2026',
    why: LIBRARY,
  },
  { dump: 'libdrive_get', path: '$.distribution', recorded: null, ours: 'Ubuntu', why: LIBRARY },
  { dump: 'libdrive_get', path: '$.favourite', recorded: false, ours: true, why: LIBRARY },
  {
    dump: 'libdrive_get',
    path: '$.install_notes',
    recorded: 'Initial Credentials: \\n\r\nUsername: Cloudsigma \\n\r\nPassword: \u2026',
    ours: 'Initial credentials:\nUsername: cloudsigma\nPassword: set on f\u2026',
    why: LIBRARY,
  },
  { dump: 'libdrive_get', path: '$.licenses.length', recorded: 2, ours: 0, why: LIBRARY },
  { dump: 'libdrive_get', path: '$.name', recorded: 'Microsoft SQL Server 2012 Standard Edition with SP1', ours: 'Ubuntu 24.04 LTS Server', why: LIBRARY },
  { dump: 'libdrive_get', path: '$.os', recorded: 'windows', ours: 'linux', why: LIBRARY },
  { dump: 'libdrive_get', path: '$.paid', recorded: true, ours: false, why: LIBRARY },
  { dump: 'libdrive_get', path: '$.size', recorded: 64424509440, ours: 10737418240, why: LIBRARY },
  { dump: 'libdrive_get', path: '$.url', recorded: 'http://www.microsoft.com/', ours: 'https://ubuntu.com/server', why: LIBRARY },
  { dump: 'libdrive_get', path: '$.version', recorded: null, ours: '24.04.1', why: LIBRARY },
  { dump: 'libdrive_list', path: '$.meta.total_count', recorded: 158, ours: 15, why: LIBRARY },
  { dump: 'libdrive_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIBRARY },
  { dump: 'librdrive_get_through_drives', path: '$.licenses.length', recorded: 2, ours: 0, why: LIBRARY },
  {
    dump: 'librdrive_get_through_drives',
    path: '$.name',
    recorded: 'Microsoft SQL Server 2012 Standard Edition with SP1',
    ours: 'Ubuntu 24.04 LTS Server',
    why: LIBRARY,
  },
  { dump: 'librdrive_get_through_drives', path: '$.size', recorded: 64424509440, ours: 10737418240, why: LIBRARY },
  { dump: 'locations', path: '$.meta.total_count', recorded: 13, ours: 1, why: LOCATIONS },
  { dump: 'locations', path: '$.objects', recorded: VARIES, ours: VARIES, why: LOCATIONS },
  { dump: 'notification_contacts_list', path: '$.meta.total_count', recorded: 1, ours: VARIES, why: LIST_HISTORY },
  { dump: 'notification_contacts_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'notification_contacts_list_1', path: '$.meta.total_count', recorded: 1, ours: VARIES, why: LIST_HISTORY },
  { dump: 'notification_contacts_list_1', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'notification_contacts_list_2', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'notification_contacts_update', path: '$.phone', recorded: '+11235551234', ours: null, why: MADE },
  { dump: 'notification_preferences_list_1', path: '$.meta.total_count', recorded: 22, ours: VARIES, why: LIST_HISTORY },
  { dump: 'notification_preferences_list_1', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'own_drive_grantees', path: '$.grantees.length', recorded: 1, ours: 0, why: MADE },
  { dump: 'own_drive_grantees', path: '$.name', recorded: 'test_drive_acl', ours: 'replay', why: MADE },
  { dump: 'own_drive_grantees', path: '$.tags.length', recorded: 1, ours: 0, why: MADE },
  { dump: 'pricing_list', path: '$.current.cpu', recorded: 20, ours: 1, why: BILLING_ACCOUNT },
  { dump: 'pricing_list', path: '$.current.mem', recorded: 17, ours: 1, why: BILLING_ACCOUNT },
  { dump: 'pricing_list', path: '$.next.cpu', recorded: 20, ours: 1, why: BILLING_ACCOUNT },
  { dump: 'pricing_list', path: '$.next.mem', recorded: 17, ours: 1, why: BILLING_ACCOUNT },
  { dump: 'profile', path: '$.bank_reference', recorded: 'jdoe123', ours: VARIES, why: ACCOUNT },
  { dump: 'profile', path: '$.clone_naming', recorded: 'COUNTER', ours: 'TIMESTAMP', why: CLONE_NAMING_HISTORY },
  { dump: 'profile', path: '$.email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  {
    dump: 'profile_schema',
    path: '$.fields.signup_time.default',
    recorded: '2015-03-19T13:49:15.421660+00:00',
    ours: 'No default provided.',
    why: PROFILE_SCHEMA,
  },
  { dump: 'profile_schema', path: '$.fields.signup_time.readonly', recorded: false, ours: true, why: PROFILE_SCHEMA },
  { dump: 'profile_update', path: '$.bank_reference', recorded: 'jdoe123', ours: VARIES, why: ACCOUNT },
  { dump: 'profile_update', path: '$.email', recorded: 'user@example.com', ours: VARIES, why: ACCOUNT },
  { dump: 'pubkeys_full_keypair', path: '$.name', recorded: 'test_pub', ours: 'replay', why: MADE },
  { dump: 'pubkeys_list', path: '$.meta.total_count', recorded: 3, ours: VARIES, why: LIST_HISTORY },
  { dump: 'pubkeys_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'pubkeys_pub_only_keypair', path: '$.has_private_key', recorded: false, ours: true, why: MADE },
  { dump: 'pubkeys_pub_only_keypair', path: '$.name', recorded: 'test_another_pub', ours: 'replay', why: MADE },
  { dump: 'server_attach_drive', path: '$.meta.meta_key2', recorded: 'value2', ours: '<absent>', why: MADE },
  { dump: 'server_attach_drive', path: '$.meta.meta_key3', recorded: 'value3', ours: '<absent>', why: MADE },
  { dump: 'server_close_console', path: '$.uuid', recorded: '7a3a67e0-93e4-46db-a4a2-c0f886987dc0', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'server_close_vnc', path: '$.uuid', recorded: '80751bc7-37cc-48c1-bb08-fd04b46090bf', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'server_create_full', path: '$.objects[*].drives[*].boot_order', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_create_full', path: '$.objects[*].drives[*].device', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_create_full', path: '$.objects[*].drives[*].drive.resource_uri', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_create_full', path: '$.objects[*].drives[*].drive.uuid', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_get_clone_source', path: '$.name', recorded: 'testServerAcc', ours: 'replay', why: MADE },
  { dump: 'server_get_running', path: '$.drives.length', recorded: 1, ours: 0, why: MADE },
  { dump: 'server_get_running', path: '$.name', recorded: 'testServerAcc', ours: 'replay', why: MADE },
  { dump: 'server_get_running', path: '$.nics.length', recorded: 1, ours: 0, why: MADE },
  { dump: 'server_get_running', path: '$.runtime.nics.length', recorded: 1, ours: 0, why: MADE },
  { dump: 'server_get_two_nics', path: '$.name', recorded: 'testServerAcc', ours: 'replay', why: MADE },
  { dump: 'server_get_two_nics', path: '$.nics.length', recorded: 2, ours: 0, why: MADE },
  { dump: 'server_list', path: '$.meta.total_count', recorded: 5, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_list_detail', path: '$.meta.total_count', recorded: 5, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_list_detail', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_open_console', path: '$.uuid', recorded: '7a3a67e0-93e4-46db-a4a2-c0f886987dc0', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'server_open_vnc', path: '$.uuid', recorded: '80751bc7-37cc-48c1-bb08-fd04b46090bf', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'server_recurse_del_all_drives_create', path: '$.objects[*].drives[*].boot_order', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_recurse_del_all_drives_create', path: '$.objects[*].drives[*].device', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_recurse_del_all_drives_create', path: '$.objects[*].drives[*].drive.resource_uri', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_recurse_del_all_drives_create', path: '$.objects[*].drives[*].drive.uuid', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_recurse_del_all_drives_drives_after', path: '$.meta.total_count', recorded: 2, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_recurse_del_all_drives_drives_after', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_recurse_del_all_drives_drives_before', path: '$.meta.total_count', recorded: 4, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_recurse_del_all_drives_drives_before', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_recurse_del_disks_create', path: '$.objects[*].drives[*].boot_order', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_recurse_del_disks_create', path: '$.objects[*].drives[*].device', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_recurse_del_disks_create', path: '$.objects[*].drives[*].drive.resource_uri', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_recurse_del_disks_create', path: '$.objects[*].drives[*].drive.uuid', recorded: VARIES, ours: VARIES, why: DRIVE_ORDER },
  { dump: 'server_recurse_del_disks_drives_after', path: '$.meta.total_count', recorded: 3, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_recurse_del_disks_drives_after', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_recurse_del_disks_drives_before', path: '$.meta.total_count', recorded: 4, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_recurse_del_disks_drives_before', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'server_schema', path: '$.allowed_list_http_methods.length', recorded: 4, ours: 2, why: SERVER_SCHEMA },
  { dump: 'server_schema', path: '$.allowed_list_http_methods[*]', recorded: 'put', ours: 'post', why: SERVER_SCHEMA },
  { dump: 'server_start', path: '$.uuid', recorded: '05221547-3036-44c4-9418-0f0239992459', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'server_stop', path: '$.uuid', recorded: '05221547-3036-44c4-9418-0f0239992459', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'server_with_acl', path: '$.objects[*].grantees.length', recorded: 1, ours: 0, why: MADE },
  { dump: 'skz_hypervisor_cpu_types', path: '$.drives.dssd.max_size', recorded: 6944541268377, ours: 4971194891468, why: OTHER_LOCATION },
  { dump: 'skz_hypervisor_cpu_types', path: '$.drives.dssd.size', recorded: '<absent>', ours: { max: 4971194891468, min: 536870912 }, why: OTHER_LOCATION },
  { dump: 'skz_hypervisor_cpu_types', path: '$.hosts.amd.cpu_per_smp.max', recorded: 2200, ours: 2400, why: OTHER_LOCATION },
  { dump: 'skz_hypervisor_cpu_types', path: '$.hosts.intel.cpu_per_smp.max', recorded: 2200, ours: 2400, why: OTHER_LOCATION },
  { dump: 'skz_hypervisor_cpu_types', path: '$.hosts.intel.smp.max', recorded: 32, ours: 48, why: OTHER_LOCATION },
  { dump: 'skz_hypervisor_cpu_types', path: '$.hypervisors.solaris-kz', recorded: ['intel'], ours: '<absent>', why: OTHER_LOCATION },
  { dump: 'skz_hypervisor_cpu_types', path: '$.servers.cpu_per_smp.max', recorded: 2200, ours: 2400, why: OTHER_LOCATION },
  { dump: 'snapshot_clone', path: '$.name', recorded: '7fbfb2ac-5b21-4c5a-81cb-d4343fca71a1__2015-03-19__13_53_52', ours: 'replay_1', why: MADE },
  {
    dump: 'snapshot_clone',
    path: '$.resource_uri',
    recorded: { resource_uri: '/api/2.0/drives/be62f52e-0b0f-480c-89b2-73e108dd2cef/', uuid: 'be62f52e-0b0f-480c-89b2-73e108dd2cef' },
    ours: VARIES,
    why: SNAPSHOT_CLONE_URI,
  },
  {
    dump: 'snapshot_create_another',
    path: '$.objects[*].name',
    recorded: '7a555723-d73c-45cf-9f18-21f571626d2b__2014-01-30__15_35_30',
    ours: VARIES,
    why: MADE,
  },
  { dump: 'snapshot_create_another', path: '$.objects[*].grantees', recorded: '<absent>', ours: [], why: OLDER_SNAPSHOT },
  { dump: 'snapshot_create_another', path: '$.objects[*].permissions', recorded: '<absent>', ours: [], why: OLDER_SNAPSHOT },
  { dump: 'snapshot_get', path: '$.allocated_size', recorded: null, ours: 0, why: MADE },
  { dump: 'snapshot_get', path: '$.name', recorded: 'bb2b8f77-04ee-42c1-b142-47bc31c2824e__2014-06-05__09_53_31', ours: 'replay', why: MADE },
  { dump: 'snapshot_get', path: '$.status', recorded: 'creating', ours: 'available', why: MADE },
  { dump: 'snapshot_list', path: '$.meta.total_count', recorded: 6, ours: VARIES, why: LIST_HISTORY },
  { dump: 'snapshot_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'snapshot_list_detail', path: '$.meta.total_count', recorded: 6, ours: VARIES, why: LIST_HISTORY },
  { dump: 'snapshot_list_detail', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'snapshot_list_for_drive', path: '$.meta.total_count', recorded: 2, ours: VARIES, why: LIST_HISTORY },
  { dump: 'snapshot_list_for_drive', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'snapshots_in_drive_def', path: '$.name', recorded: 'test_drive_snapshot', ours: 'replay', why: MADE },
  { dump: 'snapshots_in_drive_def', path: '$.snapshots.length', recorded: 2, ours: 0, why: MADE },
  { dump: 'start_server_audit_log', path: '$.meta.total_count', recorded: 3193930, ours: VARIES, why: LIST_HISTORY },
  { dump: 'start_server_audit_log', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'start_server_audit_log_complete', path: '$.meta.total_count', recorded: 3193931, ours: VARIES, why: LIST_HISTORY },
  { dump: 'start_server_audit_log_complete', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'subscription_list', path: '$.meta.total_count', recorded: 5, ours: VARIES, why: LIST_HISTORY },
  { dump: 'subscription_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'subscription_list', path: '$.price', recorded: '0E-20', ours: '0.00000000000000000000', why: DECIMAL_ZERO },
  {
    dump: 'subscription_schema',
    path: '$.fields.start_time.default',
    recorded: '2015-03-19T13:55:01.236421+00:00',
    ours: 'No default provided.',
    why: SUBSCRIPTION_SCHEMA,
  },
  { dump: 'subscriptioncalculator', path: '$.objects[*].discount_amount', recorded: '0E-24', ours: '0.00000000000000000000', why: DECIMAL_ZERO },
  { dump: 'subscriptioncalculator', path: '$.objects[*].period', recorded: '31 days, 22:04:59.904871', ours: VARIES, why: BILLING_ACCOUNT },
  { dump: 'subscriptioncalculator', path: '$.objects[*].price', recorded: '1.010484993457794189453125', ours: VARIES, why: BILLING_ACCOUNT },
  { dump: 'subscriptioncalculator', path: '$.price', recorded: '1.010484993457794189453125', ours: VARIES, why: BILLING_ACCOUNT },
  { dump: 'subscriptioncalculator_extend', path: '$.amount', recorded: '32212254720', ours: '1', why: BILLING_ACCOUNT },
  { dump: 'subscriptioncalculator_extend', path: '$.discount_amount', recorded: '9.60750000000000000', ours: VARIES, why: BILLING_ACCOUNT },
  { dump: 'subscriptioncalculator_extend', path: '$.price', recorded: '28.82250000000000000000', ours: VARIES, why: BILLING_ACCOUNT },
  { dump: 'subscriptioncalculator_extend', path: '$.resource', recorded: 'dssd', ours: 'vlan', why: BILLING_ACCOUNT },
  { dump: 'tags_create_with_resource', path: '$.objects[*].resources[*].res_type', recorded: VARIES, ours: VARIES, why: TAG_RESOURCES },
  { dump: 'tags_create_with_resource', path: '$.objects[*].resources[*].resource_uri', recorded: VARIES, ours: VARIES, why: TAG_RESOURCES },
  { dump: 'tags_create_with_resource', path: '$.objects[*].resources[*].uuid', recorded: VARIES, ours: VARIES, why: TAG_RESOURCES },
  { dump: 'tags_get', path: '$.name', recorded: 'TagCreatedWithResource', ours: 'replay', why: MADE },
  { dump: 'tags_get', path: '$.resource_uri', recorded: '/api/2.0/tags/c91f7742-e3b9-4794-a178-f0831ee1d3d2/', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'tags_get', path: '$.resources.length', recorded: 5, ours: 0, why: MADE },
  { dump: 'tags_get', path: '$.uuid', recorded: 'c91f7742-e3b9-4794-a178-f0831ee1d3d2', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'tags_list', path: '$.meta.total_count', recorded: 2, ours: VARIES, why: LIST_HISTORY },
  { dump: 'tags_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'tags_list_detail', path: '$.meta.total_count', recorded: 2, ours: VARIES, why: LIST_HISTORY },
  { dump: 'tags_list_detail', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'tags_list_resource', path: '$.meta.total_count', recorded: 1, ours: VARIES, why: LIST_HISTORY },
  { dump: 'tags_list_resource', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  {
    dump: 'tags_update_resources',
    path: '$.resource_uri',
    recorded: '/api/2.0/tags/c91f7742-e3b9-4794-a178-f0831ee1d3d2/',
    ours: VARIES,
    why: RECORDING_MISMATCH,
  },
  { dump: 'tags_update_resources', path: '$.resources[*].res_type', recorded: VARIES, ours: 'servers', why: TAG_RESOURCES },
  { dump: 'tags_update_resources', path: '$.resources[*].resource_uri', recorded: VARIES, ours: VARIES, why: TAG_RESOURCES },
  { dump: 'tags_update_resources', path: '$.resources[*].uuid', recorded: VARIES, ours: VARIES, why: TAG_RESOURCES },
  { dump: 'tags_update_resources', path: '$.uuid', recorded: 'c91f7742-e3b9-4794-a178-f0831ee1d3d2', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'vlan_get', path: '$.resource_uri', recorded: '/api/2.0/vlans/10619300-edda-42ba-91e0-7e3df0689d00/', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'vlan_get', path: '$.subscription', recorded: { id: 12, resource_uri: '/api/2.0/subscriptions/12/' }, ours: null, why: MADE },
  { dump: 'vlan_get', path: '$.uuid', recorded: '10619300-edda-42ba-91e0-7e3df0689d00', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'vlan_list', path: '$.meta.total_count', recorded: 1, ours: VARIES, why: LIST_HISTORY },
  { dump: 'vlan_list', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'vlan_list_detail', path: '$.meta.total_count', recorded: 1, ours: VARIES, why: LIST_HISTORY },
  { dump: 'vlan_list_detail', path: '$.objects', recorded: VARIES, ours: VARIES, why: LIST_HISTORY },
  { dump: 'vlan_update', path: '$.resource_uri', recorded: '/api/2.0/vlans/10619300-edda-42ba-91e0-7e3df0689d00/', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'vlan_update', path: '$.subscription', recorded: { id: 12, resource_uri: '/api/2.0/subscriptions/12/' }, ours: null, why: MADE },
  { dump: 'vlan_update', path: '$.uuid', recorded: '10619300-edda-42ba-91e0-7e3df0689d00', ours: VARIES, why: RECORDING_MISMATCH },
  { dump: 'vrouters/vrfwfilter_get', path: '$.src', recorded: '10.0.0.22', ours: '', why: MADE },
  { dump: 'vrouters/vrfwpolicy_get', path: '$.active', recorded: true, ours: false, why: MADE },
  { dump: 'vrouters/vrfwpolicy_get', path: '$.filters.length', recorded: 8, ours: 0, why: MADE },
  { dump: 'vrouters/vrfwpolicy_get', path: '$.jobs.length', recorded: 6, ours: 1, why: MADE },
  {
    dump: 'vrouters/vrfwpolicy_get',
    path: '$.lan_interface',
    recorded: { resource_uri: '/api/2.0/lans/9b183b90-84cf-46fb-b3d8-12d2e5383eae/', uuid: '9b183b90-84cf-46fb-b3d8-12d2e5383eae' },
    ours: null,
    why: MADE,
  },
  { dump: 'vrouters/vrfwpolicy_get', path: '$.name', recorded: 'WEB POLICY FILTERS ACTIVATE', ours: 'replay', why: MADE },
  { dump: 'vrouters/vrfwpolicy_safe_update', path: '$.jobs.length', recorded: 3, ours: 1, why: MADE },
  {
    dump: 'vrouters/vrfwpolicy_safe_update',
    path: '$.lan_interface',
    recorded: { resource_uri: '/api/2.0/lans/9b183b90-84cf-46fb-b3d8-12d2e5383eae/', uuid: '9b183b90-84cf-46fb-b3d8-12d2e5383eae' },
    ours: null,
    why: MADE,
  },
  { dump: 'vrouters/vrfwpolicy_safe_update', path: '$.name', recorded: 'Policy one', ours: 'replay', why: MADE },
  { dump: 'vrouters/vrfwpolicy_safe_update_get', path: '$.filters.length', recorded: 5, ours: 0, why: MADE },
  { dump: 'vrouters/vrfwpolicy_safe_update_get', path: '$.jobs.length', recorded: 3, ours: 1, why: MADE },
  {
    dump: 'vrouters/vrfwpolicy_safe_update_get',
    path: '$.lan_interface',
    recorded: { resource_uri: '/api/2.0/lans/9b183b90-84cf-46fb-b3d8-12d2e5383eae/', uuid: '9b183b90-84cf-46fb-b3d8-12d2e5383eae' },
    ours: null,
    why: MADE,
  },
  { dump: 'vrouters/vrfwpolicy_safe_update_get', path: '$.name', recorded: 'WEB POLICY', ours: 'replay', why: MADE },
  { dump: 'vrouters/vrfwpolicy_safe_update_valid_order', path: '$.filters[*]', recorded: VARIES, ours: VARIES, why: PYTHON_REPRS },
  { dump: 'vrouters/vrfwpolicy_safe_update_valid_order', path: '$.jobs.length', recorded: 3, ours: 1, why: MADE },
];

const OLDER_DRIVE_SHAPE = 'recorded before drives showed their sharing (`grantees`, `permissions`); Stratus answers the shape of the later recordings';
/**
 * Where Stratus answers differently from the record on purpose, per exchange, and why. The exchange is
 * still replayed: `expect` is the answer Stratus gives instead (status, and error type and point), `shapeOf`
 * the recorded answer whose shape it has instead, `patch` corrects a recorded answer before the comparison.
 */
export interface Deviation {
  why: string;
  expect?: { status: number; type: string; point: string | null };
  shapeOf?: string;
  patch?: (recorded: any) => any;
  skipShape?: boolean;
}
export const EXCHANGE_DEVIATIONS: Record<string, Deviation> = {
  drive_create_zadara: {
    why: 'recorded at a location offering `zadara` storage; Stratus offers what its capabilities list (the recorded default: dssd)',
    expect: { status: 400, type: 'validation', point: 'storage_type' },
  },
  drive_clone_dssd_zadara: {
    why: 'a clone to `zadara` storage, which the default capabilities do not offer (as drive_create_zadara)',
    expect: { status: 400, type: 'validation', point: 'storage_type' },
  },
  drive_clone_zadara_dssd: { why: OLDER_DRIVE_SHAPE, shapeOf: 'drive_clone' },
  drive_clone_zadara_zadara: { why: OLDER_DRIVE_SHAPE, shapeOf: 'drive_clone' },
  snapshot_create_another: { why: 'recorded before snapshots showed their sharing; Stratus answers as snapshot_create', shapeOf: 'snapshot_create' },
  ...Object.fromEntries(
    ['counter', 'date', 'none', 'timestamp'].map((n) => [
      `drive_clone_naming_set_profile_to_${n}`,
      { why: 'recorded before the profile had its tx-autotopup and network-restriction keys; Stratus answers as profile_update', shapeOf: 'profile_update' },
    ]),
  ),
  fwpolicy_server_attach: {
    why: 'recorded before servers showed `cpu_type`, `hypervisor` and `pubkeys`; Stratus answers as server_create_full',
    shapeOf: 'server_create_full',
  },
  server_add_gpu: {
    why: 'the recorded answer holds only the changed `gpus` key; Stratus answers every PUT with the whole server (as every other recorded PUT), and simulates no GPUs',
    skipShape: true,
  },
  server_add_sgx: { why: 'as server_add_gpu, for SGX `epcs`', skipShape: true },
  skz_hypervisor_cpu_types: {
    why: 'capabilities of another location (solaris-kz hypervisor); Stratus answers its own, as recorded in `capabilities`',
    shapeOf: 'capabilities',
  },
  skzserver_create_minimal: {
    why: 'a `solaris-kz` server, a hypervisor the default capabilities do not offer',
    expect: { status: 400, type: 'validation', point: 'hypervisor' },
  },
  snapshot_clone: {
    why: 'the recording nests `resource_uri` as {resource_uri, uuid}, a bug of that dump (reference §7.2); Stratus answers the string',
    patch: (r) => ({ ...r, resource_uri: '/api/2.0/drives/…/' }),
  },
  'vrouters/vrfwpolicy_safe_update_valid_order': {
    why: 'the recording shows the filters as Python object reprs (a bug of that dump); Stratus answers filter objects, as vrfwpolicy_get',
    shapeOf: 'vrouters/vrfwpolicy_get',
  },
};
