import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { setPassword } from '../../src/resources/users/users.js';
import { Client } from '../helpers/client.js';
import { startServer, type TestServer } from '../helpers/server.js';
import { twoServeProcesses } from '../helpers/process.js';
import { curl, digestChallenge, digestHeader, freshChallenge, headerLines } from '../helpers/auth.js';
import { needs } from '../helpers/skips.js';

let srv: TestServer;

before(async () => {
  srv = await startServer({ 'rate-limits': 'off' });
});
after(() => srv.close());

const PROFILE = '/api/2.0/profile/';

/** A user and a helper that sends one Digest-signed request. */
async function digestUser() {
  const u = await srv.user();
  const send = (method: string, path: string, header: string, body?: unknown) =>
    srv.anon().request(method, path, { headers: { authorization: header }, ...(body !== undefined ? { body } : {}) });
  return { u, send };
}

describe('HTTP Digest: the challenge', () => {
  test('a 401 offers Basic and Digest as two WWW-Authenticate headers, Digest as reference 4.2 shows it', async () => {
    const res = await srv.anon().get('profile/');
    assert.equal(res.status, 401);
    const lines = headerLines(res, 'www-authenticate');
    assert.equal(lines.length, 2);
    assert.match(lines[0], /^Basic realm="users"$/);
    assert.match(lines[1], /^Digest /);
    const c = digestChallenge(res);
    assert.equal(c.realm, 'users');
    assert.equal(c.qop, 'auth');
    assert.equal(c.algorithm, 'MD5');
    assert.match(c.nonce, /^\d+\.\d{2}:[0-9a-f]+:[0-9a-f]{32}$/);
    assert.match(c.opaque, /^[0-9a-f]{40}$/);
    assert.equal(c.stale, undefined);
    assert.ok(Array.isArray(res.json));
    assert.equal(res.json[0].error_type, 'permission');
  });

  test('every challenge carries a new nonce', async () => {
    const a = await freshChallenge(srv.anon());
    const b = await freshChallenge(srv.anon());
    assert.notEqual(a.nonce, b.nonce);
    assert.notEqual(a.opaque, b.opaque);
  });
});

