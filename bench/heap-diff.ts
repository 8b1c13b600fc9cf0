/**
 * `npx tsx bench/heap-diff.ts START.heapsnapshot END.heapsnapshot [--top 30] [--retainers NAME]`: what grew
 * between two heap snapshots (bench/soak.ts --snapshots writes them after a forced collection). Prints, by
 * constructor (DevTools' grouping: an object's constructor name, `(string)`, `(array)`, `(closure)`, ...),
 * the count and self size at each end and the difference, largest growth first. `--retainers NAME` also
 * prints, for a few objects of that group that are new in the second snapshot, the chain of references that
 * keeps each alive (from the nearest Map, Set or named object down), which names the structure holding them.
 * `--retained NAME,NAME` prints the retained size in the second snapshot of each object of those constructors
 * (what a collection would free without it: everything reachable from the roots only through it), largest
 * first; build with `node scripts/build.js --no-minify` so class names survive.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface Snapshot {
  fields: string[];
  types: string[];
  nodes: Uint32Array | number[];
  edges: number[];
  strings: string[];
  edgeFields: string[];
  edgeTypes: string[];
  firstEdge: Uint32Array;
}

function load(file: string): Snapshot {
  const raw = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] } };
    nodes: number[];
    edges: number[];
    strings: string[];
  };
  const m = raw.snapshot.meta;
  const nf = m.node_fields.length;
  const firstEdge = new Uint32Array(raw.nodes.length / nf + 1);
  const ec = m.node_fields.indexOf('edge_count');
  for (let i = 0, e = 0; i < raw.nodes.length / nf; i++) {
    firstEdge[i] = e;
    e += raw.nodes[i * nf + ec] * m.edge_fields.length;
    firstEdge[i + 1] = e;
  }
  return {
    fields: m.node_fields,
    types: m.node_types[0],
    nodes: raw.nodes,
    edges: raw.edges,
    strings: raw.strings,
    edgeFields: m.edge_fields,
    edgeTypes: m.edge_types[0],
    firstEdge,
  };
}

const at = (s: Snapshot, i: number, field: string) => s.nodes[i * s.fields.length + s.fields.indexOf(field)];
const count = (s: Snapshot) => s.nodes.length / s.fields.length;

/** DevTools' class name of a node. */
function group(s: Snapshot, i: number): string {
  const type = s.types[at(s, i, 'type')];
  const name = s.strings[at(s, i, 'name')];
  if (type === 'object' || type === 'native') return name.split(' ')[0] || `(${type})`;
  if (type === 'string' || type === 'concatenated string' || type === 'sliced string') return '(string)';
  return `(${type})`;
}

function byGroup(s: Snapshot): Map<string, { n: number; bytes: number }> {
  const out = new Map<string, { n: number; bytes: number }>();
  for (let i = 0; i < count(s); i++) {
    const g = group(s, i);
    const e = out.get(g) ?? { n: 0, bytes: 0 };
    e.n++;
    e.bytes += at(s, i, 'self_size');
    out.set(g, e);
  }
  return out;
}

/** Reverse edges (strong only), as retainer lists per node. */
function retainers(s: Snapshot): { from: number; name: string }[][] {
  const out: { from: number; name: string }[][] = Array.from({ length: count(s) }, () => []);
  const ef = s.edgeFields.length;
  const typeAt = s.edgeFields.indexOf('type');
  const nameAt = s.edgeFields.indexOf('name_or_index');
  const toAt = s.edgeFields.indexOf('to_node');
  for (let i = 0; i < count(s); i++)
    for (let e = s.firstEdge[i]; e < s.firstEdge[i + 1]; e += ef) {
      const type = s.edgeTypes[s.edges[e + typeAt]];
      if (type === 'weak' || type === 'shortcut') continue;
      const name = type === 'element' || type === 'hidden' ? `[${s.edges[e + nameAt]}]` : s.strings[s.edges[e + nameAt]];
      out[s.edges[e + toAt] / s.fields.length].push({ from: i, name });
    }
  return out;
}

/** The path from a root to node `i` (breadth-first over retainers, so the shortest). */
function chain(s: Snapshot, back: { from: number; name: string }[][], i: number): string {
  const prev = new Map<number, { from: number; name: string }>([[i, { from: -1, name: '' }]]);
  const queue = [i];
  let root = -1;
  for (let q = 0; q < queue.length && root < 0 && q < 200_000; q++) {
    const n = queue[q];
    if (back[n].length === 0 || s.types[at(s, n, 'type')] === 'synthetic') root = n;
    for (const r of back[n])
      if (!prev.has(r.from)) {
        prev.set(r.from, { from: n, name: r.name });
        queue.push(r.from);
      }
  }
  if (root < 0) return '(no root found)';
  const parts: string[] = [];
  for (let n = root; n !== i;) {
    const step = prev.get(n)!;
    parts.push(`${group(s, n)}.${step.name}`);
    n = step.from;
  }
  return parts.slice(-8).join(' -> ') + ` -> ${group(s, i)}`;
}

