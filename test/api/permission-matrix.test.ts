import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client, Response } from '../helpers/client.js';
import { withWidgets } from '../helpers/widgets.js';
import { resourcePaths, API_BASE } from '../../src/http/resource-routes.js';
import type { Permission } from '../../src/core/permissions.js';
import type { CollectionDecl, ResourceDecl } from '../../src/core/resource.js';
import type { Field } from '../../src/core/fields.js';
import { assignIps } from '../../src/resources/ips/ips.js';
import { assignVlans } from '../../src/resources/vlans/vlans.js';
import { record } from '../../src/core/events.js';
import { ACCOUNT_KINDS_CHECKED_ELSEWHERE, EXPECTED, type KindExpectation } from './permission-expectations.js';

/**
 * Every route x every kind of caller. Routes come from the same `resourcePaths` the app registers, so a
 * route added later is covered here without editing this file (an unrecognised route shape fails the test,
 * asking for a rule). What each answer must be comes from the hand-written table in
 * permission-expectations.ts (the spec's permissions per kind and action), never from the declarations:
 * where a declaration disagrees with the table, the test fails.
 */
type User = Client & { uuid: string; email: string };
type Caller = 'owner' | 'exact' | 'allBut' | 'stranger' | 'anonymous';
const CALLERS: Caller[] = ['owner', 'exact', 'allBut', 'stranger', 'anonymous'];

let srv: TestServer;
let cases = 0;
const kinds: ResourceDecl[] = withWidgets;

let people: Setup['users'];
before(async () => {
  srv = await startServer({}, kinds);
  // The same four users serve every case: each case shares a fresh object through a fresh tag, so
  // grants never carry from one case to another.
  const [owner, exact, allBut, stranger] = [await srv.user(), await srv.user(), await srv.user(), await srv.user()];
  people = { owner, exact, allBut, stranger, anonymous: srv.anon() };
});
after(async () => {
  console.log(`permission matrix: ${cases} cases`);
  await srv.close();
});

/** Values the schema alone cannot tell (limits that come from capabilities). */
const SAMPLE_VALUES: Record<string, Record<string, unknown>> = {
  notification_contacts: { email: 'matrix-contact@example.com' },
  webhooks: { url: 'https://hooks.example.com/matrix' },
  drives: { size: 1 << 30 },
  servers: { cpu: 1000, mem: 536870912 },
};

/** Create bodies that name the caller's own objects (a snapshot is taken of one of the caller's drives). */
const CREATE_BODIES: Record<string, (caller: User) => Promise<Record<string, unknown>>> = {
  snapshots: async (caller) => ({ drive: await readyDrive(caller) }),
  vrfwpolicies: async () => VRFW_POLICY,
  vrfwfilters: async (caller) => ({ ...VRFW_FILTER, policy: await vrfwPolicy(caller) }),
};

/** Routes whose recorded exchanges answer 202 where the usual success is 201 or 204 (the virtual-router kinds start jobs). */
const RECORDED_202: Record<string, readonly RouteKind[]> = {
  vrfwpolicies: ['create', 'delete'],
  vrfwfilters: ['create', 'delete'],
};
const recorded = (r: Route, want: { status: number; listed?: boolean }) =>
  RECORDED_202[r.decl.kind]?.includes(r.kind) && (want.status === 201 || want.status === 204) ? { ...want, status: 202 } : want;
const VRFW_POLICY = { active: false, filters: [], name: 'matrix', order: 1 };
const VRFW_FILTER = { action: 'deny', order: 1, protocol: 'tcp' };
async function vrfwPolicy(caller: User): Promise<string> {
  const created = await caller.post('vrfwpolicies/', VRFW_POLICY);
  assert.equal(created.status, 202, created.text);
  return created.json.objects[0].uuid;
}

async function readyDrive(owner: User): Promise<string> {
  const d = (await owner.post('drives/', { media: 'disk', name: 'seed', size: 1 << 30 })).json.objects[0];
  await srv.advance(60_000);
  return d.uuid;
}

/** Actions whose body is not the object's own definition. */
const ACTION_BODIES: Record<string, Record<string, unknown>> = {
  'drives.upload_chunk': { chunk_number: 0, chunk_size: 1048576 },
  'fwpolicies.evaluate': { direction: 'in', ip_proto: 'tcp', src_ip: '10.0.0.1', src_port: 40000, dst_ip: '185.12.5.10', dst_port: 22 },
};

