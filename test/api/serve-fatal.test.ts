/**
 * `stratus serve` stops with a non-zero exit on a fatal error rather than hanging (src/fatal.ts), so the supervisor
 * it runs under (systemd `Restart=on-failure`, a container restart policy: docs/operating.md) starts a fresh one.
 *
 * The errors are injected from outside the product: a module preloaded through NODE_OPTIONS throws (or rejects a
 * promise nobody awaits) once the server has started (`stratus:started`, src/serve.ts), as a bug would.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engine, freshDatabase } from '../helpers/db.js';
import { serveProcess, stratusChild } from '../helpers/process.js';

let dir: string;

before(() => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-fatal-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** NODE_OPTIONS that preload `code` into every `stratus` process started with it (workers too). */
function preload(name: string, code: string): NodeJS.ProcessEnv {
  const file = join(dir, `${name}.cjs`);
  writeFileSync(file, code);
  return { NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${file}`.trim() };
}

const database = async (name: string) => (engine === 'sqlite' ? join(dir, `${name}.db`) : (await freshDatabase()).url);

/** The log's JSON events. */
const events = (out: string) =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; kind?: string; err?: { message: string; stack?: string } });

/** Resolves with the exit code, or fails if the process is still running after `ms`. */
async function exitWithin<T>(exited: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still running ${ms} ms later`)), ms)));
  try {
    return await Promise.race([exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe(`serve exits non-zero on a fatal error (${engine})`, { concurrency: true }, () => {
  for (const [kind, inject] of [
    ['uncaught exception', `throw new Error('injected fatal error')`],
    ['unhandled rejection', `Promise.reject(new Error('injected fatal error'))`],
  ] as const) {
    test(`an ${kind}: one fatal event in the log, then exit 1 at once`, async () => {
      const env = preload(kind.replace(' ', '-'), `process.once('stratus:started', () => setTimeout(() => { ${inject}; }, 200));`);
      const srv = await serveProcess(['--db', await database(kind.replace(' ', '-')), '--log-format', 'json'], env);
      assert.equal(await exitWithin(srv.exited, 10_000), 1);
      const fatal = events(srv.stdout()).filter((e) => e.level === 60);
      assert.equal(fatal.length, 1, srv.stdout());
      assert.equal(fatal[0].kind, kind);
      assert.equal(fatal[0].err?.message, 'injected fatal error');
      assert.match(fatal[0].err?.stack ?? '', /\n\s+at /, 'the stack is in the event');
    });
  }

  test('--workers 2 whose workers keep dying of an uncaught exception: the primary stops, exit 1', async () => {
    const env = preload('workers', `process.once('stratus:started', () => setTimeout(() => { throw new Error('injected fatal error'); }, 200));`);
    const srv = await serveProcess(['--db', await database('workers'), '--workers', '2', '--log-format', 'json'], env);
    assert.equal(await exitWithin(srv.exited, 60_000), 1);
    const all = events(srv.stdout());
    assert.ok(all.filter((e) => e.level === 60 && e.err?.message === 'injected fatal error').length >= 2, 'each worker says why it died');
    assert.ok(
      all.some((e) => /workers keep dying/.test(e.msg)),
      srv.stdout(),
    );
  });

  test('--workers 2 whose first worker dies as it starts listening, before the second listens: it is replaced', async () => {
    // (By node:cluster's worker id: the first worker dies once, the second starts 1.5 s late.)
    const env = preload(
      'early-death',
      `const id = require('node:cluster').worker?.id;\n` +
        `if (id === 1) process.once('stratus:started', () => process.exit(3));\n` +
        `if (id === 2) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);\n`,
    );
    const srv = await serveProcess(['--db', await database('early-death'), '--workers', '2', '--log-format', 'json', '--log-level', 'info'], env);
    try {
      await srv.printed(/worker died; starting another/, 15_000);
      await srv.printed(/"worker":3,[^\n]*"msg":"worker listening"/, 15_000);
    } finally {
      srv.child.kill('SIGTERM');
      assert.equal(await exitWithin(srv.exited, 30_000), 0);
    }
  });

  test('--workers 2 on a port in use: exit non-zero at once, saying so', async () => {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    try {
      const port = (taken.address() as net.AddressInfo).port;
      const { child, done } = stratusChild(['serve', '--db', await database('port'), '--workers', '2', '--port', String(port)]);
      // Generous for a loaded machine (it takes a few seconds): what is asserted is that it ends by itself.
      const res = await exitWithin(done, 60_000).catch(async (err: Error) => {
        child.kill('SIGKILL');
        const { stdout, stderr } = await done;
        throw new Error(`${err.message}: ${stdout}${stderr}`);
      });
      assert.notEqual(res.status, 0);
      assert.match(res.stderr, new RegExp(`port: 127\\.0\\.0\\.1:${port} is already in use`));
    } finally {
      taken.close();
    }
  });
});
