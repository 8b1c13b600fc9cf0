/**
 * The accounts the bench measures, made quickly but shaped like the API makes them.
 *
 * The first drive, server and tags of the measured account are made through the API (so their stored
 * bodies are exactly what Stratus writes); every further server is a copy of that stored server body
 * with a new uuid, name and MAC, its own copy of the drive mounted on it, and one of the account's 20
 * tags, inserted in bulk through the repository (`insertMany`) plus `tag_members` rows. Growing is
 * incremental (100 -> 10k -> 100k in one database), so each size costs only its new rows.
 *
 * Sharing: another user owns 1,000 such servers and drives carrying a tag; an ACL made through the API
 * grants the measured user LIST, START, STOP and OPEN_VNC on that tag, so every list the measured user
 * asks for is the union of their own rows and 1,000 shared ones. The same ACL grants them to `peer`, whose
 * own 20 servers are shaped like solo's: solo's page against peer's is what 1,000 shares cost.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { loadConfig } from '../src/config.js';
import { systemClock } from '../src/core/clock.js';
import type { Services } from '../src/core/context.js';
import { randomIds } from '../src/core/ids.js';
import { setAccountLimits } from '../src/resources/accounts/rate-limits.js';
import { createUser } from '../src/resources/users/users.js';
import type { Store } from '../src/store/db.js';
import { ref, type Obj } from '../src/store/repository.js';
import { basicAuth, call } from './http.js';
import { withSimulator } from '../src/sim/index.js';

export const SHARED = 1000;
const TAGS = 20;
const BATCH = 5000;
const GiB = 1024 ** 3;

export interface Account {
  uuid: string;
  email: string;
  headers: Record<string, string>;
}

/**
 * The measured user, the user sharing with them, a third account for the write runs, and the "fast"
 * account: the reference page, 20 servers each with a drive, a NIC and a tag, nothing shared.
 */
export interface Accounts {
  caller: Account;
  sharer: Account;
  writer: Account;
  solo: Account;
  /** Shaped like solo (20 servers, each with a tag) and a grantee of the 1,000 shared servers too: what shares cost. */
  peer: Account;
}

/** What the bench has made so far, and the uuids its URLs name. */
export interface Seeded {
  /** Servers (and as many drives) the measured user owns. */
  own: number;
  server: string;
  drive: string;
  tag: string;
  tags: string[];
  template: { server: Obj; drive: Obj };
  /** The fast account's first server and tag (its 20 servers carry one of its 20 tags each). */
  solo: { server: string; tag: string };
  /** The sharer's ACL granting the 1,000 shared servers (to the measured user while `sharedWith` says so, and to peer). */
  acl: string;
}

export function servicesOf(store: Store, db: string, flags: Record<string, string> = {}): Services {
  return withSimulator({ store, clock: systemClock, ids: randomIds, config: loadConfig({ ...flags, db }, {}) });
}

/**
 * Users through the service layer (as `stratus users add` does), all exempt from rate limits: the
 * deployment's limits stay on (their cost is part of what is measured), but the bench would otherwise
 * measure 429s.
 */
export async function makeAccounts(s: Services): Promise<Accounts> {
  const one = async (name: string): Promise<Account> => {
    const email = `${name}@bench.local`;
    const password = `bench-${name}-password`;
    const user = await createUser(s, { email, password });
    await setAccountLimits(s, email, 'off');
    return { uuid: user.uuid, email, headers: basicAuth(email, password) };
  };
  return { caller: await one('caller'), sharer: await one('sharer'), writer: await one('writer'), solo: await one('solo'), peer: await one('peer') };
}

const mac = (prefix: number, i: number) =>
  [0x22, prefix, (i >>> 24) & 255, (i >>> 16) & 255, (i >>> 8) & 255, i & 255].map((b) => b.toString(16).padStart(2, '0')).join(':');

/** Server `i` of an owner (with its drive), shaped like the template, and its tag rows. */
function copy(template: Seeded['template'], i: number, opts: { prefix: string; macPrefix: number; serverTags: string[]; driveTags: string[] }) {
  const server = randomUUID();
  const drive = randomUUID();
  const t = template.server as { drives: Obj[]; nics: Obj[] };
  const serverBody = {
    ...template.server,
    name: `${opts.prefix}-srv-${i}`,
    drives: [{ ...t.drives[0], drive }],
    nics: [{ ...t.nics[0], mac: mac(opts.macPrefix, i) }],
  };
  const driveBody = { ...template.drive, name: `${opts.prefix}-drive-${i}`, mounted_on: [ref('servers', server)] };
  const members = [
    ...opts.serverTags.map((tag_uuid) => ({ tag_uuid, res_type: 'servers', res_uuid: server })),
    ...opts.driveTags.map((tag_uuid) => ({ tag_uuid, res_type: 'drives', res_uuid: drive })),
  ];
  return { server: { uuid: server, body: serverBody }, drive: { uuid: drive, body: driveBody }, members };
}

/** Insert servers `from`..`to`-1 of `owner`, in transactions of BATCH servers. */
async function bulk(
  store: Store,
  owner: string,
  from: number,
  to: number,
  template: Seeded['template'],
  opts: { prefix: string; macPrefix: number; tagsOf: (i: number) => { serverTags: string[]; driveTags: string[] } },
): Promise<void> {
  for (let start = from; start < to; start += BATCH) {
    const made = Array.from({ length: Math.min(BATCH, to - start) }, (_, k) => copy(template, start + k, { ...opts, ...opts.tagsOf(start + k) }));
    await store.transaction(async (tx) => {
      const now = new Date();
      await store.resources.insertMany(
        tx,
        now,
        made.map((m) => ({ kind: 'servers', uuid: m.server.uuid, owner, body: m.server.body })),
      );
      await store.resources.insertMany(
        tx,
        now,
        made.map((m) => ({ kind: 'drives', uuid: m.drive.uuid, owner, body: m.drive.body })),
      );
      // The repository replaces a tag's whole member set; here members are only added, in bulk.
      const members = made.flatMap((m) => m.members);
      for (let i = 0; i < members.length; i += 1000)
        await tx
          .insertInto('tag_members')
          .values(members.slice(i, i + 1000))
          .execute();
    });
  }
}