/** Actions that need their object in a particular state first (the owner puts it there). */
const PREPARE: Record<string, (owner: User, uri: string) => Promise<unknown>> = {
  'servers.stop': (o, uri) => startServer_(o, uri),
  'servers.shutdown': (o, uri) => startServer_(o, uri),
  'servers.open_vnc': (o, uri) => startServer_(o, uri),
  'servers.open_console': (o, uri) => startServer_(o, uri),
};
async function startServer_(owner: User, uri: string) {
  await owner.post(`${uri}action/?do=start`, {});
  await srv.advance(60_000);
}

/** A minimal valid create body from a declaration's required fields. */
function sampleBody(decl: CollectionDecl): Record<string, unknown> {
  const fields: Record<string, Field> = decl.fields;
  const body: Record<string, unknown> = { ...SAMPLE_VALUES[decl.kind] };
  for (const [name, field] of Object.entries(fields)) {
    if (!field.required || field.readonly || name in body) continue;
    if (field.choices) body[name] = field.choices[0];
    else if (field.type === 'integer') body[name] = (field.schema as { minimum?: number }).minimum ?? 1;
    else if (field.type === 'boolean') body[name] = true;
    else body[name] = `matrix-${name}`;
  }
  return body;
}

type RouteKind =
  | 'bulk-update'
  | 'list'
  | 'detail'
  | 'schema'
  | 'create'
  | 'get'
  | 'view'
  | 'collection-view'
  | 'update'
  | 'delete'
  | 'bulk-delete'
  | 'action'
  | 'tagged'
  | 'singleton-get'
  | 'singleton-put';
interface Route {
  decl: ResourceDecl;
  method: string;
  url: string;
  kind: RouteKind;
  action?: string;
}

function classify(url: string, method: string): { decl: ResourceDecl; kind: RouteKind } {
  const rest = url.slice(API_BASE.length);
  const [kindName, second, third] = rest.split('/');
  const decl = kinds.find((d) => d.kind === (second === ':uuid' && third && kinds.some((k) => k.kind === third) && kindName === 'tags' ? third : kindName));
  assert.ok(decl, `no declaration for route ${url}`);
  if (decl.shape === 'singleton') {
    if (second === 'schema') return { decl, kind: 'schema' };
    return { decl, kind: method === 'GET' ? 'singleton-get' : 'singleton-put' };
  }
  if (kindName === 'tags' && second === ':uuid' && third && decl.kind !== 'tags') return { decl, kind: 'tagged' };
  if (second === '')
    return {
      decl,
      kind:
        method === 'GET' ? 'list' : method === 'POST' ? 'create' : method === 'DELETE' ? 'bulk-delete' : method === 'PUT' ? 'bulk-update' : fail(url, method),
    };
  if (second === 'detail') return { decl, kind: 'detail' };
  if (second === 'schema') return { decl, kind: 'schema' };
  if (second === ':uuid' && third === '')
    return { decl, kind: method === 'GET' ? 'get' : method === 'PUT' ? 'update' : method === 'DELETE' ? 'delete' : fail(url, method) };
  if (second === ':uuid' && third === 'action') return { decl, kind: 'action' };
  if (second === ':uuid' && third && (decl as CollectionDecl).views?.[third]) return { decl, kind: 'view' };
  // `availability_groups/` is about the caller's own objects; `availability_groups/<uuid>/` reads one like a view.
  if ((decl as CollectionDecl).collectionViews?.[second]) return { decl, kind: third === ':uuid' ? 'view' : 'collection-view' };
  return fail(url, method);
}
function fail(url: string, method: string): never {
  throw new Error(`permission matrix has no rule for ${method} ${url}: add one`);
}

function routes(): Route[] {
  const out: Route[] = [];
  for (const spec of resourcePaths(kinds, srv.services)) {
    for (const method of Object.keys(spec.methods)) {
      const { decl, kind } = classify(spec.url, method);
      if (kind === 'action') for (const action of Object.keys((decl as CollectionDecl).actions ?? {})) out.push({ decl, method, url: spec.url, kind, action });
      else out.push({ decl, method, url: spec.url, kind });
    }
  }
  return out;
}

/** The table's row for a kind: every kind the registry serves has one. */
function expected(kind: string): KindExpectation {
  const row = EXPECTED[kind];
  assert.ok(row, `permission-expectations.ts has no row for ${kind}: add what the spec says of it`);
  return row;
}

/** The table's action row (the permission a grantee needs, the success status). */
function expectedAction(r: Route): { permission: Permission; status: 200 | 202 } {
  const row = expected(r.decl.kind).actions?.[r.action!];
  assert.ok(row, `permission-expectations.ts has no action ${r.decl.kind}.${r.action}`);
  return row;
}

