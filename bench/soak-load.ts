/**
 * The soak's mixed load: many users, each reading and writing its own servers, drives, snapshots, tags,
 * firewall policies and subscriptions, with new ids all the time (objects are created and deleted, so a
 * user holds a handful of each at any moment), query strings that vary (paging, `fields=`, filters, XML,
 * cache busters), actions (start, stop, clone), bad requests (404, 400, 401, 405), cookie logins, ACLs
 * between users, and event-stream clients connecting and leaving. A seeded random source makes two runs
 * send the same kinds of requests in the same proportions.
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';

/** mulberry32: small, seedable, good enough to pick operations. */
export function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface SoakUser {
  email: string;
  password: string;
  uuid: string;
  auth: string;
  /** The user's live objects by kind (uuids), oldest first. */
  own: Record<Kind, string[]>;
}

const KINDS = ['servers', 'drives', 'snapshots', 'tags', 'fwpolicies'] as const;
type Kind = (typeof KINDS)[number];
/** Objects of a kind a user keeps at most: past it the oldest is deleted, so ids keep changing. */
const KEEP = 6;
const GiB = 1024 ** 3;

export interface Tally {
  requests: number;
  byClass: Record<string, number>;
  /** The first few 5xx answers (method, path, status, body start): a soak must not hide errors. */
  errors: string[];
  sockets: number;
}

export class Load {
  readonly users: SoakUser[] = [];
  readonly tally: Tally = { requests: 0, byClass: {}, errors: [], sockets: 0 };
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  private seq = 0;
  private stopped = false;

  constructor(
    readonly base: string,
    private readonly adminToken: string,
    private readonly rnd: () => number,
  ) {}

  private pick<T>(list: readonly T[]): T {
    return list[Math.floor(this.rnd() * list.length)];
  }

