import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import { deflateSync, gzipSync } from 'node:zlib';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { resourcePaths } from '../../src/http/resource-routes.js';
import { registry } from '../../src/registry.js';

/**
 * Regressions of the HTTP edges (src/http/edges.ts and friends): inherited members as action names,
 * `limit=0` with an offset, bodies the service never reads, and failures before routing — each answered
 * as the API's error array, never a 500, a foreign JSON object or a stalled connection.
 */
let srv: TestServer;
let u: Client & { uuid: string };
let auth: string;
let drive: { uuid: string };
let server: { uuid: string };

before(async () => {
  srv = await startServer();
  u = await srv.user();
  auth = u.authHeader().authorization;
  drive = (await u.post('drives/', { media: 'disk', name: 'd', size: 1 << 30 })).json.objects[0];
  server = (await u.post('servers/', { cpu: 1000, mem: 536870912, name: 's', vnc_password: 'x' })).json.objects[0];
});
after(() => srv.close());

function assertErrorArray(text: string, type: string, point: string | null) {
  const body = JSON.parse(text);
  assert.ok(Array.isArray(body), text);
  assert.equal(body.length, 1);
  assert.deepEqual(Object.keys(body[0]).sort(), ['error_message', 'error_point', 'error_type']);
  assert.equal(body[0].error_type, type, text);
  assert.equal(body[0].error_point, point, text);
}

describe('action names are own keys of the action table', () => {
  for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf'])
    for (const kind of ['drives', 'servers'] as const)
      test(`${kind} do=${name} -> 400 validation at "do"`, async () => {
        const uuid = kind === 'drives' ? drive.uuid : server.uuid;
        const res = await u.post(`${kind}/${uuid}/action/?do=${encodeURIComponent(name)}`);
        assert.equal(res.status, 400, res.text);
        assertErrorArray(res.text, 'validation', 'do');
      });
});

describe('limit=0 with an offset', () => {
  test('every list route answers 200 for limit=0&offset=1 and for a huge offset', async () => {
    const lists = resourcePaths(registry, srv.services)
      .filter((p) => !p.url.includes(':uuid') && p.methods.GET && !p.url.endsWith('schema/'))
      .map((p) => p.url);
    assert.ok(lists.length > 10);
    for (const url of lists)
      for (const q of ['limit=0&offset=1', 'limit=0&offset=999999', 'limit=1&offset=1']) {
        const res = await u.get(`${url}?${q}`);
        // Singletons (profile, capabilities) ignore paging; lists answer an envelope.
        assert.equal(res.status, 200, `${url}?${q}: ${res.text.slice(0, 300)}`);
      }
  });

  test('the page is right: all objects after the offset, with the full total', async () => {
    const c = await srv.user();
    await c.post('tags/', [{ name: 'a' }, { name: 'b' }, { name: 'c' }]);
    const all = (await c.get('tags/?limit=0')).json;
    assert.equal(all.meta.total_count, 3);
    const res = (await c.get('tags/?limit=0&offset=1')).json;
    assert.deepEqual(res.meta, { limit: 0, offset: 1, total_count: 3 });
    assert.deepEqual(
      res.objects.map((o: { uuid: string }) => o.uuid),
      all.objects.slice(1).map((o: { uuid: string }) => o.uuid),
    );
    const past = (await c.get('tags/?limit=0&offset=5')).json;
    assert.deepEqual([past.meta.total_count, past.objects.length], [3, 0]);
  });

  test('the audit log pages the same way', async () => {
    const c = await srv.user();
    for (const name of ['x', 'y', 'z']) await c.post('drives/', { media: 'disk', name, size: 1 << 30 });
    const all = (await c.get('logs/?limit=0')).json;
    assert.ok(all.meta.total_count >= 2, JSON.stringify(all.meta));
    const res = (await c.get('logs/?limit=0&offset=1')).json;
    assert.equal(res.meta.total_count, all.meta.total_count);
    assert.deepEqual(res.objects, all.objects.slice(1));
  });
});

