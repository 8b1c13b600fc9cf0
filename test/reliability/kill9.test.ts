/**
 * Acknowledged writes survive `kill -9`.
 *
 * A real `stratus serve` process (SQLite file in a temp folder, or a PostgreSQL schema) takes a write load
 * from several concurrent clients: POST /drives/, PUT /drives/<uuid>/ (name + meta), POST /tags/, PUT
 * /tags/<uuid>/ (resources). Every answer is recorded per object: a 2xx is an acknowledged write (its
 * state must be what GET shows until a later write of the same object); a write that got no answer
 * (connection reset by the kill) or a 5xx may or may not have landed, and either outcome is accepted until
 * a later acknowledged write supersedes it. Each object is written by one client only, so "the last
 * acknowledged write" is well defined.
 *
 * The process is killed with SIGKILL at random points of the work (STRATUS_KILL9_KILLS times, default 3, with
 * STRATUS_KILL9_CLIENTS clients, default 4): each kill falls once the load has had a random number of
 * writes acknowledged since the last one (between half and one and a half times STRATUS_KILL9_WRITES,
 * default 40), while every client has a write in flight; the load ends after as many more. Goals are counts
 * of work done, not durations, so a loaded machine makes the run slower, never weaker: the only clock is a
 * deadline (STRATUS_KILL9_DEADLINE_S, default 600 s a segment) that fails a load making no progress at all.
 * The process is restarted on the same database, and before the load resumes every tracked object is checked. Creation delays are short
 * (`--delays drive.create=300,…`), so the process's own scheduler completes creations during the load
 * (and after each restart: no drive may stay `creating`). The test fails listing lost objects (acknowledged
 * create, then 404) and altered ones (GET shows neither the last acknowledged state nor a later
 * unacknowledged one), with counts of everything acknowledged.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomInt } from 'node:crypto';
import { engine, freshDatabase } from '../helpers/db.js';
import { Client, connectionLost, type Response } from '../helpers/client.js';
import { serveProcess, stratus, type Running } from '../helpers/process.js';
import { until } from '../helpers/until.js';

const KILLS = Math.max(0, Number(process.env.STRATUS_KILL9_KILLS ?? 3));
const WRITES = Math.max(4, Number(process.env.STRATUS_KILL9_WRITES ?? 40));
const DEADLINE_MS = Math.max(10, Number(process.env.STRATUS_KILL9_DEADLINE_S ?? 600)) * 1000;
const CLIENTS = Math.max(1, Number(process.env.STRATUS_KILL9_CLIENTS ?? 4));
const GiB = 1024 ** 3;

let dir: string;
let db: { url: string; drop: () => Promise<void> };
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-kill9-'));
  db = engine === 'sqlite' ? { url: join(dir, 'stratus.db'), drop: async () => {} } : await freshDatabase();
});
after(async () => {
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

/** What a drive or tag should show: a drive's name and meta, a tag's name and member uuids (sorted). */
type State = { name: string; meta?: Record<string, string>; resources?: string[] };

interface Tracked {
  kind: 'drives' | 'tags';
  uuid: string;
  owner: number;
  /** The state of the creation (to name a revert to it in the report). */
  created: State;
  /** The last acknowledged state. */
  confirmed: State;
  /** Writes after `confirmed` that got no answer (or a 5xx): any of them may have landed. */
  maybe: State[];
  /** The last write was acknowledged during the run of this process generation. */
  ackedIn: number;
  /** Keys of every acknowledged state, oldest first (to name a revert to an earlier one). */
  history: string[];
}

const sortedMeta = (m?: Record<string, string>) => (m ? Object.fromEntries(Object.entries(m).sort(([a], [b]) => a.localeCompare(b))) : undefined);
const key = (s: State) => JSON.stringify(s.resources ? { name: s.name, resources: [...s.resources].sort() } : { name: s.name, meta: sortedMeta(s.meta) });

function observed(kind: 'drives' | 'tags', body: any): State {
  return kind === 'drives'
    ? { name: body.name, meta: body.meta }
    : { name: body.name, resources: ((body.resources ?? []) as { uuid: string }[]).map((r) => r.uuid).sort() };
}

