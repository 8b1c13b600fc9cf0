/**
 * Check-then-act races and lost updates, provoked on purpose.
 *
 * Each race is played for STRATUS_RACE_ROUNDS rounds (default 50). A round sets up fresh objects, then
 * releases the conflicting requests together (one `Promise.all`). On PostgreSQL the two requests of a
 * round go to two API servers on the same database schema (separate connection pools and schedulers, one
 * clock), as several API processes would; on SQLite (one process) both go to the one server. Rounds of a
 * race run in batches (STRATUS_RACE_BATCH, default 10) concurrently: the objects of different rounds are
 * independent. After a batch the clock moves and both schedulers run what fell due, then every round's
 * invariants are checked through the API (and, for audit and timer rows, the database).
 *
 * A violated invariant does not stop the race: it is recorded, and the race's test fails at the end
 * listing each kind of violation with its count and first examples (statuses and bodies). The outcome
 * tally (e.g. `start=202 delete=403: 41`) shows which interleavings the rounds actually produced.
 *
 * What is always allowed: a retryable 503 `concurrency` for a request that lost a race (never a 409 or a
 * 500), and every answer a sequential call could give. Both requests of a round answering 503 is not
 * a violation (under SERIALIZABLE, conflicts with other rounds of the batch can abort both): it shows in
 * the outcome tally, and the state checks still hold it to "nothing happened".
 */
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { startPeer, startServer, type TestServer } from '../helpers/server.js';
import { Client, type Response } from '../helpers/client.js';
import { engine } from '../helpers/db.js';
import { onlyOn } from '../helpers/skips.js';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Decimal } from 'decimal.js';
import { sql } from 'kysely';
import { assetPath } from '../../src/assets.js';

const ROUNDS = Math.max(1, Number(process.env.STRATUS_RACE_ROUNDS ?? 50));
const BATCH = Math.max(1, Number(process.env.STRATUS_RACE_BATCH ?? 10));
const GiB = 1024 ** 3;
const MINIMAL = { cpu: 1000, mem: 536870912, name: 'race', vnc_password: 'racepass' };

type User = Client & { uuid: string; email: string; password: string };
/** One user as seen through each API server: `a` talks to the first server, `b` to the second. */
interface Pair {
  a: Client;
  b: Client;
  uuid: string;
}

let A: TestServer;
let B: TestServer;
let alice: Pair;
let bob: Pair;
/** Snapshots an account may have on the race servers: small, so a race can reach the limit. */
const SNAPSHOT_MAX = 3;
const capsDir = mkdtempSync(join(tmpdir(), 'stratus-race-caps-'));

