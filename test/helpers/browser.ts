import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/**
 * Real headless Chromium for the console's browser tests (test/browser/) and the console bench
 * (bench/console.ts): Debian's `chromium` (no browser download is possible here; .ci/run installs it),
 * driven by playwright-core. Every browser gets a new empty profile (`--user-data-dir` in a temp folder,
 * removed on close) and the flags that keep it off the network: on this closed network Chromium's own
 * background connections (component updates, sync, field trials) are refused and would only slow it.
 */
export const CHROMIUM = process.env.STRATUS_CHROMIUM ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Generous waits: a loaded 2-core machine runs four test files and their servers beside Chromium. */
export const WAIT_MS = 45_000;

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Closes the browser and removes its profile (call it in a `finally` or an `after` hook). */
  close(): Promise<void>;
}

/** A headless Chromium with a fresh profile and one page (1280×800). */
export async function openBrowser(opts: { width?: number; height?: number } = {}): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'stratus-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: opts.width ?? 1280, height: opts.height ?? 800 },
      timeout: 60_000,
    });
  } catch (err) {
    rmSync(profile, { recursive: true, force: true });
    throw err;
  }
  context.setDefaultTimeout(WAIT_MS);
  context.setDefaultNavigationTimeout(WAIT_MS * 2);
  // What goes wrong inside the page shows in the test's output (a failing wait alone says only "timeout").
  context.on('page', report);
  const page = context.pages()[0] ?? (await context.newPage());
  for (const p of context.pages()) report(p);
  return {
    context,
    page,
    async close() {
      try {
        await context.close();
      } finally {
        rmSync(profile, { recursive: true, force: true });
      }
    },
  };
}

const reported = new WeakSet<Page>();
function report(page: Page): void {
  if (reported.has(page)) return;
  reported.add(page);
  page.on('pageerror', (err) => console.log(`# page error (${page.url()}): ${err.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') console.log(`# console error (${page.url()}): ${m.text()}`);
  });
}

let artifacts: string | null = null;
/**
 * Where the tests save screenshots: `STRATUS_TEST_ARTIFACTS` when set (CI may keep it), else a temp folder
 * of this process (named in the test's output). Never inside the repository.
 */
export function artifactsDir(): string {
  if (!artifacts) {
    const given = process.env.STRATUS_TEST_ARTIFACTS;
    if (given) mkdirSync(given, { recursive: true });
    artifacts = given ?? mkdtempSync(join(tmpdir(), 'stratus-browser-'));
  }
  return artifacts;
}

/** Saves a screenshot of the page as `<artifacts>/<name>.png` and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  const path = join(artifactsDir(), `${name.replace(/[^\w.-]+/g, '-')}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/**
 * The README's picture of the console (docs/console.png): written only when STRATUS_README_SCREENSHOT names
 * the file (`STRATUS_README_SCREENSHOT=docs/console.png npm test -- browser`), the visible viewport only,
 * so the committed PNG stays small.
 */
export async function readmeScreenshot(page: Page): Promise<void> {
  const path = process.env.STRATUS_README_SCREENSHOT;
  if (path) await page.screenshot({ path, fullPage: false });
}

/** Waits (no fixed sleep) until `probe(arg)`, run in the page, returns something truthy. */
export async function waitInPage(page: Page, probe: (arg: string) => unknown, what: string, arg: string, timeout = WAIT_MS): Promise<void> {
  try {
    await page.waitForFunction(probe, arg, { timeout, polling: 100 });
  } catch (err) {
    throw new Error(`${what}: not within ${timeout} ms`, { cause: err });
  }
}
