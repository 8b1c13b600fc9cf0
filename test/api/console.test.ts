import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { gunzipSync } from 'node:zlib';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engine, freshDatabase } from '../helpers/db.js';
import { serveProcess, type Running } from '../helpers/process.js';
import { describeLocation } from '../../src/resources/location/location.js';

/**
 * The web console as files (src/http/console.ts): `stratus serve` (the compiled build, dist/ui/ made by
 * scripts/build.js) serves it at /ui/ with a strict CSP, its hashed assets cached for a year and gzipped,
 * every client route answered with the page (its `<base>` set so the assets resolve), a missing asset a 404
 * in the API's error format; under a location's prefix and host the same. What the page does in a browser
 * is test/browser/'s.
 */
interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  text: string;
}

function call(port: number, path: string, opts: { host?: string; method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method: opts.method ?? 'GET', path, headers: { ...(opts.host ? { Host: opts.host } : {}), ...opts.headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          const body = Buffer.concat(chunks);
          const plain = res.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body;
          resolve({ status: res.statusCode!, headers: res.headers, body, text: plain.toString('utf8') });
        });
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** The page's script and style sheet, as index.html names them. */
function assetsOf(html: string): { js: string; css: string } {
  const js = /<script type="module" src="([^"]+)"/.exec(html)?.[1];
  const css = /<link rel="stylesheet" href="([^"]+)"/.exec(html)?.[1];
  assert.ok(js && css, html);
  return { js, css };
}

const dbOf = async (dir: string) => (engine === 'sqlite' ? { url: join(dir, 's.db'), drop: async () => {} } : await freshDatabase());

describe('the web console at /ui/', () => {
  let dir: string;
  let db: { url: string; drop: () => Promise<void> };
  let srv: Running;
  let port: number;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'stratus-console-'));
    db = await dbOf(dir);
    srv = await serveProcess(['--db', db.url, '--demo-login', 'console@example.com:console-secret-1']);
    port = Number(new URL(srv.base).port);
  });
  after(async () => {
    srv?.child.kill('SIGTERM');
    await srv?.exited;
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the start banner names the console beside the API and the demo login', () => {
    assert.match(srv.stdout(), new RegExp(`\\nConsole: http://127\\.0\\.0\\.1:${port}/ui/ \\(sign in with the demo login\\)\\n`));
  });

  test('/ui/ is the page: HTML under a CSP that allows only its own origin, never cached, its base at /ui/', async () => {
    const res = await call(port, '/ui/');
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(res.headers['cache-control'], 'no-cache');
    const csp = String(res.headers['content-security-policy']);
    for (const part of ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "base-uri 'self'"])
      assert.ok(csp.includes(part), `${part} in ${csp}`);
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.match(res.text, /<base href="\.\/">/);
    // Nothing from elsewhere: every reference of the page is relative.
    assert.doesNotMatch(res.text, /(src|href)="(https?:)?\/\//);
    const redirect = await call(port, '/ui');
    assert.equal(redirect.status, 301);
    assert.equal(redirect.headers.location, 'ui/');
  });

  test('its assets: right types, gzip when asked, a year of cache for hashed names', async () => {
    const { js, css } = assetsOf((await call(port, '/ui/')).text);
    for (const [name, type] of [
      [js, 'text/javascript; charset=utf-8'],
      [css, 'text/css; charset=utf-8'],
    ]) {
      assert.match(name, /^app-[A-Z0-9]{8}\.(js|css)$/);
      const res = await call(port, `/ui/${name}`, { headers: { 'Accept-Encoding': 'gzip' } });
      assert.equal(res.status, 200, name);
      assert.equal(res.headers['content-type'], type);
      assert.equal(res.headers['content-encoding'], 'gzip');
      assert.equal(res.headers['cache-control'], 'public, max-age=31536000, immutable');
      assert.ok(res.text.length > 1000, `${name} has content`);
    }
    // The bundle is the app: Preact and the console's own pages, nothing loaded from a CDN.
    const code = (await call(port, `/ui/${js}`)).text;
    assert.match(code, /accounts\/action\//);
    assert.doesNotMatch(code, /https:\/\/(unpkg|cdn|esm\.sh|fonts\.googleapis)/);
  });

  test("client routes get the page with a base that reaches /ui/; a missing asset is the API's 404", async () => {
    for (const [path, base] of [
      ['/ui/servers', './'],
      ['/ui/servers/', '../'],
      ['/ui/servers/0f2a2f5e-2d27-4d8f-9a3e-2b2c5f1b7e61/', '../../'],
      ['/ui/servers/new?name=x', '../'],
    ]) {
      const res = await call(port, path);
      assert.equal(res.status, 200, path);
      assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
      assert.match(res.text, new RegExp(`<base href="${base.replace(/\./g, '\\.')}">`), path);
    }
    const missing = await call(port, '/ui/app-ABCDEFGH.js', { headers: { Accept: 'application/json' } });
    assert.equal(missing.status, 404);
    assert.match(String(missing.headers['content-type']), /^application\/json/);
    assert.deepEqual(JSON.parse(missing.text), [{ error_message: 'No console file /ui/app-ABCDEFGH.js', error_point: null, error_type: 'notexist' }]);
  });

  test("the page's way in: the demo login through the cookie session, CSRF on unsafe calls, 401s without a browser challenge", async () => {
    const json = { 'Content-Type': 'application/json', Accept: 'application/json', 'X-Requested-With': 'XMLHttpRequest' };
    // Before signing in: a page's request is refused without the Basic challenge (no browser dialog) ...
    const anon = await call(port, '/api/2.0/accounts/action/?do=check_login_with_return_uuid', { method: 'POST', headers: json, body: '{}' });
    assert.equal(anon.status, 401);
    assert.equal(anon.headers['www-authenticate'], undefined);
    // ... another client's still gets both challenges.
    const plain = await call(port, '/api/2.0/servers/', { headers: { Accept: 'application/json' } });
    assert.equal(plain.status, 401);
    assert.ok(plain.headers['www-authenticate']);
    const login = await call(port, '/api/2.0/accounts/action/?do=login', {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ username: 'console@example.com', password: 'console-secret-1' }),
    });
    assert.equal(login.status, 200, login.text);
    const cookies = (login.headers['set-cookie'] ?? []).map((c) => c.split(';')[0]);
    const csrf = cookies.find((c) => c.startsWith('csrftoken='))!.slice('csrftoken='.length);
    const cookie = cookies.join('; ');
    assert.equal((await call(port, '/api/2.0/servers/detail/?limit=20', { headers: { ...json, Cookie: cookie } })).status, 200);
    const body = JSON.stringify({ name: 'from the console', size: 1073741824, media: 'disk' });
    const noToken = await call(port, '/api/2.0/drives/', { method: 'POST', headers: { ...json, Cookie: cookie }, body });
    assert.equal(noToken.status, 403);
    assert.match(JSON.parse(noToken.text)[0].error_message, /X-CSRFToken/);
    const made = await call(port, '/api/2.0/drives/', { method: 'POST', headers: { ...json, Cookie: cookie, 'X-CSRFToken': csrf }, body });
    assert.equal(made.status, 201, made.text);
  });
});

