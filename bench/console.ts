/**
 * The web console's weight and first paint (issue 28), measured in real headless Chromium
 * (test/helpers/browser.ts) against `stratus serve` started as its own process on a throw-away SQLite file:
 *
 * - size: every asset the sign-in page at /ui/ loads (the page, its scripts, styles; the browser's
 *   resource timing lists them), each compressed with gzip (level 9) here, summed: what a first visit
 *   costs on the wire, independent of how the serving side compresses. Budget CONSOLE_GZIP_BUDGET_KB.
 * - first paint: Performance's `first-contentful-paint` of a cold load (cache disabled) of the sign-in page
 *   and of a list page (signed in), the median of BENCH_CONSOLE_LOADS loads (default 7). Budget
 *   FIRST_PAINT_BUDGET_MS on this machine (2 cores, shared with the server).
 *
 * `npm run bench` runs it after the load sections (BENCH_CONSOLE=0 leaves it out); `npx tsx bench/console.ts`
 * alone prints just this block.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { Page } from 'playwright-core';
import { has } from '../test/helpers/skips.js';
import { openBrowser } from '../test/helpers/browser.js';
import type { Goal } from './report.js';

/** The console's assets, gzip, for a first visit of /ui/: Preact, uPlot and the app with room to grow. */
export const CONSOLE_GZIP_BUDGET_KB = 100;
/** First contentful paint of a cold load, median, on this 2-core machine. */
export const FIRST_PAINT_BUDGET_MS = 1000;
/** The list page the first-paint figure loads (a signed-in page that lists the account's servers). */
export const LIST_PAGE = '/ui/servers';

const BIN = fileURLToPath(new URL('../bin/stratus.js', import.meta.url));
const EMAIL = 'console-bench@example.com';
const PASSWORD = 'console-bench-secret';