  request(
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: unknown,
  ): Promise<{ status: number; json: any; headers: http.IncomingHttpHeaders }> {
    const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
    const all = text === undefined ? headers : { 'content-type': 'application/json', ...headers };
    return new Promise((resolve, reject) => {
      const req = http.request(this.base + path, { method, headers: all, agent: this.agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          const raw = Buffer.concat(chunks).toString('utf8');
          this.tally.requests++;
          const cls = `${Math.floor(status / 100)}xx`;
          this.tally.byClass[cls] = (this.tally.byClass[cls] ?? 0) + 1;
          if (status >= 500 && this.tally.errors.length < 20) this.tally.errors.push(`${method} ${path} ${status} ${raw.slice(0, 200)}`);
          let json: any = null;
          if (raw && String(res.headers['content-type']).includes('json'))
            try {
              json = JSON.parse(raw);
            } catch {
              json = null;
            }
          resolve({ status, json, headers: res.headers });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(text);
    });
  }

  /** A new account through the admin plane, exempt from rate limits. */
  async addUser(): Promise<SoakUser> {
    const n = this.users.length;
    const email = `soak-${n}-${randomUUID().slice(0, 8)}@soak.local`;
    const password = `soak-password-${n}`;
    const r = await this.request('POST', '_stratus/admin/users', { authorization: `Bearer ${this.adminToken}` }, { email, password, rate_limits: 'off' });
    if (r.status !== 201 && r.status !== 200) throw new Error(`creating ${email} answered ${r.status}: ${JSON.stringify(r.json)}`);
    const auth = `Basic ${Buffer.from(`${email}:${password}`).toString('base64')}`;
    const me = await this.request('GET', 'api/2.0/profile/', { authorization: auth });
    const user: SoakUser = { email, password, uuid: me.json.uuid, auth, own: { servers: [], drives: [], snapshots: [], tags: [], fwpolicies: [] } };
    this.users.push(user);
    return user;
  }

  stop(): void {
    this.stopped = true;
  }

  close(): void {
    this.agent.destroy();
  }

  /** One worker: operations back to back until stopped. */
  async worker(): Promise<void> {
    while (!this.stopped) {
      const u = this.pick(this.users);
      try {
        await this.operation(u);
      } catch (e) {
        // A connection reset under load is noted, not fatal: the soak measures memory, and 5xx are counted.
        if (this.tally.errors.length < 20) this.tally.errors.push(`client: ${(e as Error).message}`);
      }
    }
  }

  private api(u: SoakUser, method: string, path: string, body?: unknown, extra: Record<string, string> = {}) {
    return this.request(method, `api/2.0/${path}`, { authorization: u.auth, ...extra }, body);
  }

  private async operation(u: SoakUser): Promise<void> {
    const r = this.rnd();
    if (r < 0.34) return this.list(u);
    if (r < 0.52) return this.getOne(u);
    if (r < 0.68) return this.create(u);
    if (r < 0.78) return this.update(u);
    if (r < 0.84) return this.action(u);
    if (r < 0.9) return this.remove(u, this.pick(KINDS));
    if (r < 0.97) return this.bad(u);
    if (r < 0.99) return this.share(u);
    return this.login(u);
  }

  /** Lists of many kinds with varied query strings: paging, fields, filters, XML, a cache buster now and then. */
  private async list(u: SoakUser): Promise<void> {
    const kind = this.pick([...KINDS, 'subscriptions', 'ips', 'vlans', 'jobs', 'logs', 'ledger', 'acls', 'balance', 'currentusage', 'capabilities', 'profile']);
    const q: string[] = [];
    const r = this.rnd();
    if (r < 0.3) q.push(`limit=${1 + Math.floor(this.rnd() * 30)}`);
    else if (r < 0.4) q.push(`limit=5&offset=${Math.floor(this.rnd() * 10)}`);
    if (this.rnd() < 0.2) q.push(`fields=${this.pick(['name', 'uuid', 'name,uuid', 'status,name', 'resource_uri'])}`);
    if (this.rnd() < 0.15) q.push(`name__contains=${this.pick(['a', 'soak', 'x', String(Math.floor(this.rnd() * 100))])}`);
    if (this.rnd() < 0.1 && u.own.tags.length) q.push(`tag=${this.pick(u.own.tags)}`);
    if (this.rnd() < 0.1) q.push('format=xml');
    if (this.rnd() < 0.1) q.push(`_=${this.seq++}`);
    const detail = KINDS.includes(kind as Kind) && this.rnd() < 0.4 ? 'detail/' : '';
    await this.api(u, 'GET', `${kind}/${detail}${q.length ? `?${q.join('&')}` : ''}`);
  }

  private async getOne(u: SoakUser): Promise<void> {
    const kind = this.pick(KINDS);
    const id = u.own[kind].length ? this.pick(u.own[kind]) : null;
    if (!id) return this.list(u);
    await this.api(u, 'GET', `${kind}/${id}/${this.rnd() < 0.1 ? '?format=xml' : ''}`);
  }

  private async create(u: SoakUser): Promise<void> {
    const kind = this.pick([...KINDS, 'subscriptions'] as const);
    const name = `soak ${kind} ${this.seq++}`;
    let body: unknown;
    if (kind === 'drives') body = { name, media: 'disk', size: GiB };
    else if (kind === 'servers') {
      const drive = u.own.drives.length && this.rnd() < 0.5 ? this.pick(u.own.drives) : null;
      body = {
        name,
        cpu: 1000,
        mem: 536_870_912,
        vnc_password: 'soak-vnc',
        meta: { [`k${this.seq % 50}`]: name },
        nics: [{ ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' }],
        drives: drive ? [{ boot_order: 1, dev_channel: '0:0', device: 'virtio', drive }] : [],
      };
    } else if (kind === 'snapshots') {
      if (!u.own.drives.length) return;
      body = { drive: this.pick(u.own.drives), name };
    } else if (kind === 'tags') body = { name, resources: [...u.own.servers.slice(-2), ...u.own.drives.slice(-2)] };
    else if (kind === 'fwpolicies')
      body = {
        name,
        rules: [
          { action: 'accept', direction: 'in', ip_proto: 'tcp', dst_port: String(1 + (this.seq % 60000)), src_ip: `10.${this.seq % 250}.0.0/16` },
          { action: 'drop', direction: 'both', ip_proto: 'udp' },
        ],
      };
    else body = { resource: 'dssd', amount: String(GiB), period: '1 month', auto_renew: false };
    const res = await this.api(u, 'POST', `${kind}/`, body);
    if (res.status === 201 && kind !== 'subscriptions') {
      const own = u.own[kind];
      own.push(res.json.objects[0].uuid);
      if (own.length > KEEP) await this.remove(u, kind, own[0]);
    }
  }

  private async update(u: SoakUser): Promise<void> {
    const kind = this.pick(KINDS);
    if (!u.own[kind].length) return this.create(u);
    const id = this.pick(u.own[kind]);
    // meta keys vary (bounded set), values always new.
    await this.api(u, 'PUT', `${kind}/${id}/`, { name: `renamed ${this.seq++}`, meta: { [`m${this.seq % 40}`]: randomUUID() } });
  }

  private async action(u: SoakUser): Promise<void> {
    const r = this.rnd();
    if (r < 0.6 && u.own.servers.length) {
      const id = this.pick(u.own.servers);
      await this.api(u, 'POST', `servers/${id}/action/?do=${this.rnd() < 0.5 ? 'start' : 'stop'}`, {});
    } else if (r < 0.85 && u.own.drives.length) {
      const res = await this.api(u, 'POST', `drives/${this.pick(u.own.drives)}/action/?do=clone`, { name: `clone ${this.seq++}` });
      if (res.status === 202 && res.json?.uuid) u.own.drives.push(res.json.uuid);
      if (u.own.drives.length > KEEP) await this.remove(u, 'drives', u.own.drives[0]);
    } else if (u.own.snapshots.length) {
      const res = await this.api(u, 'POST', `snapshots/${this.pick(u.own.snapshots)}/action/?do=clone`, {});
      if (res.status === 202 && res.json?.uuid) u.own.drives.push(res.json.uuid);
    }
  }

  /** Deletes one object (the oldest unless named); a running server is stopped first (a refused delete keeps it). */
  private async remove(u: SoakUser, kind: Kind, id = u.own[kind][0]): Promise<void> {
    if (!id) return;
    let res = await this.api(u, 'DELETE', `${kind}/${id}/${kind === 'servers' ? '?recurse=all_drives' : ''}`);
    if (res.status === 403 && kind === 'servers') {
      await this.api(u, 'POST', `servers/${id}/action/?do=stop`, {});
      res = await this.api(u, 'DELETE', `servers/${id}/`);
    }
    // Gone (deleted now, or with its server, or by a recursive delete): forget it.
    if (res.status === 204 || res.status === 404) u.own[kind] = u.own[kind].filter((x) => x !== id);
  }

  private async bad(u: SoakUser): Promise<void> {
    const r = this.rnd();
    if (r < 0.3) await this.api(u, 'GET', `${this.pick(KINDS)}/${randomUUID()}/`);
    else if (r < 0.45) await this.api(u, 'POST', 'servers/', { cpu: 'lots' });
    else if (r < 0.55) await this.api(u, 'POST', 'drives/', '{not json');
    else if (r < 0.65) await this.api(u, 'PATCH', 'servers/');
    else if (r < 0.75) await this.api(u, 'GET', `no-such-kind-${this.seq++}/x/`);
    else if (r < 0.85)
      await this.request('GET', 'api/2.0/servers/', { authorization: `Basic ${Buffer.from(`${u.email}:wrong-${this.seq++}`).toString('base64')}` });
    else await this.api(u, 'GET', `servers/?limit=${this.pick(['-1', 'abc', '1e9'])}&junk${this.seq++}=1`);
  }

  /** An ACL sharing the user's newest tag with another user (LIST), so lists merge shared rows. */
  private async share(u: SoakUser): Promise<void> {
    const other = this.pick(this.users);
    if (other === u || !u.own.tags.length) return;
    await this.api(u, 'POST', 'acls/', { name: `share ${this.seq++}`, grantees: [other.uuid], rules: [{ permission: 'LIST' }], tags: [u.own.tags.at(-1)] });
  }

  /** A cookie login (a new session), then a request with it. */
  private async login(u: SoakUser): Promise<void> {
    const res = await this.request('POST', 'api/2.0/accounts/action/?do=login', {}, { username: u.email, password: u.password });
    const cookies = ([] as string[]).concat(res.headers['set-cookie'] ?? []).map((c) => c.split(';')[0]);
    if (cookies.length) await this.request('GET', 'api/2.0/servers/', { cookie: cookies.join('; ') });
  }

  /** Event-stream clients: one connects every `everyMs`, stays 1 to 10 s, and leaves. */
  async streams(everyMs: number, wsBase: string): Promise<void> {
    while (!this.stopped) {
      const u = this.pick(this.users);
      void this.stream(u, wsBase, 1000 + this.rnd() * 9000).catch(() => undefined);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  }

  private async stream(u: SoakUser, wsBase: string, stayMs: number): Promise<void> {
    const res = await this.api(u, 'POST', 'accounts/action/?do=authenticate_asynchronous');
    const cookie = String(res.headers['set-cookie'] ?? '').split(';')[0];
    const ws = new WebSocket(`${wsBase}/websocket`, { headers: { cookie } });
    ws.on('message', () => undefined);
    ws.on('error', () => undefined);
    this.tally.sockets++;
    await new Promise((r) => setTimeout(r, stayMs));
    ws.close();
  }
}
