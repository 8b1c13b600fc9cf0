/**
 * The bench's output: one block of tables per store, the start-up rows when given, a goal summary, and
 * one `BENCH_JSON {...}` line with every figure (for CI and for comparing runs). Goals are judged here,
 * once; a missed goal is printed, never an exit code (run.ts fails only on non-2xx or errors).
 */
import type { FastRow } from './fast.js';
import { P99_GOAL_MS, SHARED_LABEL, SHARES_GOAL } from './fast.js';
import { SHARED } from './seed.js';
import { FLAT_GOAL, type FlatRow, type MemoryRow } from './flat.js';
import type { Run } from './measure.js';
import type { WriteRow } from './writes.js';
import { WRITE_BASELINE, WRITE_GOAL } from './baseline.js';

import { formatStartup, type StartupRow } from './startup.js';
export type { StartupRow };

export const MEMORY_GOAL_MIB = 256;

/** Issue 31: a write's share of the raw server's req/s (every write makes its answer afresh). */
export const WRITE_RATIO_GOAL: Record<string, number> = { 'POST /servers/': 0.3, 'PUT /servers/<uuid>/': 0.25 };

/** What 1,000 shares cost: solo's detail page made afresh over the same page of an account with them (by req/s). */
export function sharesMultiple(fast: FastRow[]): number | null {
  const solo = fast.find((f) => f.label === 'GET /servers/detail/?limit=20');
  const peer = fast.find((f) => f.label === SHARED_LABEL);
  return solo && peer ? multiple(solo.made, peer.made) : null;
}

export interface StoreReport {
  engine: 'sqlite' | 'postgres';
  database: string;
  setupSeconds: number;
  fast: FastRow[];
  flat: FlatRow[];
  memory: MemoryRow[];
  writes: WriteRow[];
}

export interface Goal {
  store: string;
  section: 'fast' | 'made' | 'shares' | 'flat' | 'memory' | 'writes' | 'startup' | 'console' | 'mixed';
  what: string;
  value: number;
  /** `min`: value must be >= goal; `max`: value must be < goal. */
  kind: 'min' | 'max';
  goal: number;
  pass: boolean;
}

const goal = (store: string, section: Goal['section'], what: string, value: number, kind: Goal['kind'], limit: number): Goal => ({
  store,
  section,
  what,
  value,
  kind,
  goal: limit,
  pass: kind === 'min' ? value >= limit : value < limit,
});

/** Every goal the issue sets, judged on one store's figures. */
export function judge(r: StoreReport): Goal[] {
  const out: Goal[] = [];
  for (const f of r.fast) {
    if (f.goal !== null) out.push(goal(r.engine, 'fast', `${f.label} stratus/raw`, f.ratio, 'min', f.goal));
    if (f.madeGoal !== null) out.push(goal(r.engine, 'made', `${f.label} made afresh/raw`, f.madeRatio, 'min', f.madeGoal));
    out.push(goal(r.engine, 'fast', `${f.label} p99 ms`, f.stratus.p99Ms, 'max', P99_GOAL_MS));
  }
  const shares = sharesMultiple(r.fast);
  if (shares !== null) out.push(goal(r.engine, 'shares', 'detail page made afresh, x of no shares with 1000 shared', shares, 'max', SHARES_GOAL));
  const ref = Math.min(...r.flat.map((f) => f.size));
  for (const f of r.flat.filter((x) => x.size !== ref)) {
    const base = r.flat.find((x) => x.size === ref && x.label === f.label && x.who === f.who)!;
    out.push(goal(r.engine, 'flat', `${f.label} ${f.who} at ${f.size} (x of ${ref})`, multiple(base.run, f.run), 'max', FLAT_GOAL));
  }
  for (const f of r.flat.filter((x) => x.who === 'shared')) {
    const own = r.flat.find((x) => x.size === f.size && x.label === f.label && x.who === 'own');
    if (own) out.push(goal(r.engine, 'shares', `${f.label} at ${f.size}: +${SHARED} shared, x of own only`, multiple(own.run, f.run), 'max', SHARES_GOAL));
  }
  const biggest = r.memory.at(-1);
  if (biggest) out.push(goal(r.engine, 'memory', `peak RSS MiB serving ${biggest.size} servers`, biggest.peakRssMiB, 'max', MEMORY_GOAL_MIB));
  for (const w of r.writes) {
    const before = WRITE_BASELINE[r.engine]?.[w.label];
    if (before) out.push(goal(r.engine, 'writes', `${w.label} (x of before, by ratio to raw)`, w.ratio / before.ratio, 'min', WRITE_GOAL));
    const ratioGoal = WRITE_RATIO_GOAL[w.label];
    if (ratioGoal !== undefined) out.push(goal(r.engine, 'writes', `${w.label} write/raw`, w.ratio, 'min', ratioGoal));
  }
  return out;
}

