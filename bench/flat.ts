/**
 * "Flat": the same URLs on the measured account at each size (100, 10k, 100k servers and as many drives),
 * each measured twice: with the account's own rows only, and with 1,000 more servers shared with it through
 * an ACL (the sharer's ACL names it as a grantee for the second run only). One Stratus process over one
 * database that grows between sizes. Each figure is compared with the same URL and the same sharing at the
 * smallest size of the same run: the cost multiple is req/s at the reference over req/s at the size (goal
 * < 2x); and at each size the shared run with the own-only run (what 1,000 shares cost, goal < 1.3x). The
 * server process's resident memory is read meanwhile (idle after seeding, peak during the runs, after the runs).
 */
import type { Child } from './children.js';
import { measure, type Run, type RunSettings } from './measure.js';
import { growTo, sharedWith, type Accounts, type Seeded } from './seed.js';
import type { Store } from '../src/store/db.js';

export const FLAT_GOAL = 2;

export interface FlatRow {
  size: number;
  label: string;
  /** `own`: the account's own rows only; `shared`: plus the 1,000 servers shared with it. */
  who: 'own' | 'shared';
  run: Run;
}

export interface MemoryRow {
  size: number;
  seedSeconds: number;
  idleRssMiB: number;
  peakRssMiB: number;
  afterRssMiB: number;
  /** VmHWM: the process's highest RSS since it started (all sizes so far). */
  hwmMiB: number;
}

/**
 * The deep page is the account's last page of its own rows (offset size − 20): a full page at every size, with
 * or without shares, so "shares" compares pages of 20 objects each (at offset 10,000 the own-only page of a
 * 10,000-server account was empty, and the shared one full).
 */
function urls(s: Seeded, size: number): { label: string; path: string }[] {
  return [
    { label: 'GET /servers/?limit=20', path: '/api/2.0/servers/?limit=20' },
    { label: 'GET /servers/detail/?limit=20', path: '/api/2.0/servers/detail/?limit=20' },
    { label: 'GET /servers/?limit=20&offset=<size-20>', path: `/api/2.0/servers/?limit=20&offset=${size - 20}` },
    { label: 'GET /servers/<uuid>/', path: `/api/2.0/servers/${s.server}/` },
    { label: 'GET /drives/<uuid>/', path: `/api/2.0/drives/${s.drive}/` },
  ];
}

/** Grow to `size`, run `before` (the other sections measured at this size), then load each URL. */
export async function flatAt(
  store: Store,
  stratus: Child,
  seeded: Seeded,
  accounts: Accounts,
  size: number,
  s: RunSettings,
  before: () => Promise<void> = async () => {},
): Promise<{ rows: FlatRow[]; memory: MemoryRow }> {
  const t0 = performance.now();
  await growTo(store, accounts.caller, seeded, size);
  const seedSeconds = (performance.now() - t0) / 1000;
  const idle = stratus.memory().rssMiB;
  await before();
  const rows: FlatRow[] = [];
  const api = `${stratus.base}/api/2.0/`;
  for (const who of ['own', 'shared'] as const) {
    await sharedWith(api, accounts, seeded, who === 'shared');
    for (const u of urls(seeded, size))
      rows.push({ size, label: u.label, who, run: await measure(stratus, { path: u.path, headers: accounts.caller.headers }, s) });
  }
  return {
    rows,
    memory: {
      size,
      seedSeconds,
      idleRssMiB: idle,
      peakRssMiB: Math.max(...rows.map((r) => r.run.peakRssMiB)),
      afterRssMiB: stratus.memory().rssMiB,
      hwmMiB: stratus.memory().peakMiB,
    },
  };
}