test(`acknowledged writes survive kill -9 (${engine}, ${KILLS} kills, ~${WRITES} writes apart, ${CLIENTS} clients)`, async (t) => {
  const email = `kill9-${Date.now()}@example.com`;
  const password = 'kill9-secret';
  assert.equal(stratus(['migrate', '--db', db.url]).status, 0);
  const add = stratus(['users', 'add', email, '--password', password, '--db', db.url]);
  assert.equal(add.status, 0, add.stderr);
  const args = ['--db', db.url, '--rate-limits', 'off', '--delays', 'drive.create=300,drive.resize=300', '--log-level', 'error'];

  let generation = 0;
  let current: Running = await serveProcess(args);
  let ready: Promise<void> = Promise.resolve();
  const client = () => new Client(current.base, { email, password });

  const tracked: Tracked[] = [];
  const stats = {
    acknowledged: { create: 0, put: 0 },
    unanswered: { create: 0, put: 0 },
    refused: new Map<string, number>(),
    lost: [] as string[],
    altered: [] as string[],
    stuck: [] as string[],
    checks: 0,
  };
  const refused = (what: string, res: Response) => {
    const k = `${what} ${res.status} ${Array.isArray(res.json) ? res.json[0]?.error_type : ''}`;
    stats.refused.set(k, (stats.refused.get(k) ?? 0) + 1);
  };

  /** Writes sent and not yet answered or cut (a check after a kill waits until every one has its outcome). */
  let inFlight = 0;
  /** One write; records its outcome on `obj` (or returns the created object). */
  async function write(method: 'POST' | 'PUT', path: string, body: unknown): Promise<Response | 'unanswered'> {
    await ready;
    inFlight++;
    try {
      return await client().request(method, path, { body });
    } catch (err) {
      // Only a connection the kill cut is "unanswered"; a contract mismatch or any other error fails the test.
      if (connectionLost(err)) return 'unanswered';
      throw err;
    } finally {
      inFlight--;
    }
  }

  /** Set when the load is to stop (its goal reached, or a worker failed). */
  let stop = false;
  let seq = 0;
  const acked = () => stats.acknowledged.create + stats.acknowledged.put;
  /** Waits until `n` more writes are acknowledged (a count, not a time); fails a load that makes no progress. */
  async function progress(n: number, what: string): Promise<void> {
    const goal = acked() + n;
    await until(`${what}: ${n} acknowledged writes (${acked()} of ${goal} so far)`, () => acked() >= goal || stop, DEADLINE_MS);
  }

  async function worker(c: number): Promise<void> {
    const mine = () => tracked.filter((o) => o.owner === c);
    /** A create's outcome: tracked once acknowledged (its state must survive every later kill). */
    const track = (kind: 'drives' | 'tags', state: State, res: Response | 'unanswered') => {
      if (res === 'unanswered') stats.unanswered.create++;
      else if (res.status === 201) {
        stats.acknowledged.create++;
        const uuid = res.json.objects[0].uuid;
        tracked.push({ kind, uuid, owner: c, created: state, confirmed: state, maybe: [], ackedIn: generation, history: [key(state)] });
      } else refused(`POST ${kind === 'drives' ? 'drive' : 'tag'}`, res);
    };
    while (!stop) {
      const drives = mine().filter((o) => o.kind === 'drives');
      const tags = mine().filter((o) => o.kind === 'tags');
      const roll = randomInt(100);
      const n = ++seq;
      if (drives.length < 3 || roll < 20) {
        const state: State = { name: `c${c}-d${n}`, meta: { v: '0', client: String(c) } };
        track('drives', state, await write('POST', 'drives/', { media: 'disk', size: GiB, ...state }));
      } else if (tags.length < 1 || roll < 30) {
        const state: State = { name: `c${c}-t${n}`, resources: [] };
        track('tags', state, await write('POST', 'tags/', { name: state.name, resources: [] }));
      } else {
        let obj: Tracked;
        let state: State;
        let body: Record<string, unknown>;
        if (roll < 75) {
          // Half the time the newest drive: renamed while its creation timer is about to fall due.
          obj = roll < 50 ? drives[drives.length - 1] : drives[randomInt(drives.length)];
          state = { name: `c${c}-d-${obj.uuid.slice(0, 8)}-v${n}`, meta: { v: String(n), client: String(c) } };
          body = { name: state.name, meta: state.meta };
        } else {
          obj = tags[randomInt(tags.length)];
          const members = drives
            .filter(() => randomInt(2) === 1)
            .map((d) => d.uuid)
            .sort();
          state = { name: obj.confirmed.name, resources: members };
          body = { resources: members };
        }
        const res = await write('PUT', `${obj.kind}/${obj.uuid}/`, body);
        if (res === 'unanswered' || res.status >= 500) {
          if (res === 'unanswered') stats.unanswered.put++;
          else refused(`PUT ${obj.kind}`, res);
          obj.maybe.push(state);
        } else if (res.status === 200) {
          stats.acknowledged.put++;
          obj.confirmed = state;
          obj.history.push(key(state));
          obj.maybe = [];
          obj.ackedIn = generation;
        } else refused(`PUT ${obj.kind}`, res);
      }
    }
  }

  /** Every tracked object shows its last acknowledged state or a later unanswered one; collapse to what it shows. */
  async function verify(when: string): Promise<void> {
    stats.checks++;
    const c = client();
    for (const o of tracked) {
      const res = await c.get(`${o.kind}/${o.uuid}/`);
      if (res.status === 404) {
        stats.lost.push(`${when}: ${o.kind} ${o.uuid} (acknowledged create; last acknowledged write in process ${o.ackedIn})`);
        continue;
      }
      assert.equal(res.status, 200, res.text);
      const now = observed(o.kind, res.json);
      const fits = [o.confirmed, ...o.maybe].find((s) => key(s) === key(now));
      if (!fits) {
        const back = o.history.lastIndexOf(key(now));
        const revert =
          key(now) === key(o.created)
            ? ' — back to its creation state'
            : back >= 0
              ? ` — back to an earlier acknowledged write (${o.history.length - 1 - back} write(s) undone)`
              : '';
        stats.altered.push(
          `${when}: ${o.kind} ${o.uuid} shows ${key(now)}, last acknowledged ${key(o.confirmed)}${o.maybe.length ? ` (or ${o.maybe.length} unanswered later)` : ''}${revert}`,
        );
        o.confirmed = now; // report each loss once
      } else o.confirmed = fits;
      o.maybe = [];
    }
  }

  /** No drive stays `creating` once its delay has passed with the process running (durable timers). */
  async function noneStuck(when: string): Promise<void> {
    // A deadline, not a measurement: a drive left creating by a lost timer stays so however long one waits.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const res = await client().get('drives/detail/?limit=0&fields=uuid,status');
      const creating = (res.json.objects as { uuid: string; status: string }[]).filter((d) => d.status === 'creating');
      if (!creating.length) return;
      if (Date.now() > deadline) {
        stats.stuck.push(`${when}: ${creating.length} drive(s) still creating, e.g. ${creating[0].uuid}`);
        return;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  const started = Date.now();
  try {
    const load = Promise.all(Array.from({ length: CLIENTS }, (_, c) => worker(c)));
    // A worker that fails (an error other than a cut connection) stops the load; `await load` reports it.
    load.catch(() => (stop = true));
    const segment = () => randomInt(Math.ceil(WRITES / 2), Math.ceil((WRITES * 3) / 2) + 1);
    for (let k = 0; k < KILLS && !stop; k++) {
      // Every client loops on writes, so each has one in flight when the count is reached: the kill cuts them.
      await progress(segment(), `the load before kill ${k + 1}`);
      let release!: () => void;
      ready = new Promise<void>((r) => (release = r));
      const victim = current;
      victim.child.kill('SIGKILL');
      await victim.exited;
      const downAt = Date.now();
      current = await serveProcess(args);
      generation++;
      const restartMs = Date.now() - downAt;
      // Every write sent before the kill has its outcome recorded before the check (new ones wait for `ready`);
      // its worker records it in the same turn as the answer, before a timer of the poll runs.
      await until(`the writes sent before kill ${k + 1} answered or cut`, () => inFlight === 0);
      await verify(`after kill ${k + 1}`);
      t.diagnostic(`kill ${k + 1} at ${((downAt - started) / 1000).toFixed(1)} s; restarted in ${restartMs} ms; ${tracked.length} objects checked`);
      release();
    }
    if (!stop) await progress(segment(), 'the load after the last kill');
    stop = true;
    await load;
    await noneStuck('end of load');
    await verify('end of load');
    // One more kill with nothing in flight: everything acknowledged is on disk.
    current.child.kill('SIGKILL');
    await current.exited;
    current = await serveProcess(args);
    await verify('after the final kill');
    await noneStuck('after the final kill');
    current.child.kill('SIGTERM');
    await current.exited;
  } finally {
    // Never leave a server (or the load) behind when the load or a check throws.
    stop = true;
    if (current.child.exitCode === null && current.child.signalCode === null) {
      current.child.kill('SIGKILL');
      await current.exited;
    }
  }

  const refusedList = [...stats.refused].map(([k, n]) => `${k}: ${n}`).join('; ') || 'none';
  const summary = [
    `kill9 [${engine}]: ${KILLS + 1} kills, ${((Date.now() - started) / 1000).toFixed(1)} s, ${CLIENTS} clients, ${tracked.length} objects`,
    `  acknowledged: ${stats.acknowledged.create} creates, ${stats.acknowledged.put} PUTs; unanswered (in flight at a kill): ${stats.unanswered.create} creates, ${stats.unanswered.put} PUTs`,
    `  refused: ${refusedList}`,
    `  lost: ${stats.lost.length}; altered: ${stats.altered.length}; drives stuck creating: ${stats.stuck.length}`,
    ...[...stats.lost.slice(0, 5), ...stats.altered.slice(0, 5), ...stats.stuck.slice(0, 3)].map((l) => `    ${l}`),
  ];
  for (const l of summary) t.diagnostic(l);
  const text = summary.join('\n');
  assert.ok(stats.acknowledged.create > 0 && stats.acknowledged.put > 0, `the load made no progress\n${text}`);
  assert.equal(stats.lost.length + stats.altered.length + stats.stuck.length, 0, text);
  // Refusals other than 503 `concurrency` are failures of their own (a 409 or 500 under load is a bug).
  const bad = [...stats.refused.keys()].filter((k) => !/ 503 concurrency$/.test(k));
  assert.deepEqual(bad, [], text);
});
