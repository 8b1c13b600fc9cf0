import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { childEnv, serveProcess } from '../helpers/process.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { until } from '../helpers/until.js';

// The caller's STRATUS_* settings (a shell's, the runner's) never reach a `stratus` a test starts: a stray
// STRATUS_DATABASE_URL=mysql://… made every served process exit with 2 when childEnv passed them on.
test('a stratus child gets no STRATUS_* of the caller, only what the test sets', () => {
  process.env.STRATUS_DATABASE_URL = 'mysql://from-the-caller';
  try {
    const env = childEnv({ STRATUS_LOG_LEVEL: 'debug' });
    assert.deepEqual(
      Object.keys(env).filter((k) => k.startsWith('STRATUS_') && k !== 'STRATUS_ANSWER_CACHE_VERIFY'),
      // The helpers' own: the compiled program's code cache in a temporary folder (not the clone's dist/).
      ['STRATUS_CODE_CACHE_DIR', 'STRATUS_LOG_LEVEL'],
    );
    assert.notEqual(env.STRATUS_CODE_CACHE_DIR, undefined);
    assert.equal(env.PATH, process.env.PATH, 'the rest of the environment is kept');
  } finally {
    delete process.env.STRATUS_DATABASE_URL;
  }
});

/** Runs `fn` with STRATUS_ANSWER_CACHE_VERIFY as given (as `npm run test:verify` sets it for the whole run). */
async function withVerify<T>(value: string | undefined, fn: () => Promise<T>): Promise<T> {
  const was = process.env.STRATUS_ANSWER_CACHE_VERIFY;
  if (value === undefined) delete process.env.STRATUS_ANSWER_CACHE_VERIFY;
  else process.env.STRATUS_ANSWER_CACHE_VERIFY = value;
  try {
    return await fn();
  } finally {
    if (was === undefined) delete process.env.STRATUS_ANSWER_CACHE_VERIFY;
    else process.env.STRATUS_ANSWER_CACHE_VERIFY = was;
  }
}

test('the answer-cache verify mode of the run reaches a child (it checks answers, it changes none)', () =>
  withVerify('1', async () => {
    assert.equal(childEnv().STRATUS_ANSWER_CACHE_VERIFY, '1');
    assert.equal(childEnv({ STRATUS_ANSWER_CACHE_VERIFY: '0' }).STRATUS_ANSWER_CACHE_VERIFY, '0', 'what the test sets wins');
    await withVerify(undefined, async () => assert.equal('STRATUS_ANSWER_CACHE_VERIFY' in childEnv(), false));
  }));

const EMAIL = 'verify@example.com';
const BASIC = `Basic ${Buffer.from(`${EMAIL}:verify-secret`).toString('base64')}`;

/** One GET on a connection of its own (whichever worker accepts it first answers it). */
function get(port: number, path: string): Promise<{ status: number; worker: string; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, agent: false, headers: { authorization: BASIC } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, worker: String(res.headers['x-stratus-worker'] ?? ''), text }));
    });
    req.on('error', reject);
    req.end();
  });
}

// Every worker of a `serve --workers 2` verifies: each one's metrics count every answer it reused as verified.
test('under verify mode every worker of a served process makes its reused answers again', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'stratus-verify-'));
  try {
    const db = engine === 'sqlite' ? join(dir, 'stratus.db') : (await freshDatabase()).url;
    const srv = await withVerify('1', () =>
      serveProcess(['--db', db, '--workers', '2', '--ci', '--demo-login', `${EMAIL}:verify-secret`, '--rate-limits', 'off']),
    );
    const port = Number(new URL(srv.base).port);
    const counted = new Map<string, { reused: number; verified: number }>();
    await until('metrics of both workers with reused answers', async () => {
      // (Rounds until the metrics have come from each worker: which one answers a connection is the kernel's pick.)
      for (let i = 0; i < 2; i++) {
        const a = await get(port, '/api/2.0/tags/');
        assert.equal(a.status, 200, a.text);
      }
      const m = await get(port, '/_stratus/metrics');
      const count = (outcome: string) => Number(new RegExp(`stratus_answer_cache_answers\\{outcome="${outcome}"\\} (\\d+)`).exec(m.text)?.[1] ?? 0);
      counted.set(m.worker, { reused: count('reused'), verified: count('verified') });
      return counted.size === 2 && [...counted.values()].every((c) => c.reused > 0);
    });
    for (const [worker, c] of counted) assert.equal(c.verified, c.reused, `worker ${worker} verified every answer it reused`);
    srv.child.kill('SIGTERM');
    assert.equal(await srv.exited, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