before(async () => {
  const caps = JSON.parse(readFileSync(assetPath('resources/capabilities/defaults.json'), 'utf8'));
  caps.snapshots = { current: 0, max: SNAPSHOT_MAX };
  writeFileSync(join(capsDir, 'caps.json'), JSON.stringify(caps));
  const flags = { capabilities: join(capsDir, 'caps.json') };
  A = await startServer(flags);
  B = engine === 'postgres' ? await startPeer(A, flags) : A;
  const pair = (u: User): Pair => ({ a: u, b: new Client(B.base, u.creds), uuid: u.uuid });
  [alice, bob] = [pair(await A.user()), pair(await A.user())];
});
after(async () => {
  if (B && B !== A) await B.close();
  await A?.close();
  rmSync(capsDir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------------
// Recording

interface Violation {
  round: number;
  what: string;
  detail: string;
}

const show = (r: Response | undefined) => (r ? `${r.status} ${r.text.replace(/\s+/g, ' ').slice(0, 300)}` : 'no answer');

class Race {
  readonly violations: Violation[] = [];
  readonly outcomes = new Map<string, number>();
  rounds = 0;
  /**
   * `met`: an outcome that shows the conflicting requests really met (one refused because the other won);
   * the race fails when no round produced one (the requests ran one after the other, and the race went
   * unplayed). Where every order answers the same by design (concurrent updates that must all land), a
   * string says so and the state checks carry the race.
   */
  constructor(
    readonly name: string,
    readonly met: RegExp | string,
  ) {}

  /** No violation, and (where the answers can show it) some round in which the requests met. */
  assertPlayed(text: string): void {
    assert.equal(this.violations.length, 0, text);
    if (this.met instanceof RegExp) {
      const met = this.met;
      assert.ok(
        [...this.outcomes.keys()].some((k) => met.test(k)),
        `${this.name}: no round showed the requests meeting (${met}); the race was not played\n${text}`,
      );
    }
  }

  fail(round: number, what: string, detail: string | Record<string, unknown> = ''): void {
    const text =
      typeof detail === 'string'
        ? detail
        : Object.entries(detail)
            .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
            .join(' | ');
    this.violations.push({ round, what, detail: text });
  }
  check(round: number, ok: boolean, what: string, detail: () => string | Record<string, unknown>): void {
    if (!ok) this.fail(round, what, detail());
  }
  outcome(key: string): void {
    this.outcomes.set(key, (this.outcomes.get(key) ?? 0) + 1);
  }

  /**
   * An answer must have one of `allowed` statuses; a 503 must be `concurrency`, a 403 `permission`; a 5xx
   * other than 503 is always a violation of its own.
   */
  answer(round: number, label: string, res: Response, allowed: number[], objects: Record<string, string> = {}): void {
    const about = Object.entries(objects)
      .map(([k, v]) => ` | ${k}: ${v}`)
      .join('');
    if (res.status >= 500 && res.status !== 503) this.fail(round, `${label}: 5xx other than 503`, show(res) + about);
    else if (!allowed.includes(res.status)) this.fail(round, `${label}: status ${res.status} (allowed ${allowed.join('/')})`, show(res) + about);
    const type = Array.isArray(res.json) ? res.json[0]?.error_type : undefined;
    if (res.status === 503 && type !== 'concurrency') this.fail(round, `${label}: 503 with error_type ${type}`, show(res));
    if (res.status === 403 && type !== 'permission') this.fail(round, `${label}: 403 with error_type ${type}`, show(res));
  }

  report(): string {
    const byWhat = new Map<string, Violation[]>();
    for (const v of this.violations) byWhat.set(v.what, [...(byWhat.get(v.what) ?? []), v]);
    const lines = [`${this.name} [${engine}${B !== A ? ', two API servers' : ''}]: ${this.rounds} rounds, ${this.violations.length} violation(s)`];
    lines.push(
      `  outcomes: ${
        [...this.outcomes]
          .sort((x, y) => y[1] - x[1])
          .map(([k, n]) => `${k}: ${n}`)
          .join('; ') || 'none'
      }`,
    );
    for (const [what, list] of byWhat) {
      const rounds = new Set(list.map((v) => v.round)).size;
      lines.push(`  ✗ ${what} — ${list.length}x in ${rounds}/${this.rounds} rounds`);
      for (const v of list.slice(0, 3)) lines.push(`      round ${v.round}: ${v.detail.slice(0, 700)}`);
    }
    return lines.join('\n');
  }
}

const reports: string[] = [];

/**
 * Two API servers (PostgreSQL) take a round's requests in either order, and the rounds show both: a race
 * whose orders answer differently must show the second order too. One process (SQLite) serialises them.
 */
const BOTH_ORDERS = engine === 'postgres';

/**
 * Play a race: `setup` each round of a batch concurrently, optionally move the clock so what setup
 * started settles, `fire` every round of the batch at once, move the clock by `settleMs` (both
 * schedulers run what fell due), then `verify` each round.
 */
async function play<S, F>(
  t: TestContext,
  race: Race,
  steps: {
    setup: (round: number) => Promise<S>;
    setupSettleMs?: number;
    /** After the setup settled (e.g. start a resize whose timer `during` makes due). */
    afterSetup?: (s: S) => Promise<void>;
    /** Runs concurrently with the batch's `fire` (e.g. a clock move that makes timers due). */
    during?: () => Promise<void>;
    fire: (s: S, round: number) => Promise<F>;
    settleMs?: number;
    verify: (s: S, f: F, round: number) => Promise<void>;
  },
): Promise<void> {
  const started = Date.now();
  for (let first = 0; first < ROUNDS; first += BATCH) {
    const rounds = Array.from({ length: Math.min(BATCH, ROUNDS - first) }, (_, k) => first + k);
    const states = await Promise.all(rounds.map((r) => steps.setup(r)));
    if (steps.setupSettleMs) await settle(steps.setupSettleMs);
    if (steps.afterSetup) await Promise.all(states.map((st) => steps.afterSetup!(st)));
    await warm(rounds.length);
    const [fired] = await Promise.all([Promise.all(rounds.map((r, k) => steps.fire(states[k], r))), steps.during?.()]);
    await settle(steps.settleMs ?? 0);
    await Promise.all(rounds.map((r, k) => steps.verify(states[k], fired[k], r)));
    race.rounds += rounds.length;
  }
  const text = `${race.report()}\n  time: ${((Date.now() - started) / 1000).toFixed(1)} s`;
  reports.push(text);
  for (const line of text.split('\n')) t.diagnostic(line);
  race.assertPlayed(text);
}

/** Move the (shared) clock and let both servers' schedulers run everything due, twice (follow-ups). */
async function settle(ms: number): Promise<void> {
  if (ms) A.clock.advance(ms);
  for (let pass = 0; pass < 2; pass++) await Promise.all(B === A ? [A.scheduler.runDue()] : [A.scheduler.runDue(), B.scheduler.runDue()]);
}

/** Open (and authenticate) enough keep-alive connections to both servers before a batch is released. */
async function warm(n: number): Promise<void> {
  await Promise.all(
    Array.from({ length: n }, () => [
      alice.a.get('capabilities/'),
      alice.b.get('capabilities/'),
      bob.a.get('capabilities/'),
      bob.b.get('capabilities/'),
    ]).flat(),
  );
}

// ---------------------------------------------------------------------------------------------------
// Small API helpers (always through the first server for setup and checks)

async function created(res: Response, what: string): Promise<string> {
  assert.equal(res.status, 201, `${what}: ${res.text}`);
  return res.json.objects[0].uuid;
}
const mkDrive = async (c: Client, name: string, body: Record<string, unknown> = {}) =>
  created(await c.post('drives/', { media: 'disk', name, size: GiB, ...body }), 'drive');
const mkServer = async (c: Client, name: string, body: Record<string, unknown> = {}) =>
  created(await c.post('servers/', { ...MINIMAL, name, ...body }), 'server');
const mkTag = async (c: Client, name: string, resources: string[] = []) => created(await c.post('tags/', { name, resources }), 'tag');
const act = (c: Client, kind: string, uuid: string, action: string, body: unknown = {}) => c.request('POST', `${kind}/${uuid}/action/?do=${action}`, { body });
const attach = (...drives: string[]) => ({ drives: drives.map((drive) => ({ drive, device: 'virtio' })) });

/** Retry a request that answered 503 (a lost race), a few times; returns the last answer. */
async function retry503(send: () => Promise<Response>, first: Response): Promise<Response> {
  let res = first;
  for (let i = 0; i < 5 && res.status === 503; i++) {
    await new Promise((r) => setTimeout(r, 20 * (i + 1)));
    res = await send();
  }
  return res;
}

const ids = (list: { uuid: string }[] | undefined) => (list ?? []).map((x) => x.uuid).sort();
const same = (x: string[], y: string[]) => x.length === y.length && [...x].sort().every((v, i) => v === [...y].sort()[i]);

async function auditActions(uuid: string): Promise<string[]> {
  const rows = await A.services.store.db.selectFrom('audit_log').select(['action', 'success']).where('uuid', '=', uuid).orderBy('seq').execute();
  return rows.map((r) => (r.success ? r.action : `${r.action}:failed`));
}
/** Timers about these subjects that failed for good, or are being retried after a non-transient error. */
async function troubledTimers(subjects: string[]): Promise<string[]> {
  const rows = await A.services.store.db
    .selectFrom('timers')
    .select(['kind', 'subject', 'state', 'attempts', 'last_error'])
    .where('subject', 'in', subjects)
    .execute();
  // A retry after a lost race (serialization failure, deadlock, lock timeout) is how timers cope with contention.
  const transient = (e: string | null) => /concurren|serializ|deadlock|lock|retry/i.test(e ?? '');
  return rows
    .filter((r) => r.state === 'failed' || (r.attempts > 0 && !transient(r.last_error)))
    .map((r) => `${r.kind} ${r.state} x${r.attempts}: ${r.last_error}`);
}

/** Mount consistency of one drive against the servers that might list it. */
async function mountsAgree(race: Race, round: number, drive: string, servers: string[]): Promise<{ exists: boolean; mountedOn: string[]; listing: string[] }> {
  const d = await alice.a.get(`drives/${drive}/`);
  const listing: string[] = [];
  for (const s of servers) {
    const res = await alice.a.get(`servers/${s}/`);
    if (res.status === 200 && (res.json.drives as { drive: { uuid: string } }[]).some((x) => x.drive.uuid === drive)) listing.push(s);
  }
  if (d.status === 404) {
    race.check(round, listing.length === 0, 'a server lists a deleted drive', () => ({ drive, listing }));
    return { exists: false, mountedOn: [], listing };
  }
  const mountedOn = ids(d.json.mounted_on);
  const known = mountedOn.filter((s) => servers.includes(s));
  race.check(round, same(known, listing), "drive's mounted_on and the servers' drives disagree", () => ({
    drive,
    mounted_on: mountedOn,
    servers_listing_it: listing,
  }));
  const wantStatus = mountedOn.length ? 'mounted' : 'unmounted';
  race.check(round, d.json.status === wantStatus, `drive status is not ${wantStatus}`, () => ({ drive, status: d.json.status, mounted_on: mountedOn }));
  return { exists: true, mountedOn, listing };
}

/** A random pause of 0–3 ms, so concurrent loops on one event loop do not run in lockstep. */
const jitter = () => new Promise((r) => setTimeout(r, Math.floor(Math.random() * 4)));

// ---------------------------------------------------------------------------------------------------

describe(`check-then-act races (${engine}${engine === 'postgres' ? ', two API servers' : ''}, ${ROUNDS} rounds each)`, () => {
  test('two PUTs attach one non-multimount drive to two servers: at most one wins, mounts agree', async (t) => {
    const race = new Race('attach-same-drive (PUT S1 || PUT S2)', /=(403|503)\b/);
    await play(t, race, {
      setup: async (i) => ({ d: await mkDrive(alice.a, `att-${i}`), s1: await mkServer(alice.a, `att-${i}-1`), s2: await mkServer(alice.a, `att-${i}-2`) }),
      setupSettleMs: 2_000,
      fire: ({ d, s1, s2 }) => Promise.all([alice.a.put(`servers/${s1}/`, attach(d)), alice.b.put(`servers/${s2}/`, attach(d))]),
      verify: async ({ d, s1, s2 }, [r1, r2], i) => {
        race.outcome(`S1=${r1.status} S2=${r2.status}`);
        race.answer(i, 'PUT S1', r1, [200, 403, 503]);
        race.answer(i, 'PUT S2', r2, [200, 403, 503]);
        const wins = [r1, r2].filter((r) => r.status === 200).length;
        race.check(i, wins <= 1, 'both attachments answered 200', () => ({ s1: show(r1), s2: show(r2) }));
        race.check(i, !(r1.status === 403 && r2.status === 403), 'both refused as "already mounted" though neither was', () => ({
          s1: show(r1),
          s2: show(r2),
        }));
        const m = await mountsAgree(race, i, d, [s1, s2]);
        race.check(i, m.listing.length <= 1, 'the drive is on two servers', () => ({ listing: m.listing, mounted_on: m.mountedOn }));
        race.check(i, m.listing.length === wins, 'attachments listed differ from the 200s', () => ({ listing: m.listing, s1: r1.status, s2: r2.status }));
      },
    });
  });

  test('two POST /servers/ with the same drive: at most one 201, mounts agree', async (t) => {
    const race = new Race('create-with-same-drive (POST || POST)', /=(403|503)\b/);
    await play(t, race, {
      setup: async (i) => ({ d: await mkDrive(alice.a, `pst-${i}`) }),
      setupSettleMs: 2_000,
      fire: ({ d }, i) =>
        Promise.all([
          alice.a.post('servers/', { ...MINIMAL, name: `pst-${i}-a`, ...attach(d) }),
          alice.b.post('servers/', { ...MINIMAL, name: `pst-${i}-b`, ...attach(d) }),
        ]),
      verify: async ({ d }, [r1, r2], i) => {
        race.outcome(`A=${r1.status} B=${r2.status}`);
        race.answer(i, 'POST A', r1, [201, 403, 503]);
        race.answer(i, 'POST B', r2, [201, 403, 503]);
        const winners = [r1, r2].filter((r) => r.status === 201).map((r) => r.json.objects[0].uuid as string);
        race.check(i, winners.length <= 1, 'both servers created with the drive', () => ({ a: show(r1), b: show(r2) }));
        // Nothing of a refused create may remain.
        const named = ids((await alice.a.get(`servers/?name=pst-${i}-a,pst-${i}-b&limit=0`)).json.objects);
        race.check(i, same(named, winners), 'servers that exist differ from the 201s', () => ({ existing: named, winners }));
        const m = await mountsAgree(race, i, d, named);
        race.check(i, m.mountedOn.length <= 1 && m.listing.length <= 1, 'the drive is on two servers', () => ({ listing: m.listing, mounted_on: m.mountedOn }));
      },
    });
  });

  test('two DELETEs of one tag: exactly one 204, the other 404', async (t) => {
    const race = new Race('delete-tag-twice (DELETE || DELETE)', /=(404|503)\b/);
    await play(t, race, {
      setup: async (i) => ({ tag: await mkTag(alice.a, `del-${i}`) }),
      fire: ({ tag }) => Promise.all([alice.a.delete(`tags/${tag}/`), alice.b.delete(`tags/${tag}/`)]),
      verify: async ({ tag }, [r1, r2], i) => {
        race.outcome(`A=${r1.status} B=${r2.status}`);
        race.answer(i, 'DELETE A', r1, [204, 404, 503]);
        race.answer(i, 'DELETE B', r2, [204, 404, 503]);
        const wins = [r1, r2].filter((r) => r.status === 204).length;
        race.check(i, wins <= 1, 'both deletes answered 204', () => ({ a: show(r1), b: show(r2) }));
        race.check(i, !(r1.status === 404 && r2.status === 404), 'both 404 for an existing tag', () => ({ a: show(r1), b: show(r2) }));
        const after = (await alice.a.get(`tags/${tag}/`)).status;
        race.check(i, after === (wins ? 404 : 200), 'tag existence differs from the answers', () => ({ after, a: r1.status, b: r2.status }));
        const deletes = (await auditActions(tag)).filter((a) => a === 'delete').length;
        race.check(i, deletes <= 1, 'two delete entries in the audit log', () => ({ audit: deletes }));
      },
    });
  });

  test('start || DELETE of a stopped server: never both; no boot of a deleted server; consistent after', async (t) => {
    const race = new Race('start-vs-delete (do=start || DELETE)', /=(403|503)\b/);
    await play(t, race, {
      setup: async (i) => {
        const d = await mkDrive(alice.a, `svd-${i}`);
        return { d, s: await mkServer(alice.a, `svd-${i}`, attach(d)) };
      },
      setupSettleMs: 2_000,
      // Sent at once, the DELETE reached the row first in ~98% of rounds (50 rounds then often had no start
      // winning at all): it is sent 0-3 ms after the start, so both orders are played, each a few ms apart.
      fire: async ({ s }, i) => {
        const start = act(alice.a, 'servers', s, 'start');
        await new Promise((r) => setTimeout(r, i % 4));
        return Promise.all([start, alice.b.delete(`servers/${s}/`)]);
      },
      settleMs: 10_000,
      verify: async ({ s, d }, [start, del], i) => {
        race.outcome(`start=${start.status} delete=${del.status}`);
        race.answer(i, 'start', start, [202, 404, 503], { server: s });
        race.answer(i, 'DELETE', del, [204, 403, 503], { server: s });
        race.check(i, !(start.status === 202 && del.status === 204), 'start accepted and server deleted', () => ({ start: show(start), delete: show(del) }));
        const now = await alice.a.get(`servers/${s}/`);
        const audit = await auditActions(s);
        race.check(i, !(audit.includes('start_send') && audit.includes('delete')), 'audit log: a start and a delete of the same server', () => ({ audit }));
        race.check(i, !audit.includes('boot') || !audit.includes('delete'), 'audit log: a deleted server booted', () => ({ audit }));
        if (del.status === 204) {
          race.check(i, now.status === 404, 'deleted server is back', () => show(now));
        } else if (start.status === 202) {
          race.check(i, now.status === 200 && now.json.status === 'running', 'started server is not running after the boot delay', () => show(now));
        }
        const trouble = await troubledTimers([s, d]);
        race.check(i, trouble.length === 0, 'a timer failed', () => ({ trouble }));
        await mountsAgree(race, i, d, [s]);
      },
    });
  });

  test('clone || DELETE of a drive: never both; a clone in progress keeps its source', async (t) => {
    const race = new Race('clone-vs-delete (do=clone || DELETE)', /=(403|503)\b/);
    await play(t, race, {
      setup: async (i) => ({ d: await mkDrive(alice.a, `cvd-${i}`) }),
      setupSettleMs: 2_000,
      fire: ({ d }, i) => Promise.all([act(alice.a, 'drives', d, 'clone', { name: `cvd-${i}-clone` }), alice.b.delete(`drives/${d}/`)]),
      settleMs: 10_000,
      verify: async ({ d }, [clone, del], i) => {
        race.outcome(`clone=${clone.status} delete=${del.status}`);
        race.answer(i, 'clone', clone, [202, 404, 503]);
        race.answer(i, 'DELETE', del, [204, 403, 503]);
        race.check(i, !(clone.status === 202 && del.status === 204), 'clone accepted and its source deleted', () => ({
          clone: show(clone),
          delete: show(del),
        }));
        const src = (await alice.a.get(`drives/${d}/`)).status;
        race.check(i, src === (del.status === 204 ? 404 : 200), 'source existence differs from the answers', () => ({
          source: src,
          clone: clone.status,
          delete: del.status,
        }));
        const copies = (await alice.a.get(`drives/detail/?name=cvd-${i}-clone&limit=0`)).json.objects as any[];
        race.check(i, copies.length === (clone.status === 202 ? 1 : 0), 'clones that exist differ from the answers', () => ({
          copies: copies.length,
          clone: clone.status,
        }));
        for (const c of copies) {
          race.check(i, c.status === 'unmounted', 'clone did not finish', () => ({ status: c.status }));
          const jobs = await Promise.all((c.jobs as { resource_uri: string }[]).map(async (j) => (await alice.a.get(j.resource_uri)).json.state));
          race.check(
            i,
            jobs.every((s) => s === 'success'),
            'clone job did not succeed',
            () => ({ jobs }),
          );
        }
        const audit = await auditActions(d);
        race.check(i, !(audit.includes('clone_src') && audit.includes('delete')), 'audit log: the source of a clone was deleted', () => ({ audit }));
        const trouble = await troubledTimers([d, ...copies.map((c) => c.uuid)]);
        race.check(i, trouble.length === 0, 'a timer failed', () => ({ trouble }));
      },
    });
  });

  for (const variant of ['rules', 'membership'] as const) {
    test(`a grantee reads while the owner toggles the ACL ${variant}: every 200 carries LIST`, async (t) => {
      const race = new Race(
        `acl-read-vs-toggle-${variant} (owner PUTs || grantee GETs)`,
        variant === 'membership'
          ? /get200=[1-9]\d* get404=[1-9]/
          : 'every read answers 200 by design (LIST is never taken away): the checks hold each 200 to carry LIST',
      );
      const TOGGLES = 4;
      await play(t, race, {
        setup: async (i) => {
          const d = await mkDrive(alice.a, `acl-${variant}-${i}`);
          const tag = await mkTag(alice.a, `acl-${variant}-${i}`, [d]);
          const acl = await created(
            await alice.a.post('acls/', { name: `acl-${i}`, grantees: [{ uuid: bob.uuid }], rules: [{ permission: 'LIST' }], tags: [{ uuid: tag }] }),
            'acl',
          );
          return { d, tag, acl };
        },
        setupSettleMs: 2_000,
        fire: async ({ d, tag, acl }) => {
          let done = false;
          const writes: Response[] = [];
          const reads: { kind: 'get' | 'list'; res: Response }[] = [];
          const owner = (async () => {
            for (let k = 0; k < TOGGLES; k++) {
              await jitter(); // no lockstep with the readers (one event loop on SQLite)
              const c = k % 2 ? alice.b : alice.a;
              const on = k % 2 === 0;
              writes.push(
                variant === 'rules'
                  ? await c.put(`acls/${acl}/`, { rules: on ? [{ permission: 'LIST' }, { permission: 'EDIT' }] : [{ permission: 'LIST' }] })
                  : await c.put(`tags/${tag}/`, { resources: on ? [] : [d] }),
              );
            }
            done = true;
          })();
          const reader = async (c: Client) => {
            for (let k = 0; !done || k < 2; k++) {
              await jitter();
              reads.push(k % 2 ? { kind: 'list', res: await c.get(`drives/detail/?uuid=${d}&limit=0`) } : { kind: 'get', res: await c.get(`drives/${d}/`) });
            }
          };
          await Promise.all([owner, reader(bob.a), reader(bob.b)]);
          return { writes, reads };
        },
        verify: async ({ d }, { writes, reads }, i) => {
          for (const w of writes) race.answer(i, 'owner PUT', w, [200, 503]);
          let n200 = 0;
          let n404 = 0;
          for (const { kind, res } of reads) {
            if (kind === 'get') {
              race.answer(i, 'grantee GET', res, variant === 'rules' ? [200, 503] : [200, 404, 503]);
              if (res.status === 200) {
                n200++;
                const perms = res.json.permissions as string[];
                race.check(i, Array.isArray(perms) && perms.includes('LIST'), 'grantee GET 200 without LIST in permissions', () => show(res));
              } else if (res.status === 404) n404++;
            } else {
              race.answer(i, 'grantee list', res, [200, 503]);
              if (res.status !== 200) continue;
              const seen = (res.json.objects as any[]).filter((o) => o.uuid === d);
              if (variant === 'rules') race.check(i, seen.length === 1, 'grantee list misses a drive shared with LIST throughout', () => show(res));
              for (const o of seen)
                race.check(i, (o.permissions as string[])?.includes('LIST'), 'grantee list shows the drive without LIST in permissions', () => show(res));
            }
          }
          race.outcome(`get200=${n200} get404=${n404}`);
          // After the toggles the drive is shared with LIST (the last toggle grants it): a plain read sees it.
          const settled = await bob.a.get(`drives/${d}/`);
          race.check(
            i,
            settled.status === 200 && (settled.json.permissions as string[]).includes('LIST'),
            'after the toggles the grantee does not see the drive with LIST',
            () => show(settled),
          );
        },
      });
    });
  }

  test("5 concurrent PUTs of one tag's resources: 200 or 503 (retry succeeds), final = one of the writes", async (t) => {
    const race = new Race(
      'tag-resources-concurrent (5 x PUT tag)',
      'every request succeeds in either order by design: the state checks hold that no update is lost',
    );
    await play(t, race, {
      setup: async (i) => {
        const drives = await Promise.all([0, 1, 2, 3, 4].map((k) => mkDrive(alice.a, `tr-${i}-${k}`)));
        return { drives, tag: await mkTag(alice.a, `tr-${i}`, [drives[0]]) };
      },
      fire: async ({ drives, tag }) => {
        const sets = drives.map((_, k) => [drives[k], drives[(k + 1) % 5], drives[(k + 3) % 5]].slice(0, 1 + (k % 3)));
        const send = (k: number) => () => (k % 2 ? alice.b : alice.a).put(`tags/${tag}/`, { resources: sets[k] });
        const first = await Promise.all(sets.map((_, k) => send(k)()));
        const final = await Promise.all(first.map((r, k) => retry503(send(k), r)));
        return { sets, first, final };
      },
      settleMs: 2_000,
      verify: async ({ tag }, { sets, first, final }, i) => {
        const tally = first
          .map((r) => r.status)
          .sort()
          .join(',');
        race.outcome(tally);
        first.forEach((r) => race.answer(i, 'PUT tag', r, [200, 503]));
        final.forEach((r, k) => race.check(i, first[k].status !== 503 || r.status === 200, 'a retried 503 did not succeed', () => ({ put: k, last: show(r) })));
        const now = ids((await alice.a.get(`tags/${tag}/`)).json.resources);
        const landed = sets.filter((_, k) => final[k].status === 200);
        race.check(
          i,
          landed.some((s) => same(s, now)),
          'final members are none of the acknowledged writes',
          () => ({ now, sets }),
        );
      },
    });
  });

  test("concurrent PUTs of several drives' tags: 200 or 503 (retry succeeds), every membership kept", async (t) => {
    const race = new Race(
      'drive-tags-concurrent (5 drives x PUT tags)',
      'every request succeeds in either order by design: the state checks hold that no update is lost',
    );
    await play(t, race, {
      setup: async (i) => {
        const drives = await Promise.all([0, 1, 2, 3, 4].map((k) => mkDrive(alice.a, `dt-${i}-${k}`)));
        return { drives, t1: await mkTag(alice.a, `dt-${i}-1`), t2: await mkTag(alice.a, `dt-${i}-2`) };
      },
      fire: async ({ drives, t1, t2 }) => {
        const send = (k: number) => () => (k % 2 ? alice.b : alice.a).put(`drives/${drives[k]}/`, { tags: [t1, t2] });
        const first = await Promise.all(drives.map((_, k) => send(k)()));
        return { first, final: await Promise.all(first.map((r, k) => retry503(send(k), r))) };
      },
      settleMs: 2_000,
      verify: async ({ drives, t1, t2 }, { first, final }, i) => {
        race.outcome(
          first
            .map((r) => r.status)
            .sort()
            .join(','),
        );
        first.forEach((r) => race.answer(i, 'PUT drive tags', r, [200, 503]));
        final.forEach((r, k) => race.check(i, first[k].status !== 503 || r.status === 200, 'a retried 503 did not succeed', () => ({ put: k, last: show(r) })));
        for (const tag of [t1, t2]) {
          if (!final.every((r) => r.status === 200)) break;
          const members = ids((await alice.a.get(`tags/${tag}/`)).json.resources);
          race.check(i, same(members, drives), 'tag lost members written concurrently', () => ({ members: members.length, want: drives.length }));
        }
        for (const [k, d] of drives.entries()) {
          if (final[k].status !== 200) continue;
          const tags = ids((await alice.a.get(`drives/${d}/`)).json.tags);
          race.check(i, same(tags, [t1, t2]), "drive's tags lost", () => ({ tags }));
        }
      },
    });
  });

  test("concurrent PUTs of one drive's tags: 200 or 503 (retry succeeds), final = one of the writes", async (t) => {
    const race = new Race(
      'one-drive-tags-concurrent (5 x PUT drive tags)',
      'every request succeeds in either order by design: the state checks hold that no update is lost',
    );
    await play(t, race, {
      setup: async (i) => {
        const tags = await Promise.all([0, 1, 2].map((k) => mkTag(alice.a, `odt-${i}-${k}`)));
        return { tags, d: await mkDrive(alice.a, `odt-${i}`) };
      },
      fire: async ({ tags, d }) => {
        const sets = [[tags[0]], [tags[1]], [tags[0], tags[1]], [tags[1], tags[2]], [tags[0], tags[1], tags[2]]];
        const send = (k: number) => () => (k % 2 ? alice.b : alice.a).put(`drives/${d}/`, { tags: sets[k] });
        const first = await Promise.all(sets.map((_, k) => send(k)()));
        return { sets, first, final: await Promise.all(first.map((r, k) => retry503(send(k), r))) };
      },
      settleMs: 2_000,
      verify: async ({ d, tags }, { sets, first, final }, i) => {
        race.outcome(
          first
            .map((r) => r.status)
            .sort()
            .join(','),
        );
        first.forEach((r) => race.answer(i, 'PUT drive tags', r, [200, 503]));
        final.forEach((r, k) => race.check(i, first[k].status !== 503 || r.status === 200, 'a retried 503 did not succeed', () => ({ put: k, last: show(r) })));
        const now = ids((await alice.a.get(`drives/${d}/`)).json.tags);
        const landed = sets.filter((_, k) => final[k].status === 200);
        if (landed.length)
          race.check(
            i,
            landed.some((s) => same(s, now)),
            'final drive tags are none of the acknowledged writes',
            () => ({ now, sets }),
          );
        // The tags' side shows the same membership.
        const members = await Promise.all(tags.map(async (tg) => ids((await alice.a.get(`tags/${tg}/`)).json.resources).includes(d)));
        race.check(
          i,
          same(
            tags.filter((_, k) => members[k]),
            now,
          ),
          "tags' resources and the drive's tags disagree",
          () => ({ now, members }),
        );
      },
    });
  });

  test("PUT of a tag's resources || PUTs of its drives' tags (same memberships from both sides): 200 or 503, all kept", async (t) => {
    const race = new Race(
      'tag-and-drive-tags-concurrent (PUT tag || 3 x PUT drive tags)',
      'every request succeeds in either order by design: the state checks hold that no update is lost',
    );
    await play(t, race, {
      setup: async (i) => ({ drives: await Promise.all([0, 1, 2].map((k) => mkDrive(alice.a, `tdt-${i}-${k}`))), tag: await mkTag(alice.a, `tdt-${i}`) }),
      fire: async ({ drives, tag }) => {
        const sends = [
          () => alice.a.put(`tags/${tag}/`, { resources: drives }),
          ...drives.map((d, k) => () => (k % 2 ? alice.a : alice.b).put(`drives/${d}/`, { tags: [tag] })),
        ];
        const first = await Promise.all(sends.map((s) => s()));
        return { first, final: await Promise.all(first.map((r, k) => retry503(sends[k], r))) };
      },
      settleMs: 2_000,
      verify: async ({ drives, tag }, { first, final }, i) => {
        race.outcome(first.map((r) => r.status).join(','));
        first.forEach((r, k) => race.answer(i, k ? 'PUT drive tags' : 'PUT tag resources', r, [200, 503]));
        final.forEach((r, k) => race.check(i, first[k].status !== 503 || r.status === 200, 'a retried 503 did not succeed', () => ({ put: k, last: show(r) })));
        const members = (await alice.a.get(`tags/${tag}/`)).json.resources as { uuid: string }[];
        if (final.every((r) => r.status === 200))
          race.check(i, same(ids(members), drives), 'tag members differ from what every write asked', () => ({ members: ids(members), want: drives }));
      },
    });
  });

  test('detach (PUT drives: []) || start of that server: consistent mounts; started server runs', async (t) => {
    const race = new Race(
      'detach-vs-start (PUT drives [] || do=start)',
      'both orders answer put=200 start=202: the state checks hold the server to never run without its drives list agreeing',
    );
    await play(t, race, {
      setup: async (i) => {
        const d = await mkDrive(alice.a, `dvs-${i}`);
        return { d, s: await mkServer(alice.a, `dvs-${i}`, attach(d)) };
      },
      setupSettleMs: 2_000,
      fire: ({ s }) => Promise.all([alice.a.put(`servers/${s}/`, { drives: [] }), act(alice.b, 'servers', s, 'start')]),
      settleMs: 5_000,
      verify: async ({ s, d }, [put, start], i) => {
        race.outcome(`put=${put.status} start=${start.status}`);
        race.answer(i, 'PUT detach', put, [200, 503]);
        race.answer(i, 'start', start, [202, 503]);
        const now = await alice.a.get(`servers/${s}/`);
        if (start.status === 202) race.check(i, now.json.status === 'running', 'started server is not running after the boot delay', () => show(now));
        else race.check(i, now.json.status === 'stopped', 'a server not started is not stopped', () => show(now));
        await mountsAgree(race, i, d, [s]);
        const trouble = await troubledTimers([s, d]);
        race.check(i, trouble.length === 0, 'a timer failed', () => ({ trouble }));
      },
    });
  });

  test('DELETE drive || PUT attaching it to a stopped server: no server lists a deleted drive', async (t) => {
    const race = new Race(
      'delete-drive-vs-attach (DELETE D || PUT S drives [D])',
      BOTH_ORDERS ? /put=400 / : 'one process serialises the two on SQLite (always PUT first); the state checks hold every order',
    );
    await play(t, race, {
      setup: async (i) => ({ d: await mkDrive(alice.a, `dva-${i}`), s: await mkServer(alice.a, `dva-${i}`) }),
      setupSettleMs: 2_000,
      fire: ({ s, d }) => Promise.all([alice.a.put(`servers/${s}/`, attach(d)), alice.b.delete(`drives/${d}/`)]),
      verify: async ({ s, d }, [put, del], i) => {
        race.outcome(`put=${put.status} delete=${del.status}`);
        race.answer(i, 'PUT attach', put, [200, 400, 503], { drive: d, server: s });
        race.answer(i, 'DELETE drive', del, [204, 503], { drive: d, server: s });
        race.check(i, !(put.status === 400 && del.status !== 204), 'attach refused though the drive was not deleted', () => ({
          put: show(put),
          delete: show(del),
        }));
        const m = await mountsAgree(race, i, d, [s]);
        race.check(i, m.exists === (del.status !== 204), 'drive existence differs from the answers', () => ({ exists: m.exists, delete: del.status }));
      },
    });
  });

  test('DELETE server || PUT of that server: no resurrection, no mount left on a deleted server', async (t) => {
    const race = new Race(
      'delete-server-vs-put (DELETE S || PUT S)',
      BOTH_ORDERS ? /put=404 / : 'one process serialises the two on SQLite (always PUT first); the state checks hold every order',
    );
    await play(t, race, {
      setup: async (i) => ({ d: await mkDrive(alice.a, `svp-${i}`), s: await mkServer(alice.a, `svp-${i}`) }),
      setupSettleMs: 2_000,
      fire: ({ s, d }, i) => Promise.all([alice.a.put(`servers/${s}/`, { name: `svp-${i}-renamed`, ...attach(d) }), alice.b.delete(`servers/${s}/`)]),
      verify: async ({ s, d }, [put, del], i) => {
        race.outcome(`put=${put.status} delete=${del.status}`);
        race.answer(i, 'PUT server', put, [200, 404, 503], { drive: d, server: s });
        race.answer(i, 'DELETE server', del, [204, 503], { drive: d, server: s });
        race.check(i, !(put.status === 404 && del.status !== 204), 'PUT 404 though the server was not deleted', () => ({ put: show(put), delete: show(del) }));
        const now = await alice.a.get(`servers/${s}/`);
        race.check(i, now.status === (del.status === 204 ? 404 : 200), 'server existence differs from the answers', () => ({
          now: now.status,
          delete: del.status,
        }));
        const dr = await alice.a.get(`drives/${d}/`);
        if (now.status === 404) {
          race.check(i, ids(dr.json.mounted_on).length === 0 && dr.json.status === 'unmounted', 'drive still mounted on a deleted server', () => ({
            mounted_on: dr.json.mounted_on,
            status: dr.json.status,
          }));
        } else await mountsAgree(race, i, d, [s]);
      },
    });
  });

  test('two concurrent do=start of a stopped server: one 202, one boot, running', async (t) => {
    const race = new Race('start-twice (do=start || do=start)', /=(403|503)\b/);
    await play(t, race, {
      setup: async (i) => ({ s: await mkServer(alice.a, `st2-${i}`) }),
      fire: ({ s }) => Promise.all([act(alice.a, 'servers', s, 'start'), act(alice.b, 'servers', s, 'start')]),
      settleMs: 5_000,
      verify: async ({ s }, [r1, r2], i) => {
        race.outcome(`A=${r1.status} B=${r2.status}`);
        race.answer(i, 'start A', r1, [202, 403, 503]);
        race.answer(i, 'start B', r2, [202, 403, 503]);
        const wins = [r1, r2].filter((r) => r.status === 202).length;
        race.check(i, wins <= 1, 'both starts answered 202', () => ({ a: show(r1), b: show(r2) }));
        race.check(i, !(r1.status === 403 && r2.status === 403), 'both refused for a stopped server', () => ({ a: show(r1), b: show(r2) }));
        const audit = await auditActions(s);
        race.check(i, audit.filter((a) => a === 'start_send').length === wins, 'start_send entries differ from the 202s', () => ({ audit }));
        race.check(i, audit.filter((a) => a === 'boot').length === wins, 'boots differ from the 202s', () => ({ audit }));
        const now = (await alice.a.get(`servers/${s}/`)).json.status;
        race.check(i, now === (wins ? 'running' : 'stopped'), 'server status after the boot delay', () => ({ now, wins }));
        const trouble = await troubledTimers([s]);
        race.check(i, trouble.length === 0, 'a timer failed', () => ({ trouble }));
      },
    });
  });

  test('two concurrent do=stop of a running server: accepted, stopped once', async (t) => {
    const race = new Race('stop-twice (do=stop || do=stop)', 'a second stop of a stopping server is accepted too (202): the checks hold it to one stop');
    await play(t, race, {
      setup: async (i) => {
        const s = await mkServer(alice.a, `sp2-${i}`);
        assert.equal((await act(alice.a, 'servers', s, 'start')).status, 202);
        return { s };
      },
      setupSettleMs: 5_000,
      fire: ({ s }) => Promise.all([act(alice.a, 'servers', s, 'stop'), act(alice.b, 'servers', s, 'stop')]),
      settleMs: 5_000,
      verify: async ({ s }, [r1, r2], i) => {
        race.outcome(`A=${r1.status} B=${r2.status}`);
        // A stop of a stopping server is accepted (it restarts the power-off), so both may be 202.
        race.answer(i, 'stop A', r1, [202, 503]);
        race.answer(i, 'stop B', r2, [202, 503]);
        const stopped = r1.status === 202 || r2.status === 202;
        const audit = await auditActions(s);
        race.check(
          i,
          audit.filter((a) => a === 'stop').length === (stopped ? 1 : 0),
          `not exactly ${stopped ? 'one stop' : 'no stop'} in the audit log`,
          () => ({ audit }),
        );
        const now = await alice.a.get(`servers/${s}/`);
        if (stopped) race.check(i, now.json.status === 'stopped' && now.json.runtime === null, 'server not stopped after the stop delay', () => show(now));
        else race.check(i, now.json.status === 'running', 'both stops refused, yet the server is not running', () => show(now));
        const trouble = await troubledTimers([s]);
        race.check(i, trouble.length === 0, 'a timer failed', () => ({ trouble }));
      },
    });
  });
});

describe(`lost updates: PUTs while timers fall due (${engine}${engine === 'postgres' ? ', both servers run timers' : ''})`, () => {
  /**
   * The PUTs of a whole batch are released together with the clock move that makes the objects' timers
   * due, so both schedulers run those timers while the PUTs are in flight (each PUT waits a few ms more
   * than the previous one: some land before their timer, some during, some after). A 503 is retried. The
   * last acknowledged PUT must be what GET shows, and the timer's own effect must not be lost either.
   */
  type X = { d: string; s?: string };
  async function putsDuringTimers(
    t: TestContext,
    race: Race,
    steps: {
      setup: (i: number) => Promise<X>;
      setupSettleMs?: number;
      afterSetup?: (x: X) => Promise<void>;
      dueInMs: number;
      /** Answers the PUT may get besides 200 and 503. */
      alsoAllowed?: number[];
      put: (i: number, x: X) => { path: string; body: Record<string, unknown> };
      verify: (x: X, put: Response, i: number) => Promise<void>;
    },
  ) {
    await play(t, race, {
      setup: steps.setup,
      setupSettleMs: steps.setupSettleMs,
      afterSetup: steps.afterSetup,
      during: async () => {
        await new Promise((r) => setTimeout(r, 2));
        await settle(steps.dueInMs);
      },
      fire: async (x, i) => {
        const { path, body } = steps.put(i, x);
        const send = () => (i % 2 ? alice.b : alice.a).put(path, body);
        await new Promise((r) => setTimeout(r, (i % BATCH) * 2));
        const first = await send();
        return { first, final: await retry503(send, first) };
      },
      settleMs: 10_000,
      verify: async (x, { first, final }, i) => {
        race.outcome(`put=${first.status}`);
        race.answer(i, 'PUT', first, [200, 503, ...(steps.alsoAllowed ?? [])]);
        race.check(i, first.status !== 503 || final.status === 200, 'a retried 503 did not succeed', () => show(final));
        if (final.status === 200) await steps.verify(x, final, i);
        else if (x.s) await mountsAgree(race, i, x.d, [x.s]);
        const trouble = await troubledTimers([x.d, ...(x.s ? [x.s] : [])]);
        race.check(i, trouble.length === 0, 'a timer failed', () => ({ trouble }));
      },
    });
  }

  test('PUT name+meta of a new drive while drive.created falls due: the PUT is not undone', async (t) => {
    const race = new Race('rename-vs-drive.created (PUT || timer)', 'the PUT and the timer both land by design: the checks hold that neither change is lost');
    await putsDuringTimers(t, race, {
      setup: async (i) => ({ d: await mkDrive(alice.a, `lu-${i}`) }),
      dueInMs: 2_000,
      put: (i, { d }) => ({ path: `drives/${d}/`, body: { name: `lu-${i}-renamed`, meta: { round: String(i), by: 'put' } } }),
      verify: async ({ d }, _put, i) => {
        const now = (await alice.a.get(`drives/${d}/`)).json;
        race.check(
          i,
          now.name === `lu-${i}-renamed` && now.meta?.round === String(i),
          'acknowledged PUT undone (name/meta back to the creation values)',
          () => ({ name: now.name, meta: now.meta }),
        );
        race.check(i, now.status === 'unmounted', "the timer's status change was lost (drive stuck)", () => ({ status: now.status }));
      },
    });
  });

  test('PUT name+meta of a resizing drive while drive.resized falls due: neither change is lost', async (t) => {
    const race = new Race('rename-vs-drive.resized (PUT || timer)', 'the PUT and the timer both land by design: the checks hold that neither change is lost');
    await putsDuringTimers(t, race, {
      setup: async (i) => ({ d: await mkDrive(alice.a, `lr-${i}`) }),
      setupSettleMs: 2_000,
      afterSetup: async ({ d }) => {
        const r = await alice.a.put(`drives/${d}/`, { size: 2 * GiB });
        assert.equal(r.json?.status, 'resizing', r.text);
      },
      dueInMs: 3_000,
      put: (i, { d }) => ({ path: `drives/${d}/`, body: { name: `lr-${i}-renamed`, meta: { round: String(i) } } }),
      verify: async ({ d }, _put, i) => {
        const now = (await alice.a.get(`drives/${d}/`)).json;
        race.check(i, now.name === `lr-${i}-renamed` && now.meta?.round === String(i), 'acknowledged PUT undone', () => ({ name: now.name, meta: now.meta }));
        race.check(i, now.status === 'unmounted' && now.size === 2 * GiB, 'resize lost or drive stuck', () => ({ status: now.status, size: now.size }));
      },
    });
  });

  test('PUT attaching a new drive while drive.created falls due: mounted_on is not lost', async (t) => {
    const race = new Race(
      'attach-vs-drive.created (PUT server || timer)',
      'the PUT and the timer both land by design: the checks hold that neither change is lost',
    );
    await putsDuringTimers(t, race, {
      setup: async (i) => ({ d: await mkDrive(alice.a, `la-${i}`), s: await mkServer(alice.a, `la-${i}`) }),
      dueInMs: 2_000,
      // Attaching a drive still being created may be refused as a state error; then nothing is mounted.
      alsoAllowed: [403],
      put: (_i, { d, s }) => ({ path: `servers/${s}/`, body: attach(d) }),
      verify: async ({ d, s }, _put, i) => {
        const now = (await alice.a.get(`drives/${d}/`)).json;
        race.check(i, same(ids(now.mounted_on), [s!]), 'mounted_on lost', () => ({ mounted_on: now.mounted_on, status: now.status }));
        race.check(i, now.status === 'mounted', 'attached drive is not mounted', () => ({ status: now.status }));
        await mountsAgree(race, i, d, [s!]);
      },
    });
  });
});

describe(`snapshot races (${engine}${engine === 'postgres' ? ', two API servers' : ''}, ${ROUNDS} rounds each)`, () => {
  /** A fresh account per round (the account-wide limit is per account), seen through both servers. */
  async function account(): Promise<Pair> {
    const u = await A.user();
    return { a: u, b: new Client(B.base, u.creds), uuid: u.uuid };
  }
  const mkSnapshot = async (c: Client, drive: string) => created(await c.post('snapshots/', { drive }), 'snapshot');

  test('two snapshots of different drives at the account limit: one 201, one 403 on snapshots; never over the limit', async (t) => {
    const race = new Race('snapshot-account-limit (POST d1 || POST d2)', /=(403|503)\b/);
    await play(t, race, {
      setup: async (i) => {
        const u = await account();
        const [d1, d2] = [await mkDrive(u.a, `lim-${i}-1`), await mkDrive(u.a, `lim-${i}-2`)];
        return { u, d1, d2 };
      },
      setupSettleMs: 2_000,
      afterSetup: async ({ u, d1 }) => {
        for (let k = 0; k < SNAPSHOT_MAX - 1; k++) await mkSnapshot(u.a, d1);
      },
      fire: ({ u, d1, d2 }) => Promise.all([u.a.post('snapshots/', { drive: d1 }), u.b.post('snapshots/', { drive: d2 })]),
      settleMs: 2_000,
      verify: async ({ u }, [r1, r2], i) => {
        race.outcome(`d1=${r1.status} d2=${r2.status}`);
        race.answer(i, 'POST d1', r1, [201, 403, 503]);
        race.answer(i, 'POST d2', r2, [201, 403, 503]);
        const wins = [r1, r2].filter((r) => r.status === 201).length;
        race.check(i, wins <= 1, 'both snapshots created past the limit', () => ({ d1: show(r1), d2: show(r2) }));
        for (const r of [r1, r2].filter((x) => x.status === 403))
          race.check(i, r.json[0].error_point === 'snapshots', 'refused on another point than the account limit', () => show(r));
        const total = (await u.a.get('snapshots/?limit=0')).json.meta.total_count;
        race.check(i, total === SNAPSHOT_MAX - 1 + wins, 'snapshots that exist differ from the 201s', () => ({ total, wins }));
        race.check(i, total <= SNAPSHOT_MAX, 'the account holds more snapshots than its limit', () => ({ total }));
      },
    });
  });

  test('POST snapshot || DELETE its drive: no snapshot outlives its drive; a drive that stays lists what exists', async (t) => {
    const race = new Race(
      'snapshot-vs-drive-delete (POST || DELETE drive)',
      BOTH_ORDERS ? /POST=400 / : 'one process serialises the two on SQLite (always POST first): the checks hold that no snapshot outlives its drive',
    );
    await play(t, race, {
      setup: async (i) => {
        const u = await account();
        return { u, d: await mkDrive(u.a, `sdd-${i}`) };
      },
      setupSettleMs: 2_000,
      afterSetup: async ({ u, d }) => void (await mkSnapshot(u.a, d)),
      fire: ({ u, d }) => Promise.all([u.a.post('snapshots/', { drive: d }), u.b.delete(`drives/${d}/`)]),
      settleMs: 2_000,
      verify: async ({ u, d }, [post, del], i) => {
        race.outcome(`POST=${post.status} DELETE=${del.status}`);
        race.answer(i, 'POST snapshot', post, [201, 400, 503]);
        race.answer(i, 'DELETE drive', del, [204, 503]);
        const left = (await u.a.get('snapshots/?limit=0')).json.objects as { uuid: string; drive: { uuid: string } }[];
        const drive = await u.a.get(`drives/${d}/`);
        if (drive.status === 404) race.check(i, left.length === 0, 'snapshots outlived their drive', () => ({ left: left.map((x) => x.uuid) }));
        else
          race.check(i, same(ids(drive.json.snapshots), ids(left)), "the drive's snapshots and the snapshots that exist disagree", () => ({
            listed: ids(drive.json.snapshots),
            existing: ids(left),
          }));
        if (post.status === 400) race.check(i, post.json[0].error_point === 'drive', 'a refused POST names another point than drive', () => show(post));
      },
    });
  });

  test('DELETE snapshot || DELETE its drive: both gone, no deadlock; DELETE snapshot is 204 or 404', async (t) => {
    const race = new Race(
      'snapshot-delete-vs-drive-delete (DELETE || DELETE)',
      'both orders succeed: the checks hold that no snapshot is deleted twice or outlives its drive',
    );
    await play(t, race, {
      setup: async (i) => {
        const u = await account();
        return { u, d: await mkDrive(u.a, `sdel-${i}`) };
      },
      setupSettleMs: 2_000,
      afterSetup: async (st) => void Object.assign(st, { s: await mkSnapshot(st.u.a, st.d), keep: await mkSnapshot(st.u.a, st.d) }),
      fire: (st) => {
        const { u, d, s } = st as typeof st & { s: string };
        return Promise.all([u.a.delete(`snapshots/${s}/`), u.b.delete(`drives/${d}/`)]);
      },
      settleMs: 2_000,
      verify: async (st, [snap, del], i) => {
        const { u, d } = st;
        race.outcome(`snapshot=${snap.status} drive=${del.status}`);
        race.answer(i, 'DELETE snapshot', snap, [204, 404, 503]);
        race.answer(i, 'DELETE drive', del, [204, 503]);
        if (del.status === 204) {
          race.check(i, (await u.a.get(`drives/${d}/`)).status === 404, 'the deleted drive is still there', () => '');
          race.check(i, (await u.a.get('snapshots/?limit=0')).json.meta.total_count === 0, 'snapshots outlived their drive', () => '');
        }
        const logs = await auditActions((st as typeof st & { s: string }).s);
        race.check(i, logs.filter((a) => a === 'delete').length <= 1, 'one snapshot deleted twice', () => ({ logs }));
      },
    });
  });
});

describe(`drives attached to stopped servers (${engine})`, () => {
  test('deleting a drive attached to a stopped server detaches it; on a running server it is 403', async (t) => {
    const race = new Race('dangling-attachment (sequential)', 'sequential: no requests meet');
    for (let i = 0; i < Math.min(ROUNDS, 5); i++) {
      race.rounds++;
      const d = await mkDrive(alice.a, `dang-${i}`);
      const keep = await mkDrive(alice.a, `dang-${i}-keep`);
      await settle(2_000);
      const s = await mkServer(alice.a, `dang-${i}`, attach(keep, d));
      const del = await alice.b.delete(`drives/${d}/`);
      race.answer(i, 'DELETE drive on a stopped server', del, [204]);
      const srv = (await alice.a.get(`servers/${s}/`)).json;
      const listed = (srv.drives as any[]).map((x) => x.drive.uuid);
      race.check(i, !listed.includes(d), 'the stopped server still lists the deleted drive', () => ({ drives: listed }));
      race.check(i, listed.includes(keep), 'the other drive was detached too', () => ({ drives: listed }));
      const start = await act(alice.a, 'servers', s, 'start');
      race.answer(i, 'start', start, [202]);
      await settle(5_000);
      const up = (await alice.a.get(`servers/${s}/`)).json;
      race.check(i, !(up.drives as any[]).some((x) => x.drive.uuid === d), 'the server booted with a deleted drive', () => ({
        status: up.status,
        drives: (up.drives as any[]).map((x) => x.drive.uuid),
        deleted: d,
      }));
      const running = await alice.a.delete(`drives/${keep}/`);
      race.answer(i, 'DELETE drive on a running server', running, [403]);
      race.check(i, (await alice.a.get(`drives/${keep}/`)).status === 200, 'a drive of a running server was deleted', () => '');
      race.outcome(`delete=${del.status} listed-after=${listed.includes(d)} running-delete=${running.status}`);
      await act(alice.a, 'servers', s, 'stop');
      await settle(3_000);
    }
    const text = race.report();
    reports.push(text);
    for (const line of text.split('\n')) t.diagnostic(line);
    race.assertPlayed(text);
  });
});

after(() => {
  if (process.env.STRATUS_RACE_SUMMARY) console.log(`\n${reports.join('\n\n')}\n`);
});

describe(`money races (${engine}${engine === 'postgres' ? ', two API servers' : ''})`, () => {
  const MONEY_ROUNDS = Math.min(ROUNDS, 16);
  const EXTENDS = 6;
  const D = Decimal.clone({ precision: 100 });
  /** Every window of a chain follows the one before it, with one charge each; nothing bought twice. */
  async function chainHolds(race: Race, round: number, c: Client, first: { id: string; resource_uri: string }, before: string, extends200: number) {
    const chain: any[] = [];
    const seen = new Set<string>();
    for (let uri: string | undefined = first.resource_uri; uri;) {
      const sub: any = (await c.get(uri)).json;
      chain.push(sub);
      race.check(round, sub.descendants.length <= 1, 'a window was extended twice', () => ({ id: sub.id, descendants: sub.descendants }));
      uri = sub.descendants[0];
      if (seen.has(uri ?? '')) break;
      seen.add(uri ?? '');
    }
    const windows = chain.map((s) => `${s.start_time}..${s.end_time}`);
    race.check(round, new Set(windows).size === windows.length, 'one window bought twice', () => ({ windows }));
    for (let k = 1; k < chain.length; k++)
      race.check(round, chain[k].start_time === chain[k - 1].end_time, 'an extension does not start where the one before ends', () => ({ windows }));
    race.check(round, chain.length === 1 + extends200, 'extensions in the chain differ from the 200s', () => ({ windows, extends200 }));
    const charges = (await c.get('ledger/?limit=0')).json.objects.filter((e: any) => /^Subscription /.test(e.reason));
    race.check(round, charges.length === chain.length, 'charges differ from the windows bought', () => ({ charges: charges.length, windows: chain.length }));
    const paid = chain.reduce((sum, s) => sum.plus(s.price), new D(0));
    const balance = (await c.get('balance/')).json.balance;
    race.check(round, new D(before).minus(paid).eq(balance), 'the balance moved by other than the windows bought', () => ({
      before,
      paid: paid.toFixed(),
      balance,
    }));
  }

  test(`${EXTENDS} concurrent do=extend of one subscription: each extends the window before it, charged once`, async (t) => {
    const race = new Race(`extend x${EXTENDS}`, /^200x[2-9]/);
    let overlapping = 0;
    for (let round = 0; round < MONEY_ROUNDS; round++) {
      const u = await A.user();
      const b = new Client(B.base, u.creds);
      const before = (await u.get('balance/')).json.balance;
      const bought = await u.post('subscriptions/', [{ amount: 1, resource: 'vlan', period: '1 month' }]);
      assert.equal(bought.status, 201, bought.text);
      const first = bought.json.objects[0];
      await Promise.all([u.get('capabilities/'), b.get('capabilities/')]);
      const answers = await Promise.all(
        Array.from({ length: EXTENDS }, (_, k) => (k % 2 ? b : u).request('POST', `subscriptions/${first.id}/action/?do=extend`, { body: {} })),
      );
      race.rounds++;
      answers.forEach((r, k) => race.answer(round, `extend ${k}`, r, [200, 503]));
      const wins = answers.filter((r) => r.status === 200);
      race.outcome(`200x${wins.length} 503x${answers.length - wins.length}`);
      // The starts the winners were given: distinct, or two extends bought the same window.
      const starts = wins.map((r) => r.json.objects[0].start_time);
      if (new Set(starts).size < starts.length) race.fail(round, 'two extends answered the same window', starts.join(', '));
      if (wins.length >= 2) overlapping++;
      await chainHolds(race, round, u, first, before, wins.length);
    }
    const text = race.report();
    for (const line of text.split('\n')) t.diagnostic(line);
    race.assertPlayed(text);
    // The race was played: in some round at least two extends ran concurrently and both won.
    assert.ok(overlapping > 0, `no round had two successful concurrent extends: ${text}`);
  });

  test('do=extend || the renewal at the end of the window: never two windows after one', async (t) => {
    const race = new Race('extend || renewal', 'the renewal and the extend may both land, one after the other: the checks hold the chain and the balance');
    // Every round's window ends at the same noon; the clock moves once to just before it, then every
    // round's extend is released while both schedulers run the renewals falling due.
    const end = new Date(A.clock.now().getTime() + 2 * 86_400_000).toISOString();
    const rounds = await Promise.all(
      Array.from({ length: MONEY_ROUNDS }, async () => {
        const u = await A.user();
        const before = (await u.get('balance/')).json.balance;
        const bought = await u.post('subscriptions/', [{ amount: 1, resource: 'vlan', end_time: end }]);
        assert.equal(bought.status, 201, bought.text);
        return { u, b: new Client(B.base, u.creds), before, first: bought.json.objects[0] };
      }),
    );
    // What fell due on the way (billing polls, notices) runs first, so the renewals are next in line.
    await settle(Date.parse(rounds[0]!.first.end_time) - A.clock.now().getTime() - 5);
    await Promise.all(rounds.map((r) => r.b.get('capabilities/')));
    const [answers] = await Promise.all([
      // Spread over the time the schedulers take to renew them all, so some land inside a renewal's transaction.
      Promise.all(
        rounds.map(async (r, k) => {
          await new Promise((ok) => setTimeout(ok, k * 2));
          return r.b.request('POST', `subscriptions/${r.first.id}/action/?do=extend`, { body: {} });
        }),
      ),
      (async () => {
        await new Promise((ok) => setTimeout(ok, 10));
        await settle(10);
      })(),
    ]);
    await settle(0);
    for (const [round, { u, before, first }] of rounds.entries()) {
      const extended = answers[round]!;
      race.rounds++;
      race.answer(round, 'extend', extended, [200, 503]);
      // The chain holds whoever won: a renewal, an extension, or both one after the other.
      const chain: any[] = [];
      for (let uri: string | undefined = first.resource_uri; uri && chain.length < 5;) {
        const sub: any = (await u.get(uri)).json;
        chain.push(sub);
        race.check(round, sub.descendants.length <= 1, 'a window was extended twice', () => ({ id: sub.id, descendants: sub.descendants }));
        uri = sub.descendants[0];
      }
      race.outcome(`extend=${extended.status} windows=${chain.length}`);
      for (let k = 1; k < chain.length; k++)
        race.check(round, chain[k].start_time === chain[k - 1].end_time, 'a window does not start where the one before ends', () => ({
          windows: chain.map((x) => `${x.start_time}..${x.end_time}`),
        }));
      const paid = chain.reduce((sum, x) => sum.plus(x.price), new D(0));
      race.check(round, new D(before).minus(paid).eq((await u.get('balance/')).json.balance), 'the balance moved by other than the windows bought', () => ({
        windows: chain.length,
      }));
      const trouble = await troubledTimers(chain.map((x) => String(x.id)));
      race.check(round, trouble.length === 0, 'a timer failed', () => ({ trouble }));
    }
    const text = race.report();
    for (const line of text.split('\n')) t.diagnostic(line);
    race.assertPlayed(text);
  });
});

describe(`lock order: timers and the paths that cancel them (${engine})`, () => {
  /** Backends waiting, directly or through another waiter, for a lock `holder` has. */
  async function waitingOn(holder: number): Promise<number> {
    const { rows } = await sql<{
      pid: number;
      by: number[];
    }>`select pid, pg_blocking_pids(pid) as by from pg_stat_activity where wait_event_type = 'Lock'`.execute(A.services.store.db);
    const behind = new Set<number>([holder]);
    for (let grew = true; grew;) {
      grew = false;
      for (const r of rows)
        if (!behind.has(r.pid) && r.by.some((p) => behind.has(p))) {
          behind.add(r.pid);
          grew = true;
        }
    }
    return behind.size - 1;
  }
  async function until(what: string, ok: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!(await ok())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  // SQLite runs one write transaction at a time: no row locks to order.
  test(
    'DELETE of a drive queued before its falling-due creation timer: 204, the timer steps aside, no deadlock (PostgreSQL, two API servers)',
    { skip: onlyOn('postgres') },
    async () => {
      for (let round = 0; round < 3; round++) {
        const drive = await mkDrive(alice.a, `lock-order-${round}`);
        // Its creation timer falls due; nobody has run it yet.
        A.clock.advance(60_000);
        // Hold the drive's row: the DELETE queues on it first, then the timer's handler behind it.
        let release!: () => void;
        const held = new Promise<void>((r) => (release = r));
        let holder = 0;
        const holding = A.services.store.db.transaction().execute(async (tx) => {
          holder = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(tx)).rows[0]!.pid;
          await sql`select uuid from resources where uuid = ${drive} for update`.execute(tx);
          await held;
        });
        let deleted: Promise<Response> | undefined;
        let ran: Promise<number> | undefined;
        try {
          await until('the holder has the row', async () => holder !== 0 && (await waitingOn(holder)) === 0);
          deleted = alice.a.request('DELETE', `drives/${drive}/`);
          await until('the DELETE waits for the row', async () => (await waitingOn(holder)) >= 1);
          ran = B.scheduler.runDue();
          await until('the timer waits behind it', async () => (await waitingOn(holder)) >= 2);
          // The property itself: a handler waiting for its object holds no lock on its timer row, so the
          // DELETE (object, then timers) cannot close a cycle with it. Held, this NOWAIT fails at once.
          const probe = await A.services.store.db
            .transaction()
            .execute(async (tx) => sql`select id from timers where subject = ${drive} for update nowait`.execute(tx))
            .then(
              () => 'free',
              (err: Error) => err.message,
            );
          assert.equal(probe, 'free', 'the waiting timer handler holds its timer row');
        } finally {
          release();
          await holding;
        }
        const [res] = await Promise.all([deleted, ran]);
        assert.equal(res!.status, 204, `DELETE: ${res!.status} ${res!.text}`);
        assert.equal((await alice.a.get(`drives/${drive}/`)).status, 404);
        const left = await A.services.store.db.selectFrom('timers').select(['kind', 'state', 'attempts', 'last_error']).where('subject', '=', drive).execute();
        assert.deepEqual(left, [], 'no timer of the deleted drive is left, failed or retried');
      }
    },
  );
});
