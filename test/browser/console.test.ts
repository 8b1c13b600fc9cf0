import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { openBrowser, readmeScreenshot, screenshot, artifactsDir, waitInPage, WAIT_MS, type Browser } from '../helpers/browser.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { needs, onlyOn } from '../helpers/skips.js';
import { until } from '../helpers/until.js';

/**
 * The web console (/ui/) as a person uses it, in real headless Chromium (test/helpers/browser.ts): sign in,
 * create a drive and a server, start it and watch it reach `running` without a reload (the event stream,
 * with the simulated clock moved by the test, never slept for), take a snapshot, attach a firewall policy,
 * watch the balance chart move when the operator page advances the clock a day, sign out; a second user sees
 * none of the first one's objects, and an error of the API is shown as the API words it. A screenshot of
 * every page goes to the artifacts folder (STRATUS_TEST_ARTIFACTS, else a temp folder named in the output).
 *
 * On SQLite only: the browser sees the API, and the API's behaviour on both stores is what the rest of the
 * suite checks; Chromium costs too much CPU to run twice.
 */
const ADMIN_TOKEN = 'browser-test-admin-token-0123456789';
const BOOT_MS = 3_000;

describe('the web console in headless Chromium', { skip: onlyOn('sqlite') || needs('chromium') }, () => {
  let srv: TestServer;
  let browser: Browser;
  let page: Page;
  let alice: Awaited<ReturnType<TestServer['user']>>;
  let bob: Awaited<ReturnType<TestServer['user']>>;
  let serverUuid = '';

  const ui = (path = '') => `${srv.base}/ui/${path}`;
  /** The element whose text is `text` (exactly), once it shows. */
  const shows = (text: string | RegExp, root: Page = page) =>
    root
      .getByText(text, { exact: typeof text === 'string' })
      .first()
      .waitFor({ timeout: WAIT_MS });

  before(async () => {
    srv = await startServer({ 'admin-token': ADMIN_TOKEN });
    // The admin plane's clock moves run the work that fell due, as under `stratus serve`.
    srv.app.schedulerProbe = srv.scheduler;
    alice = await srv.user();
    bob = await srv.user();
    await srv.advance(0); // the recurring timers (billing polls) exist from here on
    browser = await openBrowser();
    page = browser.page;
    console.log(`# screenshots: ${artifactsDir()}`);
  });
  after(async () => {
    await browser?.close();
    await srv?.close();
  });

  async function signIn(email: string, password: string) {
    await page.goto(ui('signin'));
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
  }

  test('sign in: the overview shows the balance', async () => {
    await page.goto(ui());
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await screenshot(page, '01-sign-in');
    await signIn(alice.email, alice.password);
    const balance = (await alice.get('balance/')).json;
    // As a person reads money: two places, thousands separated (the exact figure is the title).
    const amount = Number(balance.balance).toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    await shows(`${amount} ${balance.currency}`);
    assert.equal(await page.getByLabel('Balance').getAttribute('title'), balance.balance);
    await page.getByLabel('Servers: 0').waitFor({ timeout: WAIT_MS });
    await screenshot(page, '02-overview');
  });

  test('create a server with a new drive', async () => {
    await page.goto(ui('servers/new'));
    await page.getByLabel('Name').fill('web');
    await page.getByLabel('A NIC with a public IP (DHCP)').check();
    await screenshot(page, '03-create-server');
    await page.getByRole('button', { name: 'Create server' }).click();
    await page.getByRole('heading', { name: 'web' }).waitFor();
    serverUuid = page.url().match(/servers\/([0-9a-f-]{36})/)![1];
    const drives = (await alice.get('drives/')).json.objects;
    assert.equal(drives.length, 1, 'the server came with a new drive');
    await shows('stopped');
    await screenshot(page, '04-server-created');
  });

  test('attach a firewall policy to the stopped server', async () => {
    await page.goto(ui('fwpolicies/new'));
    await page.getByRole('textbox').first().fill('web-only');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.getByRole('heading', { name: 'web-only' }).waitFor();
    await screenshot(page, '05-firewall-policy');
    const policy = (await alice.get('fwpolicies/')).json.objects[0];
    await page.goto(ui(`servers/${serverUuid}`));
    await page.getByRole('button', { name: 'Attach firewall policy' }).click();
    const form = page.locator('#action-panel form');
    await form.getByLabel('Firewall policy').selectOption(policy.uuid);
    await form.getByRole('button').first().click();
    await until('the policy attached', async () => (await alice.get(`servers/${serverUuid}/`)).json.nics[0].firewall_policy?.uuid === policy.uuid, WAIT_MS);
    // The API gives the reference as {resource_uri, uuid}; the page names it, and links to it.
    const named = page
      .locator('main a')
      .filter({ hasText: /^web-only$/ })
      .first();
    await page.goto(ui(`servers/${serverUuid}`));
    await named.waitFor({ timeout: WAIT_MS });
    assert.match((await named.getAttribute('href')) ?? '', new RegExp(`fwpolicies/${policy.uuid}/?$`));
    assert.equal(await named.getAttribute('title'), policy.uuid);
    await screenshot(page, '06-firewall-attached');
    // Renamed elsewhere: the live stream's event about the policy drops the name the console kept.
    await alice.put(`fwpolicies/${policy.uuid}/`, { name: 'web-tight', rules: [] });
    await until(
      'the new name shown',
      async () => {
        // Within the page (a reload would forget every name anyway): to the list and back.
        await page.getByRole('link', { name: 'Servers', exact: true }).first().click();
        await page.getByRole('link', { name: 'web', exact: true }).click();
        await page.getByRole('heading', { name: 'web', exact: true }).waitFor();
        return (
          (await page
            .locator('main a')
            .filter({ hasText: /^web-tight$/ })
            .count()) > 0
        );
      },
      WAIT_MS,
    );
  });

  test('start the server: it reaches running without a reload', async () => {
    await page.goto(ui(`servers/${serverUuid}`));
    await page.getByRole('button', { name: 'Start' }).click();
    await shows(/starting|running/);
    // The simulated boot: the clock moves, the event stream tells the page.
    await srv.advance(BOOT_MS);
    await shows('running');
    assert.equal((await alice.get(`servers/${serverUuid}/`)).json.status, 'running');
    // The overview counts what the account has.
    await page.getByRole('link', { name: 'Overview', exact: true }).click();
    await page.getByLabel('Servers: 1').waitFor({ timeout: WAIT_MS });
    await page.getByLabel('Firewall policies: 1').waitFor({ timeout: WAIT_MS });
    await page.goto(ui(`servers/${serverUuid}`));
    // Deeply nested fields (a drive's runtime I/O counters) keep their numbers on one line.
    const counter = page
      .locator('dt', { hasText: /^bytes_read$/ })
      .first()
      .locator('xpath=following-sibling::dd[1]');
    await counter.waitFor({ timeout: WAIT_MS });
    const box = (await counter.boundingBox())!;
    const line = await counter.evaluate((el) => parseFloat(getComputedStyle(el).lineHeight) || 24);
    assert.ok(box.height < line * 1.5, `a counter is one line high (${box.height} px, line ${line} px)`);
    const [content, room] = await counter.evaluate((el) => [el.scrollWidth, el.clientWidth]);
    assert.ok(content <= room, `a counter fits its column (${content} px in ${room} px)`);
    await screenshot(page, '07-server-running');
  });

  test('take a snapshot of the drive', async () => {
    const drive = (await alice.get('drives/')).json.objects[0];
    await page.goto(ui(`drives/${drive.uuid}`));
    await page.getByRole('button', { name: 'Take snapshot' }).click();
    const form = page.locator('#action-panel form');
    await form.getByLabel('Name').fill('before-upgrade');
    await form.getByRole('button').first().click();
    await page.goto(ui('snapshots'));
    await shows('before-upgrade');
    const snaps = (await alice.get('snapshots/')).json.objects;
    assert.deepEqual(
      snaps.map((s: any) => s.name),
      ['before-upgrade'],
    );
    await screenshot(page, '08-snapshots');
  });

  test('the balance chart moves when the operator advances the clock a day', async () => {
    await page.goto(ui('charts/balance'));
    const chart = page.locator('#chart-balance');
    await chart.waitFor();
    const before = Number(await chart.getAttribute('data-points'));
    await screenshot(page, '09-balance-before');
    // The operator's page, in a second tab: the admin token, then +1d.
    const op = await browser.context.newPage();
    try {
      await op.goto(ui('operator/clock'));
      await op.getByLabel('Admin token').fill(ADMIN_TOKEN);
      await op.getByRole('button', { name: 'Use token' }).click();
      const now = op.getByLabel('Simulated time');
      await op.waitForFunction((el) => !!el && el.textContent !== '…', await now.elementHandle());
      const t0 = Date.parse((await now.textContent())!);
      await op.getByRole('button', { name: '+1d' }).click();
      await op.waitForFunction(([el, t]) => Date.parse(el!.textContent!) >= t + 86_400_000, [await now.elementHandle(), t0] as const, { timeout: WAIT_MS * 3 });
      await screenshot(op, '10-operator-clock');
      // An error of the admin plane, as it words it.
      await op.getByLabel('Advance by').fill('soon');
      await op.getByRole('button', { name: 'Advance', exact: true }).click();
      await op.getByRole('alert').getByText('advance must be a duration like 90s, 30m, 1h or 1h30m').waitFor();
      await op.goto(ui('operator/accounts'));
      await op.getByRole('cell', { name: alice.email }).waitFor();
      await screenshot(op, '11-operator-accounts');
    } finally {
      await op.close();
    }
    // The chart page, never reloaded, follows the balance events: a day of polls is many more points.
    await waitInPage(
      page,
      (n) => Number(document.querySelector('#chart-balance')?.getAttribute('data-points')) > Number(n),
      'the balance chart grew',
      String(before),
    );
    const ledger = (await alice.get('ledger/?limit=1')).json.objects[0];
    await waitInPage(
      page,
      (end) => document.querySelector('#chart-balance')?.getAttribute('data-last') === String(Number(end)),
      'the last point is the ledger balance',
      ledger.end,
    );
    await screenshot(page, '12-balance-after-a-day');
    await readmeScreenshot(page);
    await page.goto(ui('charts/usage'));
    await page.locator('#chart-usage-cpu canvas').first().waitFor();
    await screenshot(page, '13-usage');
    await page.goto(ui('charts/levels'));
    await page.locator('#chart-level-cpu canvas').first().waitFor();
    await screenshot(page, '14-burst-levels');
  });

  test("sign out; a second user sees none of the first one's objects, and the API's error as it words it", async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await signIn(bob.email, bob.password);
    await page.goto(ui('servers'));
    await page.getByRole('heading', { name: 'Servers' }).waitFor();
    await screenshot(page, '15-second-user-servers');
    assert.equal(await page.getByText('web', { exact: true }).count(), 0);
    // The first user's server, asked for by its address: the API's own words.
    const refused = await bob.get(`servers/${serverUuid}/`);
    assert.equal(refused.status, 404);
    await page.goto(ui(`servers/${serverUuid}`));
    await page.getByRole('alert').getByText(refused.json[0].error_message).waitFor();
    await screenshot(page, '16-not-yours');
  });
  test('the operator pages need the admin token, not an account: signed out, the clock page asks for the token', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await page.goto(ui('operator/clock'));
    await page.getByLabel('Admin token').waitFor({ timeout: WAIT_MS });
    assert.equal(new URL(page.url()).pathname, '/ui/operator/clock');
  });
});