describe('HTTP Digest: our own computed headers', () => {
  test('good: the right response authenticates; nc counts up on one nonce; other methods and bodies too', async () => {
    const { u, send } = await digestUser();
    const { nonce, opaque } = await freshChallenge(srv.anon());
    for (let nc = 1; nc <= 3; nc++) {
      const res = await send('GET', PROFILE, digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque, nc }));
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json.uuid, u.uuid);
    }
    // A skipped counter value is fine (it only has to grow).
    const uri = '/api/2.0/tags/';
    const created = await send('POST', uri, digestHeader({ username: u.email, password: u.password, method: 'POST', uri, nonce, opaque, nc: 7 }), {
      name: 'digest-tag',
    });
    assert.equal(created.status, 201, created.text);
    // The query string is part of the signed uri.
    const q = '/api/2.0/tags/?limit=1';
    const listed = await send('GET', q, digestHeader({ username: u.email, password: u.password, method: 'GET', uri: q, nonce, opaque, nc: 8 }));
    assert.equal(listed.status, 200, listed.text);
    assert.equal(listed.json.meta.limit, 1);
  });

  test('wrong password: 401 with a fresh, non-stale challenge', async () => {
    const { u, send } = await digestUser();
    const { nonce, opaque } = await freshChallenge(srv.anon());
    const res = await send(
      'GET',
      PROFILE,
      digestHeader({ username: u.email, password: 'not-the-password', method: 'GET', uri: PROFILE, nonce, opaque, nc: 1 }),
    );
    assert.equal(res.status, 401);
    const c = digestChallenge(res);
    assert.equal(c.stale, undefined);
    assert.notEqual(c.nonce, nonce);
    // Unknown user: the same answer.
    const nobody = await send(
      'GET',
      PROFILE,
      digestHeader({ username: 'nobody@example.com', password: 'x', method: 'GET', uri: PROFILE, nonce, opaque, nc: 1 }),
    );
    assert.equal(nobody.status, 401);
  });

  test('replayed nc: the same or a lower counter on a nonce is refused; a higher one still works', async () => {
    const { u, send } = await digestUser();
    const { nonce, opaque } = await freshChallenge(srv.anon());
    const header = digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque, nc: 5, cnonce: 'abc123' });
    assert.equal((await send('GET', PROFILE, header)).status, 200);
    const replay = await send('GET', PROFILE, header);
    assert.equal(replay.status, 401);
    assert.equal(digestChallenge(replay).stale, undefined);
    const lower = await send('GET', PROFILE, digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque, nc: 4 }));
    assert.equal(lower.status, 401);
    const zero = await send('GET', PROFILE, digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque, nc: 0 }));
    assert.equal(zero.status, 401);
    const higher = await send('GET', PROFILE, digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque, nc: 6 }));
    assert.equal(higher.status, 200);
  });

  test('concurrent requests with one nc: exactly one succeeds', async () => {
    const { u, send } = await digestUser();
    const { nonce, opaque } = await freshChallenge(srv.anon());
    const header = digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque, nc: 1, cnonce: 'same' });
    const results = await Promise.all(Array.from({ length: 8 }, () => send('GET', PROFILE, header)));
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 401, 401, 401, 401, 401, 401, 401]);
  });

  test('stale nonce: after the nonce lifetime (300 s, injected clock) a right response gets 401 stale=true; the new nonce works', async () => {
    const { u, send } = await digestUser();
    const { nonce, opaque } = await freshChallenge(srv.anon());
    assert.equal(
      (await send('GET', PROFILE, digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque, nc: 1 }))).status,
      200,
    );
    srv.clock.advance(301_000);
    const stale = await send('GET', PROFILE, digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque, nc: 2 }));
    assert.equal(stale.status, 401);
    const c = digestChallenge(stale);
    assert.equal(c.stale, 'true');
    // A wrong password on a stale nonce is just wrong (stale=true only for a right response, RFC 7616).
    const wrong = await send('GET', PROFILE, digestHeader({ username: u.email, password: 'nope-nope', method: 'GET', uri: PROFILE, nonce, opaque, nc: 3 }));
    assert.equal(wrong.status, 401);
    assert.equal(digestChallenge(wrong).stale, undefined);
    const retry = await send(
      'GET',
      PROFILE,
      digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce: c.nonce, opaque: c.opaque, nc: 1 }),
    );
    assert.equal(retry.status, 200);
  });

  test("tampered opaque: refused (another nonce's opaque, a changed one, none)", async () => {
    const { u, send } = await digestUser();
    const a = await freshChallenge(srv.anon());
    const b = await freshChallenge(srv.anon());
    const flipped = (a.opaque[0] === '0' ? '1' : '0') + a.opaque.slice(1);
    for (const opaque of [b.opaque, flipped, undefined, '']) {
      const res = await send(
        'GET',
        PROFILE,
        digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce: a.nonce, opaque, nc: 1 }),
      );
      assert.equal(res.status, 401, String(opaque));
    }
    // The untouched pair still works (the refusals did not burn its counter).
    const ok = await send(
      'GET',
      PROFILE,
      digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce: a.nonce, opaque: a.opaque, nc: 1 }),
    );
    assert.equal(ok.status, 200);
  });

  test('tampered nonce: a changed MAC, a changed timestamp, an invented nonce are refused and never stale', async () => {
    const { u, send } = await digestUser();
    const { nonce, opaque } = await freshChallenge(srv.anon());
    const [ts, rand, mac] = nonce.split(':');
    const future = `${(Number(ts) + 1000).toFixed(2)}:${rand}:${mac}`;
    const badMac = `${ts}:${rand}:${(mac[0] === 'a' ? 'b' : 'a') + mac.slice(1)}`;
    for (const n of [future, badMac, '1363185031.81:FCF2:443b657bfd1a7340a0841c704d93a579', 'plain-nonce']) {
      const res = await send('GET', PROFILE, digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce: n, opaque, nc: 1 }));
      assert.equal(res.status, 401, n);
      assert.equal(digestChallenge(res).stale, undefined, n);
    }
  });

  test('wrong realm, uri that does not match the request, method mismatch: refused', async () => {
    const { u, send } = await digestUser();
    const { nonce, opaque } = await freshChallenge(srv.anon());
    const base = { username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque };
    let nc = 1;
    // Wrong realm (HA1 computed for it too).
    assert.equal((await send('GET', PROFILE, digestHeader({ ...base, realm: 'other', nc: nc++ }))).status, 401);
    // Signed for another URL, sent to this one.
    assert.equal((await send('GET', PROFILE, digestHeader({ ...base, uri: '/api/2.0/tags/', nc: nc++ }))).status, 401);
    // The query string must match too.
    assert.equal((await send('GET', `${PROFILE}?format=json`, digestHeader({ ...base, nc: nc++ }))).status, 401);
    // Signed as GET, sent as POST.
    assert.equal((await send('POST', '/api/2.0/tags/', digestHeader({ ...base, uri: '/api/2.0/tags/', nc: nc++ }), { name: 'x' })).status, 401);
    // The absolute-URI form of the request target is accepted.
    const abs = `${srv.base}${PROFILE}`;
    assert.equal((await send('GET', PROFILE, digestHeader({ ...base, uri: abs, nc }))).status, 200);
  });

  test('unsupported or malformed parameters: refused with a challenge', async () => {
    const { u, send } = await digestUser();
    const { nonce, opaque } = await freshChallenge(srv.anon());
    const base = { username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque, nc: 1 };
    for (const header of [
      digestHeader({ ...base, algorithm: 'SHA-256' }),
      digestHeader({ ...base, qop: null }), // RFC 2069 style: no nc, no replay protection
      digestHeader({ ...base, qop: 'auth-int' }),
      'Digest',
      'Digest username="x"',
      'Digest username="a", username="b", realm="users", nonce="n", uri="/", response="r"',
      `Digest username=${u.email}, garbage`,
    ]) {
      const res = await send('GET', PROFILE, header);
      assert.equal(res.status, 401, header);
      assert.equal(headerLines(res, 'www-authenticate').length, 2);
    }
    assert.equal((await send('GET', PROFILE, digestHeader(base))).status, 200);
  });

  test('a changed password changes HA1: the old one fails, the new one works', async () => {
    const { u, send } = await digestUser();
    await setPassword(srv.services, u.email, 'changed-password-1');
    const { nonce, opaque } = await freshChallenge(srv.anon());
    assert.equal(
      (await send('GET', PROFILE, digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque, nc: 1 }))).status,
      401,
    );
    assert.equal(
      (await send('GET', PROFILE, digestHeader({ username: u.email, password: 'changed-password-1', method: 'GET', uri: PROFILE, nonce, opaque, nc: 2 })))
        .status,
      200,
    );
  });

  test('two API processes on one database: a nonce from one works on the other, and its nc cannot be replayed there', async () => {
    // Two real `stratus serve` processes: nothing shared but the database (the nonce key, the nc records).
    const two = await twoServeProcesses();
    try {
      const [one, there] = [new Client(two.a.base), new Client(two.b.base)];
      const header = (nonce: string, opaque: string, nc: number) =>
        digestHeader({ username: two.email, password: two.password, method: 'GET', uri: PROFILE, nonce, opaque, nc });
      const { nonce, opaque } = await freshChallenge(one);
      assert.equal((await there.get(PROFILE, { authorization: header(nonce, opaque, 1) })).status, 200, 'a nonce of the first works on the second');
      assert.equal((await one.get(PROFILE, { authorization: header(nonce, opaque, 1) })).status, 401, 'replayed on the first process');
      assert.equal((await one.get(PROFILE, { authorization: header(nonce, opaque, 2) })).status, 200);
      assert.equal((await there.get(PROFILE, { authorization: header(nonce, opaque, 2) })).status, 401, 'replayed on the second process');
    } finally {
      await two.close();
    }
  });
});