describe('the web console per location', () => {
  let dir: string;
  let db: { url: string; drop: () => Promise<void> };
  let srv: Running;
  let port: number;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'stratus-console-loc-'));
    db = await dbOf(dir);
    srv = await serveProcess(['--db', db.url, '--locations', 'zrh,sjc', '--rate-limits', 'off']);
    port = Number(new URL(srv.base).port);
  });
  after(async () => {
    srv?.child.kill('SIGTERM');
    await srv?.exited;
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  test("under a location's prefix and host: the page, its assets beside it, and /locations/ pointing at it", async () => {
    for (const [host, path] of [
      [undefined, '/sjc/ui/'],
      [`sjc.localhost:${port}`, '/ui/'],
      ['zrh.cloudsigma.com', '/ui/servers/x/'],
    ] as const) {
      const page = await call(port, path, { host });
      assert.equal(page.status, 200, `${host} ${path}`);
      assert.equal(page.headers['content-type'], 'text/html; charset=utf-8');
      const { js } = assetsOf(page.text);
      const prefix = path.startsWith('/sjc/') ? '/sjc' : '';
      const asset = await call(port, `${prefix}/ui/${js}`, { host });
      assert.equal(asset.status, 200);
      assert.equal(asset.headers['content-type'], 'text/javascript; charset=utf-8');
    }
    assert.equal((await call(port, '/sjc/ui')).headers.location, 'ui/');
    // What /locations/ tells a client (src/resources/location/location.ts): each location's console at /ui/ of its host.
    for (const code of ['zrh', 'sjc']) assert.equal(describeLocation(code).default_frontend_url, `https://${code}.cloudsigma.com/ui/`);
    assert.match(srv.stdout(), new RegExp(`Location sjc: .*http://127\\.0\\.0\\.1:${port}/sjc/ui/`));
  });
});