async function waitForDrive(api: string, a: Account, uuid: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const d = await call<{ status: string }>(`${api}drives/${uuid}/`, a.headers);
    if (d.status === 'unmounted') return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`drive ${uuid} never left "creating"`);
}

/**
 * The measured account's first server (with a drive and a NIC) and its 20 tags through the API at
 * `api` (`…/api/2.0/`); then the sharer's tag and ACL through the API and its 1,000 servers in bulk.
 */
export async function seedStart(store: Store, api: string, accounts: Accounts): Promise<Seeded> {
  const { caller, sharer } = accounts;
  type Made = { objects: { uuid: string }[] };
  const drive = (await call<Made>(`${api}drives/`, caller.headers, 'POST', { media: 'disk', name: 'bench-drive-0', size: 10 * GiB })).objects[0].uuid;
  await waitForDrive(api, caller, drive);
  const server = (
    await call<Made>(`${api}servers/`, caller.headers, 'POST', {
      name: 'bench-srv-0',
      cpu: 2000,
      mem: 2 * GiB,
      vnc_password: 'bench-vnc',
      meta: { role: 'bench', ssh_public_key: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBench bench@stratus' },
      drives: [{ boot_order: 1, dev_channel: '0:0', device: 'virtio', drive }],
      nics: [{ ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' }],
    })
  ).objects[0].uuid;
  const objects = Array.from({ length: TAGS }, (_, i) => ({ name: `bench-tag-${i}`, ...(i === 0 ? { resources: [server] } : {}) }));
  const tags = (await call<Made>(`${api}tags/`, caller.headers, 'POST', { objects })).objects.map((o) => o.uuid);

  const [s, d] = [await store.resources.get(store.db, 'servers', server), await store.resources.get(store.db, 'drives', drive)];
  if (!s || !d) throw new Error('the template server or drive is not stored');
  const template = { server: s.body, drive: d.body };

  const shareTag = (await call<Made>(`${api}tags/`, sharer.headers, 'POST', { name: 'shared-with-caller' })).objects[0].uuid;
  const acl = await call<Made>(`${api}acls/`, sharer.headers, 'POST', {
    name: 'bench-share',
    grantees: [{ uuid: caller.uuid }, { uuid: accounts.peer.uuid }],
    rules: ['LIST', 'START', 'STOP', 'OPEN_VNC'].map((permission) => ({ permission })),
    tags: [shareTag],
  });
  await bulk(store, sharer.uuid, 0, SHARED, template, { prefix: 'shared', macPrefix: 0x20, tagsOf: () => ({ serverTags: [shareTag], driveTags: [shareTag] }) });

  const solo = accounts.solo;
  const soloTags = (
    await call<Made>(`${api}tags/`, solo.headers, 'POST', { objects: Array.from({ length: TAGS }, (_, i) => ({ name: `solo-tag-${i}` })) })
  ).objects.map((o) => o.uuid);
  await bulk(store, solo.uuid, 0, 20, template, { prefix: 'solo', macPrefix: 0x21, tagsOf: (i) => ({ serverTags: [soloTags[i % TAGS]], driveTags: [] }) });
  const soloServer = (await call<Made>(`${api}servers/?limit=1`, solo.headers)).objects[0].uuid;
  const peer = accounts.peer;
  const peerTags = (
    await call<Made>(`${api}tags/`, peer.headers, 'POST', { objects: Array.from({ length: TAGS }, (_, i) => ({ name: `peer-tag-${i}` })) })
  ).objects.map((o) => o.uuid);
  await bulk(store, peer.uuid, 0, 20, template, { prefix: 'peer', macPrefix: 0x23, tagsOf: (i) => ({ serverTags: [peerTags[i % TAGS]], driveTags: [] }) });
  return { own: 1, server, drive, tag: tags[0], tags, template, solo: { server: soloServer, tag: soloTags[0] }, acl: acl.objects[0].uuid };
}

/**
 * Whether the sharer's ACL grants its 1,000 servers to the measured user (peer keeps its grant), through the
 * API at `api`: the flat section measures the same account own-only and with the shares.
 */
export async function sharedWith(api: string, accounts: Accounts, seeded: Seeded, on: boolean): Promise<void> {
  const grantees = [...(on ? [{ uuid: accounts.caller.uuid }] : []), { uuid: accounts.peer.uuid }];
  await call(`${api}acls/${seeded.acl}/`, accounts.sharer.headers, 'PUT', { grantees });
}

/** Grow the measured account to `size` servers (and drives); then refresh PostgreSQL's statistics. */
export async function growTo(store: Store, caller: Account, seeded: Seeded, size: number): Promise<void> {
  await bulk(store, caller.uuid, seeded.own, size, seeded.template, {
    prefix: 'bench',
    macPrefix: 0x19,
    tagsOf: (i) => ({ serverTags: [seeded.tags[i % TAGS]], driveTags: [] }),
  });
  seeded.own = Math.max(seeded.own, size);
  // A production PostgreSQL has autovacuum keep statistics and the visibility map current; right after a
  // bulk load it has not run yet, and the planner would see an empty table. SQLite gets no ANALYZE:
  // Stratus never runs it, so production plans without statistics.
  if (store.dialect === 'postgres') await sql`vacuum (analyze) resources, tag_members`.execute(store.db);
}
