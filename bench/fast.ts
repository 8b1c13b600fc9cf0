/**
 * "Fast": Stratus against a raw node:http server replaying Stratus's own reply bytes for the same URL,
 * the upper bound for this machine and this response size. A ratio of two runs made seconds apart on
 * the same machine, so it holds across machines where absolute req/s do not. Measured on the issue's
 * reference account: 20 servers, each with a drive, a NIC and a tag, and 20 tags; nothing shared with it
 * (the cost of shares is the flat section's business).
 */
import { startChild, type Child } from './children.js';
import { request } from './http.js';
import { measure, type Run, type RunSettings } from './measure.js';
import type { Account, Seeded } from './seed.js';

export interface FastRow {
  label: string;
  path: string;
  /** Stratus as configured by default (repeated GETs reuse kept answers, see answer-cache.ts). */
  stratus: Run;
  /** Stratus making every answer afresh (`--answer-cache-mib 0`). */
  made: Run;
  raw: Run;
  /** Stratus req/s over raw req/s. */
  ratio: number;
  /** Stratus req/s, making every answer, over raw req/s. */
  madeRatio: number;
  /** Least acceptable ratio, when the issue sets one. */
  goal: number | null;
  /** Least acceptable ratio made afresh (issue 31), when set. */
  madeGoal: number | null;
  /** Whose request: solo (nothing shared) unless `peer` (the same page shape plus 1,000 shared servers). */
  who?: 'peer';
  bytes: number;
}

/** The goals: share of the raw server's req/s; p99 under 10 ms at 10 connections for each. */
export const P99_GOAL_MS = 10;

type Url = { label: string; path: string; goal: number | null; madeGoal: number | null; who?: 'peer' };

function urls(s: Seeded): Url[] {
  return [
    { label: 'GET /servers/detail/?limit=20', path: '/api/2.0/servers/detail/?limit=20', goal: 0.25, madeGoal: 0.3 },
    { label: 'GET /servers/<uuid>/', path: `/api/2.0/servers/${s.solo.server}/`, goal: 0.5, madeGoal: 0.6 },
    { label: 'GET /tags/?limit=20', path: '/api/2.0/tags/?limit=20', goal: 0.35, madeGoal: 0.4 },
    { label: 'GET /capabilities/', path: '/api/2.0/capabilities/', goal: 0.8, madeGoal: 0.85 },
    { label: 'GET /servers/?limit=20', path: '/api/2.0/servers/?limit=20', goal: null, madeGoal: 0.4 },
    { label: 'GET /tags/<uuid>/', path: `/api/2.0/tags/${s.solo.tag}/`, goal: null, madeGoal: null },
    // Another path for the raw replay (it answers by path): the same page, `offset=0` changes nothing.
    { label: SHARED_LABEL, path: '/api/2.0/servers/detail/?limit=20&offset=0', goal: null, madeGoal: null, who: 'peer' },
  ];
}

/** The detail page of an account like solo's plus 1,000 servers shared by ACL; its cost made afresh against solo's. */
export const SHARED_LABEL = 'GET /servers/detail/?limit=20 +1000 shared';
/** Issue 31: 1,000 shares cost less than 1.3x no shares (made afresh, by req/s). */
export const SHARES_GOAL = 1.3;

/** Record each reply (it must be 200 and the same bytes twice), and check the raw server replays it exactly. */
async function record(stratus: Child, paths: string[], headers: Record<string, string>) {
  const replies = [];
  for (const path of paths) {
    const [a, b] = [await request(`${stratus.base}${path}`, headers), await request(`${stratus.base}${path}`, headers)];
    if (a.status !== 200) throw new Error(`GET ${path} answered ${a.status}: ${a.body.toString('utf8').slice(0, 300)}`);
    if (!a.body.equals(b.body)) throw new Error(`GET ${path} does not answer the same bytes twice: a raw replay would not be the same work`);
    replies.push({ path, status: a.status, contentType: String(a.headers['content-type']), body: a.body.toString('base64') });
  }
  return replies;
}

export async function fastSection(
  stratus: Child,
  uncached: Child,
  seeded: Seeded,
  accounts: { solo: Account; peer: Account },
  s: RunSettings,
): Promise<FastRow[]> {
  const list = urls(seeded);
  const headersOf = (u: Url) => (u.who === 'peer' ? accounts.peer : accounts.solo).headers;
  const replies = [];
  for (const u of list) replies.push(...(await record(stratus, [u.path], headersOf(u))));
  const raw = await startChild({ mode: 'raw', replies });
  try {
    for (const r of replies) {
      const got = await request(`${raw.base}${r.path}`, accounts.solo.headers);
      if (got.status !== r.status || got.body.toString('base64') !== r.body || got.headers['content-type'] !== r.contentType)
        throw new Error(`the raw server does not replay ${r.path} faithfully`);
    }
    const rows: FastRow[] = [];
    for (const [i, u] of list.entries()) {
      const load = { path: u.path, headers: headersOf(u) };
      const st = await measure(stratus, load, s);
      const made = await measure(uncached, load, s);
      const rw = await measure(raw, load, s);
      const of = (r: Run) => (rw.reqPerSec ? r.reqPerSec / rw.reqPerSec : 0);
      rows.push({ ...u, stratus: st, made, raw: rw, ratio: of(st), madeRatio: of(made), bytes: Buffer.from(replies[i].body, 'base64').length });
    }
    return rows;
  } finally {
    await raw.close();
  }
}