/**
 * How long a connection may stay silent before a test calls it stalled: a deadline for an event (an answer,
 * the close), not a bound on how fast a correct answer comes. Generous, so a loaded machine never trips it.
 */
const ANSWER_DEADLINE_MS = 60_000;

/**
 * Sends `first`, waits for its answer, then sends `second` on the same connection and waits for its answer;
 * when the first answer says `connection: close`, waits for the close instead. Each wait ends at the deadline.
 */
function twoOnOneConnection(first: Buffer, second: string): Promise<{ first: string; complete: boolean; second: string | null; closed: boolean }> {
  return new Promise((resolve) => {
    const s = net.connect(srv.port, '127.0.0.1');
    let buf = '';
    let firstAnswer: string | null = null;
    const finish = (second: string | null, closed: boolean) => {
      clearTimeout(timer);
      s.destroy();
      resolve({ first: firstAnswer ?? buf, complete: firstAnswer !== null, second, closed });
    };
    const timer = setTimeout(() => finish(null, false), ANSWER_DEADLINE_MS);
    s.on('error', () => {});
    s.on('close', () => finish(null, true));
    s.on('data', (d) => {
      buf += d.toString('latin1');
      const answers = buf.split(/(?=HTTP\/1\.1 \d{3} )/);
      if (firstAnswer === null && /\r\n\r\n/.test(answers[0])) {
        const m = /content-length: (\d+)/i.exec(answers[0]);
        const end = answers[0].indexOf('\r\n\r\n') + 4 + (m ? Number(m[1]) : 0);
        if (answers[0].length >= end || (/^HEAD/.test(first.toString('latin1', 0, 8)) && answers[0].length >= end - Number(m?.[1] ?? 0))) {
          firstAnswer = answers[0].slice(0, end);
          buf = buf.slice(firstAnswer.length);
          if (/\r\nconnection: close\r\n/i.test(firstAnswer)) return; // the server closes: no second request on it
          s.write(second);
        }
      } else if (firstAnswer !== null && /\r\n\r\n/.test(buf)) finish(buf, false);
    });
    s.write(first);
  });
}

const request = (line: string, headers: Record<string, string | number>, body: Buffer = Buffer.alloc(0)) =>
  Buffer.concat([
    Buffer.from(
      `${line} HTTP/1.1\r\nHost: x\r\n${Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('')}\r\n`,
    ),
    body,
  ]);

