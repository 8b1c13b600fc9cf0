import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '../helpers/client.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { childEnv } from '../helpers/process.js';

/**
 * The compiled build users run (dist/, from scripts/build.js; test/run.ts builds it first): the bundle
 * itself starts and answers, finds its data files, and loads pg, nodemailer and fast-xml-parser only when
 * used (src/core/lazy.ts). What the process has loaded is read from its `require.cache` by a preload that
 * prints it on SIGUSR2.
 */
const DIST = fileURLToPath(new URL('../../dist/stratus.js', import.meta.url));

let dir: string;
let db: { url: string; drop: () => Promise<void> };
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-compiled-'));
  db = engine === 'sqlite' ? { url: join(dir, 'stratus.db'), drop: async () => {} } : await freshDatabase();
});
after(async () => {
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

test('dist/stratus.js serves, finds its data files, and loads pg, nodemailer and fast-xml-parser only when used', async () => {
  const preload = join(dir, 'loaded.cjs');
  writeFileSync(preload, `process.on('SIGUSR2', () => process.stderr.write('LOADED ' + JSON.stringify(Object.keys(require.cache)) + '\\n'));\n`);
  const child = spawn(process.execPath, ['--require', preload, DIST, 'serve', '--db', db.url, '--port', '0', '--log-level', 'warn', '--log-format', 'pretty'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: childEnv(),
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const until = async (what: string, done: () => boolean) => {
    for (let waited = 0; !done(); waited += 20) {
      if (child.exitCode !== null || waited > 60_000) throw new Error(`${what}: not seen (exit ${child.exitCode}): ${out}${err}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const loaded = async (): Promise<string[]> => {
    const from = err.length;
    child.kill('SIGUSR2');
    await until('the list of loaded modules', () => err.slice(from).includes('\n'));
    return JSON.parse(/LOADED (.*)/.exec(err.slice(from))![1]) as string[];
  };
  const has = (files: string[], pkg: string) => files.some((f) => f.includes(`/node_modules/${pkg}/`));
  try {
    await until('the listen line and demo login', () => /Demo login: \S+ \/ \S+/.test(out));
    const base = /listening at (http:\/\/[^\s/]+)\/api\/2\.0\//.exec(out)![1];
    const [, email, password] = /Demo login: (\S+) \/ (\S+)/.exec(out)!;
    const demo = new Client(base, { email, password });

    // The built-in capabilities and library catalogue are JSON files read from beside the bundle.
    const caps = await demo.get('capabilities/');
    assert.equal(caps.status, 200);
    assert.ok(caps.json.hosts && caps.json.hypervisors);
    const lib = await demo.get('libdrives/?limit=0');
    assert.equal(lib.status, 200);
    assert.ok(lib.json.objects.length > 0, 'the built-in library catalogue is loaded');

    const atStart = await loaded();
    assert.ok(!atStart.some((f) => f.includes('/node_modules/tsx/')), 'no TypeScript loader');
    assert.equal(has(atStart, 'pg'), engine === 'postgres', 'pg only on PostgreSQL');
    assert.ok(!has(atStart, 'nodemailer'), 'nodemailer before any mail');
    assert.ok(!has(atStart, 'fast-xml-parser'), 'fast-xml-parser before any XML body');

    const raw = '<request><objects><object><name>from-xml</name></object></objects></request>';
    const created = await demo.request('POST', 'tags/', { raw, headers: { 'content-type': 'application/xml' } });
    assert.equal(created.status, 201, created.text);
    assert.ok(has(await loaded(), 'fast-xml-parser'), 'fast-xml-parser once an XML body came');
  } finally {
    child.kill('SIGTERM');
    assert.equal(await exited, 0, err);
  }
});
