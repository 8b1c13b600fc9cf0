/**
 * The bench's output: one block of tables per store, the start-up rows when given, a goal summary, and
 * one `BENCH_JSON {...}` line with every figure (for CI and for comparing runs). Goals are judged here,
 * once; a missed goal is printed, never an exit code (run.ts fails only on non-2xx or errors).
 */
import type { FastRow } from './fast.js';
import { P99_GOAL_MS } from './fast.js';
import { FLAT_GOAL, type FlatRow, type MemoryRow } from './flat.js';
import type { Run } from './measure.js';
import type { WriteRow } from './writes.js';
import { WRITE_BASELINE, WRITE_GOAL } from './baseline.js';

import { formatStartup, type StartupRow } from './startup.js';
export type { StartupRow };

export const MEMORY_GOAL_MIB = 256;

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
  section: 'fast' | 'flat' | 'memory' | 'writes' | 'startup';
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
    out.push(goal(r.engine, 'fast', `${f.label} p99 ms`, f.stratus.p99Ms, 'max', P99_GOAL_MS));
  }
  const ref = Math.min(...r.flat.map((f) => f.size));
  for (const f of r.flat.filter((x) => x.size !== ref)) {
    const base = r.flat.find((x) => x.size === ref && x.label === f.label)!;
    out.push(goal(r.engine, 'flat', `${f.label} at ${f.size} (x of ${ref})`, multiple(base.run, f.run), 'max', FLAT_GOAL));
  }
  const biggest = r.memory.at(-1);
  if (biggest) out.push(goal(r.engine, 'memory', `peak RSS MiB serving ${biggest.size} servers`, biggest.peakRssMiB, 'max', MEMORY_GOAL_MIB));
  for (const w of r.writes) {
    const before = WRITE_BASELINE[r.engine]?.[w.label];
    if (before) out.push(goal(r.engine, 'writes', `${w.label} (x of before, by ratio to raw)`, w.ratio / before.ratio, 'min', WRITE_GOAL));
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
        ['url', 'bytes', 'stratus req/s', 'raw req/s', 'ratio', 'made req/s', 'made ratio', 'goal', 'p50 ms', 'p99 ms', 'stmts/req', 'result'],
        r.fast.map((f) => [
          f.label,
          String(f.bytes),
          rate(f.stratus.reqPerSec),
          rate(f.raw.reqPerSec),
          fmt(f.ratio, 3),
          rate(f.made.reqPerSec),
          fmt(f.madeRatio, 3),
          f.goal === null ? '-' : `>= ${f.goal.toFixed(2)}`,
          fmt(f.stratus.p50Ms),
          fmt(f.stratus.p99Ms),
          fmt(f.stratus.statementsPerRequest, 1),
          [f.goal === null ? '' : verdict(f.ratio >= f.goal), `p99 ${verdict(f.stratus.p99Ms < P99_GOAL_MS)}`].filter(Boolean).join(', '),
        ]),
      ),
    );
    out.push('');
  }

  if (r.flat.length) {
    const ref = Math.min(...r.flat.map((f) => f.size));
    out.push(`Flat — cost multiple = req/s at ${ref} servers / req/s at the size (own servers, as many drives, + 1000 shared by ACL); goal < ${FLAT_GOAL}x`);
    out.push('    every answer made afresh (--answer-cache-mib 0): what a page costs to make, not to repeat');
    const labels = [...new Set(r.flat.map((f) => f.label))];
    const rows: string[][] = [];
    for (const label of labels) {
      const base = r.flat.find((f) => f.size === ref && f.label === label)!;
      for (const f of r.flat.filter((x) => x.label === label)) {
        const m = multiple(base.run, f.run);
        rows.push([
          f.size === ref ? label : '',
          String(f.size),
          rate(f.run.reqPerSec),
          fmt(f.run.meanMs, 2),
          fmt(f.run.p99Ms),
          fmt(f.run.statementsPerRequest, 1),
          fmt(m, 2),
          f.size === ref ? '' : verdict(m < FLAT_GOAL),
        ]);
      }
    }
    out.push(...table(['url', 'servers', 'req/s', 'mean ms', 'p99 ms', 'stmts/req', 'multiple', 'result'], rows));
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
        ['request', 'req/s', 'mean ms', 'p99 ms', 'stmts/req', 'raw req/s', 'ratio', 'before ratio', 'x before', 'result'],
        r.writes.map((w) => {
          const before = WRITE_BASELINE[r.engine]?.[w.label];
          const x = before ? w.ratio / before.ratio : null;
          return [
            w.label,
            rate(w.stratus.reqPerSec),
            fmt(w.stratus.meanMs, 2),
            fmt(w.stratus.p99Ms),
            fmt(w.stratus.statementsPerRequest, 1),
            rate(w.raw.reqPerSec),
            fmt(w.ratio, 4),
            before ? fmt(before.ratio, 4) : '-',
            fmt(x, 2),
            x === null ? '' : verdict(x >= WRITE_GOAL),
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