describe('HTTP Digest: a real client (curl --digest)', () => {
  test('curl authenticates (GET, several URLs on one connection, POST) and is refused with a wrong password', async () => {
    const u = await srv.user();
    const url = `${srv.base}${PROFILE}`;
    const one = await curl(['--digest', '-u', `${u.email}:${u.password}`, url]);
    assert.deepEqual(one.status, [200]);
    assert.ok(one.body.includes(u.uuid));
    // Three URLs on one connection, each answered after its own challenge.
    const three = await curl(['--digest', '-u', `${u.email}:${u.password}`, url, `${srv.base}/api/2.0/tags/`, url]);
    assert.deepEqual(three.status, [200, 200, 200]);
    const post = await curl([
      '--digest',
      '-u',
      `${u.email}:${u.password}`,
      '-H',
      'content-type: application/json',
      '-d',
      '{"name":"from-curl"}',
      `${srv.base}/api/2.0/tags/`,
    ]);
    assert.deepEqual(post.status, [201]);
    const wrong = await curl(['--digest', '-u', `${u.email}:wrong-password`, url]);
    assert.deepEqual(wrong.status, [401]);
  });

  test('after the nonce lifetime curl is told stale and the next request gets a fresh nonce', async () => {
    const u = await srv.user();
    const url = `${srv.base}${PROFILE}`;
    assert.deepEqual((await curl(['--digest', '-u', `${u.email}:${u.password}`, url])).status, [200]);
    srv.clock.advance(400_000);
    // A fresh curl process starts with a new challenge anyway: it must simply work.
    assert.deepEqual((await curl(['--digest', '-u', `${u.email}:${u.password}`, url])).status, [200]);
  });
});