export function judgeStartup(rows: StartupRow[]): Goal[] {
  return rows.flatMap((s) => [
    ...(s.goalMs === undefined ? [] : [goal('-', 'startup', `${s.what} ms`, s.ms, 'max', s.goalMs)]),
    ...(s.goalRssMiB === undefined || s.rssMiB === undefined ? [] : [goal('-', 'startup', `${s.what} RSS MiB`, s.rssMiB, 'max', s.goalRssMiB)]),
  ]);
}

/** How many times more a request costs at a size than at the reference size (by req/s). */
export const multiple = (ref: Run, at: Run): number => (at.reqPerSec ? ref.reqPerSec / at.reqPerSec : Infinity);

const fmt = (n: number | null | undefined, digits = 0) => (n === null || n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(digits));
/** req/s: whole numbers, but one decimal under 100 (a 100k-server list may answer 2.4 per second). */
const rate = (n: number) => fmt(n, n < 100 ? 1 : 0);
const verdict = (pass: boolean) => (pass ? 'PASS' : 'MISS');

/** Columns: the first left-aligned, the rest right-aligned, each as wide as its widest cell. */
function table(head: string[], rows: string[][]): string[] {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)];
}

export function storeBlock(r: StoreReport, settings: { durationS: number; warmupS: number; connections: number }): string[] {
  const out: string[] = [];
  const title = r.engine === 'sqlite' ? 'SQLite' : 'PostgreSQL';
  out.push(`=== ${title}: ${r.database}`);
  out.push(`    ${settings.connections} connections, ${settings.durationS} s per run after a ${settings.warmupS} s warm-up; latency from autocannon (ms)`);
  out.push('');

  if (r.fast.length) {
    out.push(
      `Fast — Stratus vs a raw node:http server replaying the same bytes (an account of 20 servers, each with a drive, a NIC and a tag; nothing shared); goal p99 < ${P99_GOAL_MS} ms`,
    );
    out.push('    stratus: as configured by default (repeated GETs reuse kept answers); made: every answer made afresh (--answer-cache-mib 0)');
    out.push(
      ...table(
        [
          'url',
          'bytes',
          'stratus req/s',
          'raw req/s',
          'ratio',
          'goal',
          'made req/s',
          'made ratio',
          'made goal',
          'p50 ms',
          'p99 ms',
          'stmts/req',
          'made stmts/req',
          'result',
        ],
        r.fast.map((f) => [
          f.label,
          String(f.bytes),
          rate(f.stratus.reqPerSec),
          rate(f.raw.reqPerSec),
          fmt(f.ratio, 3),
          f.goal === null ? '-' : `>= ${f.goal.toFixed(2)}`,
          rate(f.made.reqPerSec),
          fmt(f.madeRatio, 3),
          f.madeGoal === null ? '-' : `>= ${f.madeGoal.toFixed(2)}`,
          fmt(f.stratus.p50Ms),
          fmt(f.stratus.p99Ms),
          fmt(f.stratus.statementsPerRequest, 1),
          fmt(f.made.statementsPerRequest, 1),
          [
            f.goal === null ? '' : verdict(f.ratio >= f.goal),
            f.madeGoal === null ? '' : `made ${verdict(f.madeRatio >= f.madeGoal)}`,
            `p99 ${verdict(f.stratus.p99Ms < P99_GOAL_MS)}`,
          ]
            .filter(Boolean)
            .join(', '),
        ]),
      ),
    );
    const shares = sharesMultiple(r.fast);
    if (shares !== null)
      out.push(
        `Shares — the detail page made afresh costs ${fmt(shares, 2)}x with 1000 servers shared by ACL (goal < ${SHARES_GOAL}x): ${verdict(shares < SHARES_GOAL)}`,
      );
    out.push('');
  }

  if (r.flat.length) {
    const ref = Math.min(...r.flat.map((f) => f.size));
    out.push(
      `Flat — each URL with the account's own rows only and with ${SHARED} more shared by ACL; growth = req/s at ${ref} servers / req/s at the size (same sharing), goal < ${FLAT_GOAL}x; shares = own-only req/s / shared req/s at the size, goal < ${SHARES_GOAL}x`,
    );
    out.push('    every answer made afresh (--answer-cache-mib 0): what a page costs to make, not to repeat');
    const labels = [...new Set(r.flat.map((f) => f.label))];
    const sizes = [...new Set(r.flat.map((f) => f.size))];
    const rows: string[][] = [];
    const at = (label: string, size: number, who: FlatRow['who']) => r.flat.find((f) => f.label === label && f.size === size && f.who === who);
    for (const label of labels)
      for (const size of sizes) {
        const own = at(label, size, 'own');
        const shared = at(label, size, 'shared');
        const grow = (who: FlatRow['who']) => {
          const base = at(label, ref, who);
          const now = at(label, size, who);
          return base && now ? multiple(base.run, now.run) : null;
        };
        const shares = own && shared ? multiple(own.run, shared.run) : null;
        const [go, gs] = [grow('own'), grow('shared')];
        rows.push([
          size === ref ? label : '',
          String(size),
          own ? rate(own.run.reqPerSec) : '-',
          shared ? rate(shared.run.reqPerSec) : '-',
          fmt(shared?.run.p99Ms),
          fmt(own?.run.statementsPerRequest, 1),
          fmt(shared?.run.statementsPerRequest, 1),
          fmt(shares, 2),
          size === ref ? '' : fmt(go, 2),
          size === ref ? '' : fmt(gs, 2),
          [
            shares === null ? '' : `shares ${verdict(shares < SHARES_GOAL)}`,
            size === ref || go === null || gs === null ? '' : `growth ${verdict(go < FLAT_GOAL && gs < FLAT_GOAL)}`,
          ]
            .filter(Boolean)
            .join(', '),
        ]);
      }
    out.push(
      ...table(
        [
          'url',
          'servers',
          'own req/s',
          'shared req/s',
          'shared p99 ms',
          'own stmts/req',
          'shared stmts/req',
          'shares x',
          'growth own',
          'growth shared',
          'result',
        ],
        rows,
      ),
    );
    out.push('');
  }

  if (r.memory.length) {
    const last = r.memory.at(-1)!;
    out.push(
      `Memory — the Stratus process's VmRSS (a separate process from the load generator); goal < ${MEMORY_GOAL_MIB} MiB serving the largest account (the flat section's process; kept answers add at most --answer-cache-mib)`,
    );
    out.push(
      ...table(
        ['servers', 'seed s', 'idle MiB', 'peak under load MiB', 'after load MiB', 'VmHWM MiB', 'result'],
        r.memory.map((m) => [
          String(m.size),
          fmt(m.seedSeconds, 1),
          fmt(m.idleRssMiB),
          fmt(m.peakRssMiB),
          fmt(m.afterRssMiB),
          fmt(m.hwmMiB),
          m === last ? verdict(m.peakRssMiB < MEMORY_GOAL_MIB) : '',
        ]),
      ),
    );
    out.push('');
  }

  if (r.writes.length) {
    out.push(
      `Writes — one object per request (account of its own); "before" = figures recorded before issue 11's work (bench/baseline.ts); goal ${WRITE_GOAL}x`,
    );
    out.push(
      ...table(
        ['request', 'req/s', 'mean ms', 'p99 ms', 'stmts/req', 'trips/req', 'raw req/s', 'ratio', 'ratio goal', 'before ratio', 'x before', 'result'],
        r.writes.map((w) => {
          const before = WRITE_BASELINE[r.engine]?.[w.label];
          const x = before ? w.ratio / before.ratio : null;
          return [
            w.label,
            rate(w.stratus.reqPerSec),
            fmt(w.stratus.meanMs, 2),
            fmt(w.stratus.p99Ms),
            fmt(w.stratus.statementsPerRequest, 1),
            fmt(w.stratus.roundTripsPerRequest, 1),
            rate(w.raw.reqPerSec),
            fmt(w.ratio, 4),
            w.label in WRITE_RATIO_GOAL ? `>= ${WRITE_RATIO_GOAL[w.label].toFixed(2)}` : '-',
            before ? fmt(before.ratio, 4) : '-',
            fmt(x, 2),
            [x === null ? '' : verdict(x >= WRITE_GOAL), w.label in WRITE_RATIO_GOAL ? `ratio ${verdict(w.ratio >= WRITE_RATIO_GOAL[w.label])}` : '']
              .filter(Boolean)
              .join(', '),
          ];
        }),
      ),
    );
    out.push('');
  }
  return out;
}

export function startupBlock(rows: StartupRow[] | null): string[] {
  if (!rows) return ['Start-up — not measured in this run (BENCH_STARTUP=0)', ''];
  return ['Start-up', formatStartup(rows), ''];
}

export function summaryBlock(goals: Goal[], runtimeSeconds: number): string[] {
  const missed = goals.filter((g) => !g.pass);
  return [
    `Goals: ${goals.length - missed.length} of ${goals.length} met; bench took ${runtimeSeconds.toFixed(0)} s`,
    ...missed.map((g) => `  MISS ${g.store} ${g.section}: ${g.what} = ${fmt(g.value, 3)} (goal ${g.kind === 'min' ? '>=' : '<'} ${g.goal})`),
  ];
}
