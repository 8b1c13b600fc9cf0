import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serveProcess, stratus, type Running } from '../helpers/process.js';
import { needs, onlyOn } from '../helpers/skips.js';

/**
 * `--tls`: HTTPS as the real hosts, for clients that change nothing but a name mapping (`curl --resolve`)
 * and the CA they trust. The CA is made once in the data folder (beside the SQLite file) and kept.
 * The TLS set-up does not depend on the store: these tests run once, in the SQLite pass.
 */
const LOGIN = 'tls@example.com:s3cret';
const skip = onlyOn('sqlite') || needs('curl');

function curl(args: string[]): { code: number; status: string; body: string; headers: string } {
  const res = spawnSync('curl', ['-sS', '-u', LOGIN, '-D', '-', '-o', '-', ...args], { encoding: 'utf8', timeout: 30_000 });
  const [headers, ...rest] = res.stdout.split(/\r?\n\r?\n/);
  return { code: res.status ?? -1, status: /^HTTP\/\S+ (\d{3})/.exec(headers)?.[1] ?? '', headers, body: rest.join('\n\n') + res.stderr };
}
const portOf = (srv: Running) => new URL(srv.base).port;

async function withServer(dir: string, flags: string[], fn: (srv: Running) => Promise<void> | void): Promise<void> {
  const srv = await serveProcess(['--db', join(dir, 's.db'), '--demo-login', LOGIN, '--admin-token', 'off', ...flags]);
  try {
    await fn(srv);
  } finally {
    srv.child.kill('SIGTERM');
    await srv.exited;
  }
}

test('--tls: curl with --resolve and the CA reaches any <location>.cloudsigma.com; the CA is kept across restarts', { skip, timeout: 120_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-tls-'));
  const ca = join(dir, 'tls', 'ca.pem');
  try {
    let first = '';
    await withServer(dir, ['--tls'], (srv) => {
      assert.match(srv.base, /^https:\/\/127\.0\.0\.1:\d+$/);
      assert.ok(srv.stdout().includes(ca), srv.stdout());
      first = readFileSync(ca, 'utf8');
      const port = portOf(srv);
      const zrh = curl(['--cacert', ca, '--resolve', `zrh.cloudsigma.com:${port}:127.0.0.1`, `https://zrh.cloudsigma.com:${port}/api/2.0/cloud_status/`]);
      assert.equal(zrh.status, '200', zrh.body);
      assert.equal(JSON.parse(zrh.body).signup, true);
      // Another location's name maps to the configured location; `Location` names the host asked for.
      const fra = curl([
        '--cacert',
        ca,
        '--resolve',
        `fra.cloudsigma.com:${port}:127.0.0.1`,
        '-H',
        'content-type: application/json',
        '-X',
        'POST',
        '-d',
        '{"name": "over-tls"}',
        `https://fra.cloudsigma.com:${port}/api/2.0/tags/`,
      ]);
      assert.equal(fra.status, '201', fra.body);
      assert.match(fra.headers, new RegExp(`location: https://fra\\.cloudsigma\\.com:${port}/api/2\\.0/tags/[0-9a-f-]{36}/`, 'i'));
      const loc = curl(['--cacert', ca, '--resolve', `fra.cloudsigma.com:${port}:127.0.0.1`, `https://fra.cloudsigma.com:${port}/api/2.0/locations/`]);
      assert.equal(JSON.parse(loc.body).objects[0].id, 'ZRH');
      // The upload host (`direct.<location>.cloudsigma.com`), localhost and the address are in the certificate too.
      assert.equal(
        curl(['--cacert', ca, '--resolve', `direct.zrh.cloudsigma.com:${port}:127.0.0.1`, `https://direct.zrh.cloudsigma.com:${port}/api/2.0/locations/`])
          .status,
        '200',
      );
      assert.equal(curl(['--cacert', ca, `https://localhost:${port}/api/2.0/locations/`]).status, '200');
      assert.equal(curl(['--cacert', ca, `https://127.0.0.1:${port}/api/2.0/locations/`]).status, '200');
      // Without the CA the client refuses the certificate; a name outside the certificate is refused too.
      const untrusted = curl(['--resolve', `zrh.cloudsigma.com:${port}:127.0.0.1`, `https://zrh.cloudsigma.com:${port}/api/2.0/locations/`]);
      assert.notEqual(untrusted.code, 0);
      assert.notEqual(curl(['--cacert', ca, '--resolve', `example.com:${port}:127.0.0.1`, `https://example.com:${port}/api/2.0/locations/`]).code, 0);
      // Plain HTTP on the TLS port is not served.
      assert.notEqual(curl([`http://127.0.0.1:${port}/api/2.0/locations/`]).status, '200');
    });
    const served = new X509Certificate(readFileSync(join(dir, 'tls', 'server.pem')));
    for (const name of ['DNS:*.cloudsigma.com', 'DNS:*.zrh.cloudsigma.com', 'DNS:localhost', 'IP Address:127.0.0.1'])
      assert.ok(served.subjectAltName?.split(', ').includes(name), `${name} in ${served.subjectAltName}`);
    assert.ok(served.checkIssued(new X509Certificate(first)));
    // A restart keeps the CA (clients trust it once) and issues a new server certificate from it.
    await withServer(dir, ['--tls', '--location', 'fra'], (srv) => {
      assert.equal(readFileSync(ca, 'utf8'), first);
      const port = portOf(srv);
      const res = curl([
        '--cacert',
        ca,
        '--resolve',
        `direct.fra.cloudsigma.com:${port}:127.0.0.1`,
        `https://direct.fra.cloudsigma.com:${port}/api/2.0/locations/`,
      ]);
      assert.equal(res.status, '200', res.body);
      assert.equal(JSON.parse(res.body).objects[0].id, 'FRA');
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--tls-cert/--tls-key serve the operator certificate; a half or wrong pair stops start-up (exit 2)', { skip, timeout: 120_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-tls-'));
  try {
    // A certificate made by an earlier --tls start serves as the operator's own.
    await withServer(dir, ['--tls'], () => {});
    const own = mkdtempSync(join(tmpdir(), 'stratus-tls-own-'));
    try {
      const cert = join(dir, 'tls', 'server.pem');
      const key = join(dir, 'tls', 'server-key.pem');
      await withServer(own, ['--tls-cert', cert, '--tls-key', key], (srv) => {
        assert.match(srv.base, /^https:/);
        const res = curl(['--cacert', join(dir, 'tls', 'ca.pem'), `https://localhost:${portOf(srv)}/api/2.0/cloud_status/`]);
        assert.equal(res.status, '200', res.body);
      });
      const half = stratus(['serve', '--db', ':memory:', '--port', '0', '--tls-cert', cert]);
      assert.equal(half.status, 2, half.stderr);
      assert.match(half.stderr, /tls-cert and tls-key/);
      const wrong = stratus(['serve', '--db', ':memory:', '--port', '0', '--tls-cert', cert, '--tls-key', join(dir, 'tls', 'ca-key.pem')]);
      assert.equal(wrong.status, 2, wrong.stderr);
      assert.match(wrong.stderr, /tls-key/);
      const missing = stratus(['serve', '--db', ':memory:', '--port', '0', '--tls-cert', join(dir, 'nope.pem'), '--tls-key', key]);
      assert.equal(missing.status, 2, missing.stderr);
      assert.match(missing.stderr, /tls-cert/);
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