/** Python requests' HTTPDigestAuth, when this machine has it (it reuses a nonce with a growing nc). */
const PY = `
import sys, requests
from requests.auth import HTTPDigestAuth
s = requests.Session()
s.auth = HTTPDigestAuth(sys.argv[2], sys.argv[3])
print(" ".join(str(s.get(sys.argv[1]).status_code) for _ in range(4)))
`;

describe('HTTP Digest: a real client (Python requests)', () => {
  test('a session reuses one nonce with nc 1, 2, 3, 4', { skip: needs('python3-requests') }, async () => {
    const u = await srv.user();
    // Asynchronously: the server answers from this very process.
    const out = await new Promise<string>((resolve, reject) =>
      execFile('/usr/bin/python3', ['-c', PY, `${srv.base}${PROFILE}`, u.email, u.password], { timeout: 30_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(stderr || err.message)) : resolve(stdout),
      ),
    );
    assert.equal(out.trim(), '200 200 200 200');
    const counters = await srv.services.store.db.selectFrom('digest_nonces').select('max_nc').execute();
    assert.ok(
      counters.some((r) => Number(r.max_nc) === 4),
      JSON.stringify(counters),
    );
  });
});

describe('HTTP Digest: configuration', () => {
  test('--digest-nonce-ttl shortens the nonce lifetime', async () => {
    const short = await startServer({ 'rate-limits': 'off', 'digest-nonce-ttl': '30' });
    try {
      const u = await short.user();
      const { nonce, opaque } = await freshChallenge(short.anon());
      const h = (nc: number) => digestHeader({ username: u.email, password: u.password, method: 'GET', uri: PROFILE, nonce, opaque, nc });
      assert.equal((await short.anon().get(PROFILE, { authorization: h(1) })).status, 200);
      short.clock.advance(31_000);
      const res = await short.anon().get(PROFILE, { authorization: h(2) });
      assert.equal(res.status, 401);
      assert.equal(digestChallenge(res).stale, 'true');
    } finally {
      await short.close();
    }
  });
});
