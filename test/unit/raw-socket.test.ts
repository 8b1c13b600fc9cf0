/**
 * The rule for sockets held outside Fastify (src/http/raw-socket.ts): what the helper does to a socket, and
 * that the lint finds a raw path that does not go through it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { holdSocket, isHeld, onUpgrade, refuseSocket, releaseSocket } from '../../src/http/raw-socket.js';

// The clone itself (the suites may run from a build folder, where bin/ is a link back to it).
const root = `${dirname(realpathSync(fileURLToPath(new URL('../../bin', import.meta.url))))}/`;

/** A connected pair on loopback: the server's side and the client's. */
async function pair(): Promise<{ server: net.Socket; client: net.Socket; close: () => void }> {
  const listener = net.createServer();
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  const accepted = new Promise<net.Socket>((r) => listener.once('connection', r));
  const client = net.connect((listener.address() as net.AddressInfo).port, '127.0.0.1');
  client.on('error', () => undefined);
  const server = await accepted;
  return { server, client, close: () => (client.destroy(), server.destroy(), listener.close()) };
}

test('a held socket that meets a reset is destroyed, and nothing throws', async () => {
  const { server, client, close } = await pair();
  holdSocket(server, 60_000);
  assert.ok(isHeld(server));
  const closed = new Promise((r) => server.once('close', r));
  client.resetAndDestroy();
  await closed;
  assert.ok(server.destroyed);
  close();
});

test('a held socket is destroyed at its deadline, unless released first', async () => {
  const a = await pair();
  holdSocket(a.server, 30);
  await new Promise((r) => a.server.once('close', r));
  a.close();
  const b = await pair();
  holdSocket(b.server, 30);
  releaseSocket(b.server);
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(b.server.destroyed, false);
  b.close();
});

test('a refused socket sends its answer whole and lingers: the client reads it, then the socket closes', async () => {
  const { server, client, close } = await pair();
  let got = '';
  client.on('data', (d) => (got += d));
  // The client is still sending when it is refused.
  client.write('GET /websocket HTTP/1.1\r\n');
  refuseSocket(server, 'HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]');
  client.write('X-More: still sending\r\n\r\n');
  await new Promise((r) => client.once('end', r));
  assert.match(got, /^HTTP\/1\.1 401 [^]*\r\n\r\n\[\]$/);
  client.end();
  await new Promise((r) => server.once('close', r));
  close();
});

test('onUpgrade holds the socket before the handler, and a handler that throws or rejects closes that socket only', async () => {
  const server = http.createServer();
  const seen: boolean[] = [];
  let n = 0;
  onUpgrade(server, (_req, socket) => {
    seen.push(isHeld(socket));
    if (n++ === 0) throw new Error('thrown');
    return Promise.reject(new Error('rejected'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  for (let i = 0; i < 2; i++) {
    const c = net.connect(port, '127.0.0.1');
    c.on('error', () => undefined);
    c.write('GET /websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    await new Promise((r) => c.once('close', r));
  }
  assert.deepEqual(seen, [true, true]);
  server.close();
});

test("the lint refuses an 'upgrade' listener outside src/http/raw-socket.ts", async () => {
  const eslint = new ESLint({ cwd: root });
  const code = "import http from 'node:http';\nexport const s = http.createServer();\ns.on('upgrade', () => undefined);\ns.once('request', () => undefined);\n";
  const [raw] = await eslint.lintText(code, { filePath: `${root}src/http/some-feature.ts` });
  const found = raw.messages.filter((m) => m.ruleId === 'no-restricted-syntax');
  assert.equal(found.length, 1, JSON.stringify(raw.messages));
  assert.equal(found[0].line, 3);
  assert.match(found[0].message, /onUpgrade \(src\/http\/raw-socket\.ts\)/);
});
