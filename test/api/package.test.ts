import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { freshDatabase } from '../helpers/db.js';

// bin/ is the repository's own (test/run.ts links it beside the transpiled tests): the repository is its parent.
const ROOT = join(realpathSync(fileURLToPath(new URL('../../bin', import.meta.url))), '..');

/** The environment of a child npm: without the npm_* variables of an `npm test` around this run (its prefix, its script). */
function npmEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  return { ...env, ...extra };
}

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<{ status: number | null; out: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, out, ms: Date.now() - started }));
  });
}

/**
 * better-sqlite3's addon as a local prebuild (what its installer, prebuild-install, looks for before compiling):
 * made from the one this checkout compiled, so the install below takes seconds instead of minutes of C++ on a
 * 2-core machine. Everything else comes from the tarball and npm's registry (or its cache).
 * `STRATUS_PACKAGE_TEST_COMPILE=1` leaves it out: the install compiles the addon as a user's would.
 */
async function localPrebuild(dir: string): Promise<NodeJS.ProcessEnv> {
  const pkg = join(ROOT, 'node_modules', 'better-sqlite3');
  const addon = join(pkg, 'build', 'Release', 'better_sqlite3.node');
  if (process.env.STRATUS_PACKAGE_TEST_COMPILE === '1' || !existsSync(addon)) return {};
  const { version } = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { version: string };
  const prebuilds = join(dir, 'prebuilds');
  mkdirSync(prebuilds);
  const file = join(prebuilds, `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`);
  const tar = await run('tar', ['czf', file, 'build/Release/better_sqlite3.node'], pkg, process.env);
  assert.equal(tar.status, 0, tar.out);
  return { npm_config_better_sqlite3_local_prebuilds: prebuilds };
}

test('the packed tarball installs into an empty folder, and `npx stratus serve` from it answers the API', { timeout: 15 * 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-package-'));
  const db = await freshDatabase();
  try {
    // `npm pack` runs prepack: dist/ is built into the tarball.
    const pack = await run('npm', ['pack', '--pack-destination', dir], ROOT, npmEnv());
    assert.equal(pack.status, 0, pack.out);
    const tarball = readdirSync(dir).find((f) => f.endsWith('.tgz'));
    assert.ok(tarball, `no tarball in ${dir}: ${pack.out}`);
    const listing = await run('tar', ['tzf', join(dir, tarball)], dir, process.env);
    const files = listing.out.split('\n');
    for (const f of ['package/bin/stratus.js', 'package/dist/stratus.js', 'package/LICENSE', 'package/README.md', 'package/examples/seed.json'])
      assert.ok(files.includes(f), `${f} is in the tarball`);
    assert.ok(!files.some((f) => /^package\/(src|test|bench|scripts)\//.test(f)), 'sources, tests and build scripts stay out of the tarball');

    const app = join(dir, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), '{"private": true}\n');
    const install = await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', join(dir, tarball)], app, npmEnv(await localPrebuild(dir)));
    assert.equal(install.status, 0, install.out);
    t.diagnostic(`npm install of the tarball: ${(install.ms / 1000).toFixed(1)} s`);
    const modules = readdirSync(join(app, 'node_modules'));
    assert.ok(modules.includes('better-sqlite3'), 'the native addon is installed');
    // What the bundle holds is not installed again (nothing of ours is built at install).
    for (const bundled of ['fastify', 'esbuild', 'kysely', 'typescript']) assert.ok(!modules.includes(bundled), `${bundled} is not installed`);

    const ready = join(dir, 'ready.json');
    const args = ['stratus', 'serve', '--port', '0', '--db', db.url, '--ci', '--demo-login', 'pkg@example.com:s3cret', '--ready-file', ready];
    // Its own process group: npx runs stratus as a grandchild, and the whole group is stopped at the end.
    const server = spawn('npx', [...args, '--log-level', 'warn', '--log-format', 'json'], {
      cwd: app,
      env: npmEnv(),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    server.stdout.on('data', (d) => (log += d));
    server.stderr.on('data', (d) => (log += d));
    const exited = new Promise<number | null>((resolve) => server.on('exit', resolve));
    try {
      for (const started = Date.now(); !existsSync(ready); await new Promise((r) => setTimeout(r, 50)))
        assert.ok(Date.now() - started < 60_000 && server.exitCode === null, `the server did not start: ${log}`);
      const { url } = JSON.parse(readFileSync(ready, 'utf8')) as { url: string };
      const auth = { authorization: `Basic ${Buffer.from('pkg@example.com:s3cret').toString('base64')}`, 'content-type': 'application/json' };
      const version = (await (await fetch(new URL('/_stratus/version', url))).json()) as { version: string };
      assert.equal(version.version, (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version);
      const created = await fetch(`${url}drives/`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ name: 'from-npx', size: 1073741824, media: 'disk' }),
      });
      assert.equal(created.status, 201, await created.clone().text());
      const list = (await (await fetch(`${url}drives/detail/`, { headers: auth })).json()) as { objects: { name: string }[] };
      assert.deepEqual(
        list.objects.map((d) => d.name),
        ['from-npx'],
      );
    } finally {
      process.kill(-server.pid!, 'SIGTERM');
      await exited;
    }
  } finally {
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
});