/** The permission a non-owner needs for a route on a shareable kind (LIST is always needed to see it). */
function needed(r: Route): Permission | null {
  switch (r.kind) {
    case 'get':
    case 'view':
    case 'list':
    case 'detail':
      return 'LIST';
    case 'update':
      return 'EDIT';
    case 'delete':
    case 'bulk-delete':
      return 'DELETE';
    case 'action':
      return expectedAction(r).permission;
    default:
      return null;
  }
}

interface Setup {
  users: Record<Exclude<Caller, 'anonymous'>, User> & { anonymous: Client };
  uuid?: string;
  tagUuid?: string;
  /** The object as its owner reads it. */
  definition?: Record<string, unknown>;
  secrets: string[];
}

/** A fresh object, tag and grants for one case, so deletes and edits never interfere. */
async function setup(r: Route): Promise<Setup> {
  const users = people;
  const { owner, exact, allBut } = users;
  const decl = r.decl;
  if (decl.shape === 'singleton' || expected(decl.kind).reach === 'account') return { users, secrets: [] };
  const d = decl as CollectionDecl;
  const tag = (await owner.post('tags/', { name: 'matrix-private-tag' })).json.objects[0];
  const seeder = SEEDERS[d.kind];
  let uuid: string;
  if (seeder) {
    uuid = await seeder(owner);
    // A seeded object carries the case's tag as a created one does, so the ACLs below reach it.
    if (d.taggable) assert.equal((await owner.put(`${d.kind}/${uuid}/`, { tags: [tag.uuid] })).status, 200);
  } else {
    assert.ok(d.listMethods.includes('post'), `${d.kind} cannot be created through the API: add a seeder to SEEDERS`);
    const created = await owner.post(`${d.kind}/`, { ...sampleBody(d), ...(d.taggable ? { tags: [tag.uuid] } : {}) });
    assert.equal(created.status, 201, `create ${d.kind}: ${created.text}`);
    uuid = created.json.objects[0].uuid;
  }
  // Let the simulator finish whatever the creation started (a drive leaves `creating`).
  await srv.advance(120_000); // every simulated creation delay is shorter (src/sim/delays.ts)
  if (r.action) await PREPARE[`${d.kind}.${r.action}`]?.(owner, `${d.kind}/${uuid}/`);
  const definition = (await owner.get(`${d.kind}/${uuid}/`)).json;
  const perm = needed(r);
  const grants = expected(d.kind).grants;
  if (grants && perm) {
    const applicable = grants;
    const exactRules = [...new Set<Permission>(['LIST', perm])];
    const allButRules = applicable.filter((p) => p !== perm);
    for (const [grantee, rules] of [
      [exact, exactRules],
      [allBut, allButRules],
    ] as const) {
      const acl = await owner.post('acls/', {
        grantees: [{ uuid: grantee.uuid }],
        rules: rules.map((permission) => ({ permission })),
        tags: [{ uuid: tag.uuid }],
      });
      assert.equal(acl.status, 201, acl.text);
    }
  }
  // What a non-owner must never read: the owner's e-mail and tag, other grantees' identities.
  return { users, uuid, tagUuid: tag.uuid, definition, secrets: [owner.email, tag.uuid] };
}

/** Kinds that only come into being as a side effect: how the owner makes one. */
/** A drive of the owner's, metered by a billing poll: its usage records exist (reference §16.7). */
async function meteredDrive(owner: User): Promise<string> {
  const drive = (await owner.post('drives/', { media: 'disk', name: 'seed', size: 1 << 30 })).json.objects[0].uuid;
  await srv.advance(0); // the recurring poll exists
  const now = srv.clock.now().getTime();
  await srv.advance(Math.ceil((now + 1) / 300_000) * 300_000 - now + 1);
  return drive;
}

