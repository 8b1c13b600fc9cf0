import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engine, freshDatabase } from '../helpers/db.js';
import { childEnv, serveProcess } from '../helpers/process.js';
import { needs } from '../helpers/skips.js';

/**
 * A real client: Apache libcloud's CloudSigma 2.0 driver (Debian's python3-libcloud) drives a
 * `stratus serve` process through drives, nodes, tags, VNC and destroy. `.ci/run` installs it; without it
 * the test is skipped (and the run fails under CI: test/run.ts).
 */
const PYTHON = '/usr/bin/python3';
const SCRIPT = fileURLToPath(new URL('../clients/libcloud_smoke.py', import.meta.url));
const skip = needs('python3-libcloud');

/** Runs the smoke script against a `stratus serve` process started with `flags`; `env` for the client. */
async function smoke(flags: string[], clientEnv: (srv: { base: string; stdout: string }) => NodeJS.ProcessEnv = () => ({})): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-libcloud-'));
  const db = engine === 'sqlite' ? { url: join(dir, 'l.db'), drop: async () => {} } : await freshDatabase();
  const instant = 'drive.create=0,drive.clone=0,drive.clone.per_gib=0,drive.resize=0,server.boot=0,server.stop=0,server.shutdown=0';
  const srv = await serveProcess(['--db', db.url, '--rate-limits', 'off', '--delays', instant, ...flags]);
  try {
    const login = /Demo login: (\S+) \/ (\S+)/.exec(srv.stdout());
    assert.ok(login, srv.stdout());
    const res = spawnSync(PYTHON, [SCRIPT, srv.base, login[1], login[2]], {
      encoding: 'utf8',
      timeout: 100_000,
      env: { ...childEnv(), ...clientEnv({ base: srv.base, stdout: srv.stdout() }) },
    });
    assert.equal(res.status, 0, `${res.stdout}\n${res.stderr}`);
    assert.match(res.stdout, /ALL OK/);
  } finally {
    srv.child.kill('SIGTERM');
    await srv.exited;
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

test('libcloud CloudSigma 2.0 driver: every call succeeds', { skip, timeout: 120_000 }, async () => {
  await smoke([]);
});

test('libcloud over --tls: built with region=zrh and no connection overrides, a name mapping and the CA only', { skip, timeout: 120_000 }, async () => {
  // The CA is kept in the data folder (beside the SQLite file; ./data with PostgreSQL): the server names it.
  await smoke(['--tls'], ({ base, stdout }) => {
    assert.match(base, /^https:\/\/127\.0\.0\.1:\d+$/);
    const ca = /trust the local CA (\S+) \(/.exec(stdout);
    assert.ok(ca, stdout);
    return { SSL_CERT_FILE: ca[1] };
  });
});