/**
 * Whether edge `e` of node `n` keeps its target alive. A WeakMap entry shows as an edge from the table and one
 * from the key, both named `… part of key (K @id) -> value …`: only the key's keeps the value.
 */
function strong(s: Snapshot, n: number, e: number): boolean {
  const type = s.edgeTypes[s.edges[e + s.edgeFields.indexOf('type')]];
  if (type === 'weak') return false;
  if (type !== 'internal') return true;
  const name = s.strings[s.edges[e + s.edgeFields.indexOf('name_or_index')]];
  const key = / part of key \(.* @(\d+)\) -> /.exec(name);
  return !key || Number(key[1]) === at(s, n, 'id');
}

/** Marks what the roots reach over strong edges, not passing through `cut`. */
function reach(s: Snapshot, cut: number): Uint8Array {
  const seen = new Uint8Array(count(s));
  const ef = s.edgeFields.length;
  const toAt = s.edgeFields.indexOf('to_node');
  const stack = [0];
  seen[0] = 1;
  while (stack.length) {
    const n = stack.pop()!;
    for (let e = s.firstEdge[n]; e < s.firstEdge[n + 1]; e += ef) {
      if (!strong(s, n, e)) continue;
      const to = s.edges[e + toAt] / s.fields.length;
      if (to === cut || seen[to]) continue;
      seen[to] = 1;
      stack.push(to);
    }
  }
  return seen;
}

/** Bytes reachable from the roots only through node `i` (its retained size). */
function retainedSize(s: Snapshot, all: Uint8Array, i: number): number {
  const without = reach(s, i);
  let bytes = 0;
  for (let n = 0; n < count(s); n++) if (all[n] && !without[n]) bytes += at(s, n, 'self_size');
  return bytes;
}

const { values: o, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '30' }, retainers: { type: 'string' }, retained: { type: 'string' } },
});
if (positionals.length !== 2) throw new Error('usage: heap-diff.ts START.heapsnapshot END.heapsnapshot [--top N] [--retainers NAME]');
const [a, b] = positionals.map(load);
const [ga, gb] = [byGroup(a), byGroup(b)];
const rows = [...new Set([...ga.keys(), ...gb.keys()])].map((g) => {
  const x = ga.get(g) ?? { n: 0, bytes: 0 };
  const y = gb.get(g) ?? { n: 0, bytes: 0 };
  return { g, n0: x.n, n1: y.n, b0: x.bytes, b1: y.bytes, d: y.bytes - x.bytes };
});
rows.sort((p, q) => q.d - p.d);
const kb = (n: number) => (n / 1024).toFixed(0);
console.log(['constructor'.padEnd(40), 'count 0', 'count 1', 'KiB 0', 'KiB 1', 'Δ KiB'].map((c, i) => (i ? c.padStart(10) : c)).join(' '));
for (const r of rows.slice(0, Number(o.top)))
  console.log([r.g.slice(0, 40).padEnd(40), r.n0, r.n1, kb(r.b0), kb(r.b1), kb(r.d)].map((c, i) => (i ? String(c).padStart(10) : c)).join(' '));
const total = (s: Snapshot) => Array.from({ length: count(s) }, (_, i) => at(s, i, 'self_size')).reduce((x, y) => x + y, 0);
console.log(`total self size: ${kb(total(a))} KiB -> ${kb(total(b))} KiB`);

if (o.retainers) {
  const seen = new Set<number>();
  for (let i = 0; i < count(a); i++) seen.add(at(a, i, 'id'));
  const back = retainers(b);
  const fresh: number[] = [];
  for (let i = 0; i < count(b) && fresh.length < 2000; i++) if (group(b, i) === o.retainers && !seen.has(at(b, i, 'id'))) fresh.push(i);
  const paths = new Map<string, number>();
  for (const i of fresh.filter((_, k) => k % Math.max(1, Math.floor(fresh.length / 40)) === 0)) {
    const p = chain(b, back, i);
    paths.set(p, (paths.get(p) ?? 0) + 1);
  }
  console.log(`\nretainers of new ${o.retainers} (${fresh.length} new, ${[...paths.values()].reduce((x, y) => x + y, 0)} sampled):`);
  for (const [p, n] of [...paths].sort((x, y) => y[1] - x[1])) console.log(`  ${n}x ${p}`);
}

if (o.retained) {
  const all = reach(b, -1);
  const names = new Set(o.retained.split(','));
  const found: { g: string; i: number; bytes: number }[] = [];
  for (let i = 0; i < count(b); i++) if (names.has(group(b, i)) && all[i]) found.push({ g: group(b, i), i, bytes: 0 });
  for (const f of found.slice(0, 60)) f.bytes = retainedSize(b, all, f.i);
  console.log(`\nretained sizes (second snapshot):`);
  for (const f of found.sort((x, y) => y.bytes - x.bytes).slice(0, 30)) console.log(`  ${f.g.padEnd(30)} @${at(b, f.i, 'id')} ${kb(f.bytes).padStart(8)} KiB`);
}