const SEEDERS: Record<string, (owner: User) => Promise<string>> = {
  // Usage records are written by the billing poll: the owner's drive, metered. `/usage/` lists it by its
  // uuid; a burst record has a uuid of its own; a day's burst by its day, resource and amount (ID_OF: the
  // other users hold drives too, never with the owner's exact sum).
  usage: meteredDrive,
  burstusage: async (owner) => {
    await meteredDrive(owner);
    return (await owner.get('burstusage/')).json.objects[0].uuid;
  },
  dailyburstusage: async (owner) => {
    await meteredDrive(owner);
    const days = (await owner.get('dailyburstusage/?limit=0')).json.objects;
    return ID_OF.dailyburstusage!(days.find((d: any) => d.resource_type === 'dssd'));
  },
  // The library is loaded at start-up and belongs to no one: any of its drives.
  libdrives: async () => srv.services.config.libdrives[0].uuid,
  // /pubkeys/ shows keypairs read-only: the owner creates a keypair.
  pubkeys: async (owner) => (await owner.post('keypairs/', { name: 'seed' })).json.objects[0].uuid,
  ips: async (owner) => (await srv.services.store.transaction((tx) => assignIps(tx, srv.services, owner.uuid, 1)))[0],
  vlans: async (owner) => (await srv.services.store.transaction((tx) => assignVlans(tx, srv.services, owner.uuid, 1)))[0],
  // An audit log entry is about a resource: the drive's `create` entry carries the drive's uuid.
  logs: async (owner) => (await owner.post('drives/', { media: 'disk', name: 'seed', size: 1 << 30 })).json.objects[0].uuid,
  snapshots: async (owner) => {
    const created = await owner.post('snapshots/', { drive: await readyDrive(owner) });
    assert.equal(created.status, 201, created.text);
    return created.json.objects[0].uuid;
  },
  // Virtual-router policies need filters in their create body, and filters a policy of the owner's.
  vrfwpolicies: async (owner) => vrfwPolicy(owner),
  vrfwfilters: async (owner) => {
    const created = await owner.post('vrfwfilters/', { ...VRFW_FILTER, policy: await vrfwPolicy(owner) });
    assert.equal(created.status, 202, created.text);
    return created.json.objects[0].uuid;
  },
  // Preferences are rows of the owner's contacts: the main contact stands for them.
  notification_preferences: async (owner) => (await owner.get('notification_contacts/')).json.objects.find((c: any) => c.main).uuid,
  // A feed entry comes from a notification: a billing event recorded for the owner, fanned out.
  notifications: async (owner) => {
    await srv.services.store.transaction((tx) =>
      record(tx, srv.services, { category: 'billing', action: 'payment', uuid: owner.uuid, owner: owner.uuid, actor: null, details: 'matrix' }),
    );
    await srv.app.notifier.runDue();
    return (await owner.get('notifications/')).json.objects[0].uuid;
  },
  jobs: async (owner) => {
    const d = (await owner.post('drives/', { media: 'disk', name: 'seed', size: 1 << 30 })).json.objects[0];
    await srv.advance(60_000);
    return (await owner.post(`drives/${d.uuid}/action/?do=clone`, {})).json.objects[0].jobs[0].uuid;
  },
};

async function call(r: Route, caller: Caller, s: Setup): Promise<Response> {
  const client = s.users[caller];
  const path = r.url.replace(':uuid', r.kind === 'tagged' ? s.tagUuid! : (s.uuid ?? ''));
  const q = r.action ? `?do=${r.action}` : r.kind === 'list' || r.kind === 'detail' ? '?limit=0' : '';
  const ownBody = r.kind === 'create' && caller !== 'anonymous' ? CREATE_BODIES[r.decl.kind] : undefined;
  const body =
    r.kind === 'create'
      ? ownBody
        ? await ownBody(client as User)
        : sampleBody(r.decl as CollectionDecl)
      : r.kind === 'bulk-delete'
        ? { objects: [{ uuid: s.uuid }] }
        : r.kind === 'bulk-update'
          ? [{ contact: `/api/2.0/notification_contacts/${s.uuid}/`, medium: 'email', type: 'payment', value: false }]
          : r.kind === 'action'
            ? (ACTION_BODIES[`${r.decl.kind}.${r.action}`] ?? s.definition) // the object's own definition: valid for every action (resize wants a full one)
            : r.kind === 'update' || r.kind === 'singleton-put'
              ? {}
              : undefined;
  return client.request(r.method, `${path}${q}`, { body });
}

/** Kinds whose list items carry no uuid of their own: what identifies the seeded object in them. */
const ID_OF: Record<string, (o: any) => string> = {
  notification_preferences: (o) => String(o.contact).split('/')[4],
  dailyburstusage: (o) => `${o.date} ${o.resource_type} ${o.amount}`,
};