export interface ConsoleReport {
  assets: { path: string; bytes: number; gzipBytes: number }[];
  gzipKB: number;
  loads: number;
  signInPaintMs: number[];
  listPaintMs: number[];
  signInMedianMs: number;
  listMedianMs: number;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** `stratus serve` on a fresh SQLite file; resolves once its ready file names its URL. */
async function serve(dir: string): Promise<{ base: string; stop: () => Promise<void> }> {
  const ready = join(dir, 'ready.json');
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '--port', '0', '--db', join(dir, 'console.db'), '--log-level', 'warn', '--ready-file', ready, '--demo-login', `${EMAIL}:${PASSWORD}`],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  for (const t0 = Date.now(); !existsSync(ready);) {
    if (child.exitCode !== null) throw new Error(`stratus serve exited (${child.exitCode}) before it was ready`);
    if (Date.now() - t0 > 120_000) {
      await stop();
      throw new Error('stratus serve: not ready within 120 s');
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const { url } = JSON.parse(readFileSync(ready, 'utf8')) as { url: string };
  return { base: new URL(url).origin, stop };
}

/** One cold load of `url` (cache off) in a new tab: its first contentful paint, ms from navigation start. */
async function coldPaint(page: Page, url: string): Promise<number> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  await page.goto(url, { waitUntil: 'load' });
  const ms = await page.evaluate(
    () =>
      new Promise<number>((resolve) => {
        const seen = performance.getEntriesByName('first-contentful-paint')[0];
        if (seen) return resolve(seen.startTime);
        new PerformanceObserver((list, obs) => {
          const e = list.getEntriesByName('first-contentful-paint')[0];
          if (e) {
            obs.disconnect();
            resolve(e.startTime);
          }
        }).observe({ type: 'paint', buffered: true });
      }),
  );
  await cdp.detach();
  return ms;
}

export async function measureConsole(loads = Number(process.env.BENCH_CONSOLE_LOADS) || 7): Promise<ConsoleReport> {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-bench-console-'));
  const server = await serve(dir);
  const browser = await openBrowser();
  try {
    const { page, context } = browser;
    // Size: what the sign-in page loads, as the browser's resource timing lists it.
    await page.goto(`${server.base}/ui/`, { waitUntil: 'networkidle' });
    const urls = await page.evaluate(() => [location.href, ...performance.getEntriesByType('resource').map((e) => e.name)]);
    const assets: ConsoleReport['assets'] = [];
    for (const url of [...new Set(urls.map((u) => u.split('#')[0]))]) {
      const u = new URL(url);
      if (u.origin !== server.base || !u.pathname.startsWith('/ui/')) continue;
      const body = Buffer.from(await (await fetch(url)).arrayBuffer());
      assets.push({ path: u.pathname, bytes: body.length, gzipBytes: gzipSync(body, { level: 9 }).length });
    }
    if (!assets.some((a) => a.path.endsWith('.js'))) throw new Error(`/ui/ loaded no script: ${JSON.stringify(assets)}`);
    const signInPaintMs: number[] = [];
    for (let i = 0; i < loads; i++) {
      const tab = await context.newPage();
      signInPaintMs.push(await coldPaint(tab, `${server.base}/ui/`));
      await tab.close();
    }
    // Signed in (the cookie session the console itself uses), then the list page.
    const login = await context.request.post(`${server.base}/api/2.0/accounts/action/?do=login`, { data: { username: EMAIL, password: PASSWORD } });
    if (!login.ok()) throw new Error(`login: ${login.status()} ${await login.text()}`);
    const listPaintMs: number[] = [];
    for (let i = 0; i < loads; i++) {
      const tab = await context.newPage();
      listPaintMs.push(await coldPaint(tab, `${server.base}${LIST_PAGE}`));
      await tab.close();
    }
    return {
      assets,
      gzipKB: assets.reduce((n, a) => n + a.gzipBytes, 0) / 1024,
      loads,
      signInPaintMs,
      listPaintMs,
      signInMedianMs: median(signInPaintMs),
      listMedianMs: median(listPaintMs),
    };
  } finally {
    await browser.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function judgeConsole(r: ConsoleReport): Goal[] {
  const g = (what: string, value: number, limit: number): Goal => ({
    store: '-',
    section: 'console',
    what,
    value,
    kind: 'max',
    goal: limit,
    pass: value < limit,
  });
  return [
    g('console assets gzip KB', r.gzipKB, CONSOLE_GZIP_BUDGET_KB),
    g('console first paint ms, sign-in page (median)', r.signInMedianMs, FIRST_PAINT_BUDGET_MS),
    g('console first paint ms, list page (median)', r.listMedianMs, FIRST_PAINT_BUDGET_MS),
  ];
}

export function consoleBlock(r: ConsoleReport | null, why = 'BENCH_CONSOLE=0'): string[] {
  if (!r) return [`Console — not measured in this run (${why})`, ''];
  const kb = (n: number) => (n / 1024).toFixed(1);
  const ms = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(' ');
  return [
    'Console (/ui/, headless Chromium)',
    `  size: ${r.gzipKB.toFixed(1)} KB gzip (budget < ${CONSOLE_GZIP_BUDGET_KB} KB) for ${r.assets.length} assets: ${r.assets
      .map((a) => `${a.path} ${kb(a.bytes)} KB (${kb(a.gzipBytes)} gz)`)
      .join(', ')}`,
    `  first contentful paint, cold, median of ${r.loads}: sign-in ${r.signInMedianMs.toFixed(0)} ms, list ${r.listMedianMs.toFixed(0)} ms (budget < ${FIRST_PAINT_BUDGET_MS} ms)`,
    `    sign-in loads: ${ms(r.signInPaintMs)}; list loads: ${ms(r.listPaintMs)}`,
    '',
  ];
}

/** Whether this machine can measure it (Debian's chromium: .ci/run installs it; a developer may not have it). */
export const canMeasureConsole = (): boolean => has('chromium');

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const r = await measureConsole();
  process.stdout.write(
    [...consoleBlock(r), ...judgeConsole(r).map((g) => `${g.pass ? 'PASS' : 'MISS'} ${g.what} = ${g.value.toFixed(1)} (goal < ${g.goal})`)].join('\n') + '\n',
  );
}
