/**
 * The bench's knobs, all from the environment (so `npm run bench` needs no arguments):
 *
 *   BENCH_DURATION=<s>      seconds per measured run (default 3; each run follows a 1 s warm-up)
 *   BENCH_SIZES=100,10000   account sizes for the scale table (default 100,10000,100000); the first is the reference
 *   BENCH_QUICK=1           a quick pass: sizes 100,10000 and 1 s runs (explicit BENCH_* values still win)
 *   BENCH_PG_URL=postgres://…  also run everything on PostgreSQL (in a fresh schema, dropped at the end)
 *   BENCH_SQLITE=0          skip SQLite (with BENCH_PG_URL: PostgreSQL only)
 */
export interface Options {
  durationS: number;
  warmupS: number;
  connections: number;
  sizes: number[];
  stores: ({ engine: 'sqlite' } | { engine: 'postgres'; url: string })[];
}

function whole(name: string, raw: string, min: number): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be a whole number >= ${min}, got "${raw}"`);
  return n;
}

export function optionsFromEnv(env: NodeJS.ProcessEnv = process.env): Options {
  const quick = env.BENCH_QUICK === '1';
  const durationS = whole('BENCH_DURATION', env.BENCH_DURATION ?? (quick ? '1' : '3'), 1);
  const sizes = (env.BENCH_SIZES ?? (quick ? '100,10000' : '100,10000,100000')).split(',').map((s) => whole('BENCH_SIZES', s.trim(), 100));
  if (sizes.some((s, i) => i > 0 && s <= sizes[i - 1])) throw new Error(`BENCH_SIZES must be ascending, got "${env.BENCH_SIZES}"`);
  const stores: Options['stores'] = [];
  if (env.BENCH_SQLITE !== '0') stores.push({ engine: 'sqlite' });
  if (env.BENCH_PG_URL) stores.push({ engine: 'postgres', url: env.BENCH_PG_URL });
  if (!stores.length) throw new Error('nothing to run: BENCH_SQLITE=0 and no BENCH_PG_URL');
  return { durationS, warmupS: 1, connections: 10, sizes, stores };
}