/** The expected status (and for lists whether the object is in them) per route kind and caller. */
function expectation(r: Route, caller: Caller): { status: number; listed?: boolean } {
  if (caller === 'anonymous') return { status: 401 };
  const success = {
    list: 200,
    detail: 200,
    schema: 200,
    create: 201,
    get: 200,
    view: 200,
    'collection-view': 200,
    update: 200,
    delete: 204,
    'bulk-delete': 204,
    'bulk-update': 202,
    // An asynchronous action answers 202, a synchronous one 200 (the table says which).
    action: r.kind === 'action' ? expectedAction(r).status : 0,
    tagged: 200,
    'singleton-get': 200,
    'singleton-put': 200,
  }[r.kind];
  // Preferences name the owner's contact: anyone else names a contact they do not have (400 on `contact`).
  if (r.kind === 'bulk-update') return { status: caller === 'owner' ? 202 : 400 };
  // Routes about no particular object: every authenticated user may call them.
  if (r.kind === 'schema' || r.kind === 'create' || r.kind === 'collection-view' || r.kind === 'singleton-get' || r.kind === 'singleton-put')
    return { status: success };
  // Objects of no one (the drive library): every user sees them and may use what the kind offers.
  const reach = expected(r.decl.kind).reach;
  if (reach === 'public') return r.kind === 'list' || r.kind === 'detail' ? { status: 200, listed: true } : { status: success };
  const perm = needed(r);
  // Grants exist only on shareable kinds, for routes that need a permission (setup makes them); without
  // them the `exact` and `allBut` users are strangers like any other.
  const granted = reach === 'owned' && perm !== null;
  // Whether the caller can see the object (LIST) and holds what the route needs.
  const sees = caller === 'owner' || (granted && (caller === 'exact' || (caller === 'allBut' && perm !== 'LIST')));
  const may = caller === 'owner' || (granted && caller === 'exact');
  if (r.kind === 'tagged') return { status: caller === 'owner' ? 200 : 404 }; // the tag is the owner's
  if (r.kind === 'list' || r.kind === 'detail') return { status: 200, listed: sees };
  if (!sees) return { status: 404 };
  return { status: may ? success : 403 };
}

test('the declarations agree with the expectation table (permissions per kind, permission and status per action)', () => {
  for (const d of kinds) {
    const row = expected(d.kind);
    const declared = (d as CollectionDecl).permissions;
    if (row.reach === 'owned') assert.deepEqual([...(declared ?? [])].sort(), [...row.grants!].sort(), `${d.kind}: grantable permissions`);
    else assert.ok(!declared?.length, `${d.kind} is ${row.reach}: it declares grantable permissions ${declared}`);
    const actions = (d as CollectionDecl).actions ?? {};
    assert.deepEqual(Object.keys(actions).sort(), Object.keys(row.actions ?? {}).sort(), `${d.kind}: actions`);
    for (const [name, a] of Object.entries(actions)) {
      assert.equal(a.permission, row.actions![name].permission, `${d.kind}.${name}: permission`);
      assert.equal(a.async ? 202 : 200, row.actions![name].status, `${d.kind}.${name}: status`);
    }
  }
});

// One subtest a route: each reports as it ends (the runner sees the file progress), and a failing route does
// not hide the next ones.
test('every route x every caller', async (t) => {
  const all = routes();
  assert.ok(all.length > 20, `found ${all.length} routes`);
  let accountCases = 0;
  for (const r of all) {
    await t.test(`${r.method} ${r.url}${r.action ? `?do=${r.action}` : ''}`, async () => {
      for (const caller of CALLERS) {
        // Account kinds: only the anonymous caller here (see ACCOUNT_KINDS_CHECKED_ELSEWHERE); counted, never silent.
        if (expected(r.decl.kind).reach === 'account' && caller !== 'anonymous') {
          accountCases++;
          continue;
        }
        const s = await setup(r);
        const res = await call(r, caller, s);
        const want = recorded(r, expectation(r, caller));
        const label = `${r.method} ${r.url}${r.action ? `?do=${r.action}` : ''} as ${caller}`;
        assert.equal(res.status, want.status, `${label}: ${res.text}`);
        if (want.listed !== undefined) {
          const uuids = res.json.objects.map(ID_OF[r.decl.kind] ?? ((o: any) => o.uuid));
          assert.equal(uuids.includes(s.uuid), want.listed, `${label}: listed`);
        }
        // Secrets the caller itself sent in the URL (an error may echo them) are no leak.
        const path = r.url.replace(':uuid', r.kind === 'tagged' ? s.tagUuid! : (s.uuid ?? ''));
        if (caller !== 'owner' && res.text)
          for (const secret of s.secrets.filter((x) => !path.includes(x))) assert.ok(!res.text.includes(secret), `${label} leaks ${secret}`);
        if (caller === 'exact' && res.status === 200 && res.json && !Array.isArray(res.json) && 'grantees' in res.json)
          assert.deepEqual(res.json.grantees, [], `${label}: grantees hidden`);
        cases++;
      }
    });
  }
  console.log(`permission matrix: ${accountCases} account-kind cases for signed-in callers left to ${ACCOUNT_KINDS_CHECKED_ELSEWHERE}`);
});