describe('a body the service does not read never stalls the connection', () => {
  const noise = randomBytes(256 * 1024);
  /**
   * Name, request line, headers, body; the status of the first answer; whether the service closes the
   * connection after it (a body it will not read in full is not drained: the answer says `connection: close`
   * and the socket closes) or keeps it open and answers a second request on it.
   */
  const cases: [string, string, Record<string, string>, Buffer, number, 'closes' | 'keeps'][] = [
    ['GET gzip (valid, 256 KiB)', 'GET /api/2.0/tags/', { 'Content-Encoding': 'gzip' }, gzipSync(noise), 200, 'keeps'],
    ['GET gzip (invalid, 256 KiB)', 'GET /api/2.0/tags/', { 'Content-Encoding': 'gzip' }, noise, 200, 'keeps'],
    ['GET deflate (valid, 256 KiB)', 'GET /api/2.0/tags/', { 'Content-Encoding': 'deflate' }, deflateSync(noise), 200, 'keeps'],
    ['GET deflate (invalid)', 'GET /api/2.0/tags/', { 'Content-Encoding': 'deflate' }, noise, 200, 'keeps'],
    ['HEAD gzip', 'HEAD /api/2.0/tags/', { 'Content-Encoding': 'gzip' }, gzipSync(noise), 200, 'keeps'],
    [
      'DELETE of one object, gzip, no content type',
      `DELETE /api/2.0/tags/00000000-0000-0000-0000-000000000000/`,
      { 'Content-Encoding': 'gzip' },
      gzipSync(noise),
      400,
      'closes',
    ],
    ['OPTIONS gzip', 'OPTIONS /api/2.0/tags/', { 'Content-Encoding': 'gzip' }, gzipSync(noise), 200, 'keeps'],
    ['GET of an unknown path, gzip', 'GET /api/2.0/nothing/', { 'Content-Encoding': 'gzip' }, gzipSync(noise), 404, 'keeps'],
    [
      '401 (no credentials), gzip',
      'POST /api/2.0/tags/',
      { 'Content-Encoding': 'gzip', 'Content-Type': 'application/json', noauth: '1' },
      gzipSync(noise),
      401,
      'keeps',
    ],
    ['405, gzip', 'PATCH /api/2.0/tags/', { 'Content-Encoding': 'gzip', 'Content-Type': 'application/json' }, gzipSync(noise), 405, 'keeps'],
    [
      '406, gzip',
      'POST /api/2.0/tags/',
      { 'Content-Encoding': 'gzip', 'Content-Type': 'application/json', Accept: 'text/html' },
      gzipSync(noise),
      406,
      'keeps',
    ],
    ['GET with a body over the body limit', 'GET /api/2.0/tags/', {}, Buffer.alloc(3 * 1024 * 1024, 32), 200, 'closes'],
    [
      '401 with a body over the body limit',
      'PUT /api/2.0/tags/00000000-0000-0000-0000-000000000000/',
      { noauth: '1', 'Content-Type': 'application/json' },
      Buffer.alloc(3 * 1024 * 1024, 32),
      401,
      'closes',
    ],
    ['413 (over the body limit)', 'POST /api/2.0/tags/', { 'Content-Type': 'application/json' }, Buffer.alloc(2 * 1024 * 1024, 32), 413, 'closes'],
    ['400 (broken gzip)', 'POST /api/2.0/tags/', { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' }, noise, 400, 'closes'],
    ['400 (unsupported encoding)', 'POST /api/2.0/tags/', { 'Content-Type': 'application/json', 'Content-Encoding': 'br' }, noise, 400, 'closes'],
  ];
  for (const [name, line, h, body, status, connection] of cases)
    test(name, async () => {
      const { noauth, ...headers } = h;
      const all = { ...(noauth ? {} : { Authorization: auth }), 'Content-Length': body.length, ...headers };
      const r = await twoOnOneConnection(request(line, all, body), `GET /api/2.0/tags/ HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\n\r\n`);
      assert.ok(r.complete, `no complete answer to the first request: ${r.first.slice(0, 200)}`);
      assert.match(r.first, new RegExp(`^HTTP/1\\.1 ${status} `));
      if (connection === 'closes') {
        // The service says so, and does: the socket closes before the deadline, with nothing more on it.
        assert.match(r.first, /\r\nconnection: close\r\n/i);
        assert.ok(r.closed, `the connection stayed open after connection: close (deadline ${ANSWER_DEADLINE_MS} ms)`);
        assert.equal(r.second, null);
      } else {
        assert.doesNotMatch(r.first, /\r\nconnection: close\r\n/i);
        // The second request is answered before the deadline (a stalled connection would hold it forever).
        assert.ok(r.second, `second request unanswered within ${ANSWER_DEADLINE_MS} ms (closed=${r.closed}); first: ${r.first.slice(0, 300)}`);
        assert.match(r.second!, /^HTTP\/1\.1 200 /);
      }
    });

  test('a chunked GET body of unknown length: answered, and the connection closed', async () => {
    const chunk = randomBytes(64 * 1024);
    const head = `GET /api/2.0/tags/ HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n`;
    const s = net.connect(srv.port, '127.0.0.1');
    s.on('error', () => {});
    const answer = await new Promise<string>((resolve) => {
      let buf = '';
      s.on('data', (d) => {
        buf += d.toString('latin1');
        if (/\r\n\r\n/.test(buf)) resolve(buf);
      });
      s.write(head);
      s.write(`${chunk.length.toString(16)}\r\n`);
      s.write(chunk);
      s.write('\r\n'); // and never the last chunk
    });
    s.destroy();
    assert.match(answer, /^HTTP\/1\.1 200 /);
    assert.match(answer, /\r\nconnection: close\r\n/i);
  });
});

describe('failures before routing are error arrays', () => {
  function raw(req: string | Buffer): Promise<string> {
    return new Promise((resolve) => {
      const s = net.connect(srv.port, '127.0.0.1');
      let buf = '';
      s.on('data', (d) => {
        buf += d.toString('latin1');
        const m = /content-length: (\d+)/i.exec(buf);
        const head = buf.indexOf('\r\n\r\n');
        if (m && head >= 0 && buf.length >= head + 4 + Number(m[1])) {
          s.destroy();
          resolve(buf);
        }
      });
      s.on('close', () => resolve(buf));
      s.on('error', () => {});
      s.write(req);
    });
  }
  const parse = (answer: string) => {
    const i = answer.indexOf('\r\n\r\n');
    const head = answer.slice(0, i);
    return { status: Number(head.slice(9, 12)), head, body: Buffer.from(answer.slice(i + 4), 'latin1').toString('utf8') };
  };

  test('a malformed %-escape in the path: 400 validation, JSON by default', async () => {
    const r = parse(await raw(`GET /api/2.0/tags/%zz/ HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\n\r\n`));
    assert.equal(r.status, 400);
    assert.match(r.head, /\r\nx-request-id: [0-9a-f-]{36}/i);
    assert.match(r.head, /\r\ncontent-type: application\/json/i);
    assertErrorArray(r.body, 'validation', null);
  });

  test('a malformed %-escape with ?format=xml or Accept: application/xml answers XML', async () => {
    for (const req of [
      `GET /api/2.0/tags/%zz/?format=xml HTTP/1.1\r\nHost: x\r\n\r\n`,
      `GET /api/2.0/drives/%E0%A4%A/ HTTP/1.1\r\nHost: x\r\nAccept: application/xml\r\n\r\n`,
    ]) {
      const r = parse(await raw(req));
      assert.equal(r.status, 400);
      assert.match(r.head, /\r\ncontent-type: application\/xml/i);
      assert.match(
        r.body,
        /^<\?xml[^>]*>\s*<objects><object type="hash"><error_message>.*<\/error_message><error_point type="null"\s*\/><error_type>validation<\/error_type><\/object><\/objects>/s,
      );
    }
  });

  test('a path parameter over 200 characters: 404 notexist', async () => {
    for (const path of [`tags/${'a'.repeat(250)}/`, `servers/${'0'.repeat(300)}/action/?do=start`]) {
      const res = await u.request(path.includes('action') ? 'POST' : 'GET', path);
      assert.equal(res.status, 404, res.text);
      assert.ok(res.headers['x-request-id']);
      assertErrorArray(res.text, 'notexist', null);
    }
  });

  test('2,000 header lines: 431 with the error array', async () => {
    const many = Array.from({ length: 2000 }, (_, i) => `X-Header-${i}: value-${i}\r\n`).join('');
    const r = parse(await raw(`GET /api/2.0/tags/ HTTP/1.1\r\nHost: x\r\n${many}\r\n`));
    assert.equal(r.status, 431);
    assert.match(r.head, /\r\nx-request-id: [0-9a-f-]{36}/i);
    assertErrorArray(r.body, 'validation', null);
  });

  test('a malformed HEAD request gets the headers of the 400 and no body, also after a pipelined request (answered first)', async () => {
    const headOnly = (answer: string) => {
      const i = answer.lastIndexOf('HTTP/1.1 400 ');
      assert.ok(i >= 0, answer);
      const rest = answer.slice(i);
      assert.match(rest, /\r\ncontent-length: \d+\r\n/i);
      assert.ok(rest.endsWith('\r\n\r\n'), `bytes after the headers: ${JSON.stringify(rest)}`);
    };
    const fresh = Buffer.from(`HEAD /api/2.0/tags/\xe9/ HTTP/1.1\r\nHost: x\r\n\r\n`, 'latin1');
    const pipelined = Buffer.from(
      `GET /api/2.0/tags/ HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Length: 5\r\n\r\nhelloHEAD /api/2.0/tags/\xe9/ HTTP/1.1\r\nHost: x\r\n\r\n`,
      'latin1',
    );
    for (const req of [fresh, pipelined]) {
      const answer = await new Promise<string>((resolve) => {
        const s = net.connect(srv.port, '127.0.0.1');
        let buf = '';
        s.on('data', (d) => (buf += d.toString('latin1')));
        s.on('close', () => resolve(buf));
        s.on('error', () => {});
        s.write(req);
      });
      headOnly(answer);
      // The pipelined GET before the bad request is answered first.
      if (req === pipelined) assert.match(answer, /^HTTP\/1\.1 200 OK\r\n[\s\S]*\r\n\r\n\{"meta"[^]*HTTP\/1\.1 400 /);
    }
  });

  test('an HTTP/1.1 request without Host: 400 with the error array (HTTP/1.0 needs none)', async () => {
    for (const req of [
      `GET /api/2.0/tags/ HTTP/1.1\r\nAuthorization: ${auth}\r\n\r\n`,
      `GET /nowhere/ HTTP/1.1\r\n\r\n`,
      `POST /api/2.0/tags/ HTTP/1.1\r\n\r\n`,
    ]) {
      const r = parse(await raw(req));
      assert.equal(r.status, 400, r.head);
      assert.match(r.head, /\r\nx-request-id: [0-9a-f-]{36}/i);
      assert.match(r.head, /\r\ncontent-type: application\/json/i);
      assertErrorArray(r.body, 'validation', null);
      assert.match(JSON.parse(r.body)[0].error_message, /Host/);
    }
    const xml = parse(await raw(`GET /api/2.0/tags/ HTTP/1.1\r\nAccept: application/xml\r\n\r\n`));
    assert.equal(xml.status, 400);
    assert.match(xml.body, /<error_type>validation<\/error_type>/);
    const old = parse(await raw(`GET /api/2.0/tags/ HTTP/1.0\r\nAuthorization: ${auth}\r\n\r\n`));
    assert.equal(old.status, 200, old.body);
  });

  test('garbage instead of HTTP: 400 with the error array', async () => {
    const r = parse(await raw('HELLO THERE\r\n\r\n'));
    assert.equal(r.status, 400);
    assert.match(r.head, /\r\nx-request-id: /i);
    assertErrorArray(r.body, 'validation', null);
  });
});

describe('a NUL in the path or the query ends the string (as in bodies)', () => {
  test('a %00 uuid is 404 notexist on every kind, never a database error', async () => {
    for (const kind of ['drives', 'servers', 'tags', 'acls', 'ips', 'vlans', 'jobs', 'libdrives', 'keypairs', 'pubkeys']) {
      const res = await u.get(`${kind}/%00/`);
      assert.equal(res.status, 404, `${kind}: ${res.text}`);
      assertErrorArray(res.text, 'notexist', null);
    }
  });

  test('filters and actions with a NUL', async () => {
    const res = await u.get('drives/?name=d%00junk&name__contains=%00&uuid=%00');
    assert.equal(res.status, 200, res.text);
    const act = await u.post(`servers/${server.uuid}/action/?do=%00start`);
    assert.equal(act.status, 400, act.text);
    assertErrorArray(act.text, 'validation', 'do');
  });
});
