import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { startServer, type TestServer } from '../helpers/server.js';
import type { Client } from '../helpers/client.js';
import { expectError } from '../helpers/errors.js';
import { WEBHOOKS } from '../../src/resources/notifications/webhooks.js';
import { NOT_ALLOWED, UNREACHABLE } from '../../src/notify/webhook.js';
import { PRIVATE_DESTINATION } from '../../src/resources/notifications/destinations.js';
import type { Resolver } from '../../src/core/context.js';

/**
 * Webhooks are not an SSRF or port-scan tool: local destinations are refused when a webhook is written (its
 * URL's text) and when a delivery connects (the address the name resolves to), and no failure tells a closed
 * port from an open one. `strict` has the default settings and a DNS of its own; `dev` allows private
 * destinations (`--webhooks-allow-private`), as local development does.
 */
let strict: TestServer;
let dev: TestServer;
let listener: Awaited<ReturnType<typeof receiver>>;

/** An HTTP receiver on loopback that counts connections as well as requests: "nothing reached it" means no TCP. */
async function receiver() {
  const seen = { connections: 0, requests: 0 };
  const server = http.createServer((req, res) => {
    seen.requests++;
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  });
  server.on('connection', () => seen.connections++);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as net.AddressInfo).port;
  return { port, seen, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** A TCP listener that is not HTTP: `banner` answers with an SSH-like greeting, else it hangs up at once. */
async function tcpListener(mode: 'banner' | 'hangup') {
  const server = net.createServer((sock) => {
    if (mode === 'hangup') return sock.destroy();
    // Read what comes (as a real service would), or the client's close is never seen and close() waits forever.
    sock.on('error', () => {}).resume();
    sock.end('SSH-2.0-OpenSSH_9.6\r\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as net.AddressInfo).port;
  return { port, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** A loopback port nothing listens on (one that was just free). */
async function closedPort(): Promise<number> {
  const t = await tcpListener('hangup');
  await t.close();
  return t.port;
}

/** Public-looking names that resolve to local addresses (what a rebinding DNS does). */
const DNS: Record<string, { address: string; family: number }[]> = {
  'rebind.example.com': [{ address: '127.0.0.1', family: 4 }],
  'mixed.example.com': [
    { address: '93.184.215.14', family: 4 },
    { address: '10.0.0.1', family: 4 },
  ],
  'mapped.example.com': [{ address: '::ffff:169.254.169.254', family: 6 }],
};
const resolve: Resolver = async (host) => {
  const found = DNS[host];
  if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return found;
};

before(async () => {
  listener = await receiver();
  strict = await startServer({}, undefined, { resolve });
  dev = await startServer({ 'webhooks-allow-private': 'true' });
});
after(async () => {
  await strict.close();
  await dev.close();
  await listener.close();
});

/** Queues a test delivery of the webhook, runs the worker once, and answers the webhook and its last delivery. */
async function deliverTest(srv: TestServer, u: Client, uuid: string) {
  const res = await u.post(`webhooks/${uuid}/action/?do=test`, {});
  assert.equal(res.status, 202, res.text);
  await srv.app.notifier.runDue();
  const hook = (await u.get(`webhooks/${uuid}/`)).json;
  const [delivery] = (await u.get(`webhooks/${uuid}/deliveries/`)).json.objects;
  return { hook, delivery };
}

async function created(u: Client, url: string): Promise<string> {
  const res = await u.post('webhooks/', { url });
  assert.equal(res.status, 201, res.text);
  return res.json.objects[0].uuid;
}

describe('webhook destinations', () => {
  test('create and update refuse local destinations however the address is written: 400 on url', async () => {
    const u = await strict.user();
    for (const url of [
      'http://127.0.0.1/',
      'http://localhost:1234/',
      'http://localhost./',
      'http://app.localhost/',
      'http://127.1/',
      'http://2130706433/',
      'http://0x7f.1/',
      'http://0177.0.0.1/',
      'http://0/',
      'http://[::1]/',
      'http://[::]/',
      'http://[::ffff:127.0.0.1]/',
      'http://169.254.169.254/latest/meta-data',
      'http://metadata.google.internal/computeMetadata/v1/',
      'http://[fd00:ec2::254]/',
      'http://10.0.0.1/',
      'http://172.16.0.1/',
      'http://192.168.1.1/',
      'http://100.64.0.1/',
      'http://[fe80::1]/',
      'http://[fc00::1]/',
    ]) {
      const res = await u.post('webhooks/', { url });
      expectError(res, 400, 'validation', 'url');
      assert.equal(res.json[0].error_message, PRIVATE_DESTINATION, url);
    }
    expectError(await u.post('webhooks/', { url: 'https://user:secret@hooks.example.com/' }), 400, 'validation', 'url');
    expectError(await u.post('webhooks/', { url: 'gopher://hooks.example.com/' }), 400, 'validation', 'url');
    assert.equal((await u.get('webhooks/')).json.meta.total_count, 0);

    // A public name is accepted (no DNS at create time); changing it to a local address is refused and changes nothing.
    const uuid = await created(u, 'https://hooks.example.com/stratus');
    expectError(await u.put(`webhooks/${uuid}/`, { url: 'http://127.1:8080/' }), 400, 'validation', 'url');
    expectError(await u.put(`webhooks/${uuid}/`, { url: 'http://[::ffff:a9fe:a9fe]/' }), 400, 'validation', 'url');
    assert.equal((await u.get(`webhooks/${uuid}/`)).json.url, 'https://hooks.example.com/stratus');
  });

  test('a name that resolves to a local address is refused at delivery, for good; the listener sees no connection', async () => {
    const u = await strict.user();
    const before = { ...listener.seen };
    for (const host of ['rebind.example.com', 'mixed.example.com', 'mapped.example.com']) {
      const uuid = await created(u, `http://${host}:${listener.port}/hook`);
      const { hook, delivery } = await deliverTest(strict, u, uuid);
      assert.equal(hook.last_status, 'failing', host);
      assert.equal(hook.last_error, NOT_ALLOWED, host);
      // Permanent: no retry is scheduled.
      assert.equal(delivery.state, 'failed', host);
      assert.equal(delivery.attempts, 1, host);
      assert.equal(delivery.next_attempt_at, null, host);
      assert.equal(delivery.last_error, NOT_ALLOWED, host);
    }
    await strict.advance(3_600_000);
    await strict.app.notifier.runDue();
    assert.deepEqual(listener.seen, before);
  });

  test('a stored webhook with a literal local address (made before the check) is refused at delivery too', async () => {
    const u = await strict.user();
    const uuid = await created(u, 'https://hooks.example.com/old');
    const url = `http://127.0.0.1:${listener.port}/hook`;
    await strict.services.store.transaction((tx) =>
      strict.services.store.resources.patch(tx, strict.clock.now(), WEBHOOKS, uuid, (body) => ({ ...body, url })),
    );
    const before = { ...listener.seen };
    const { hook, delivery } = await deliverTest(strict, u, uuid);
    assert.equal(hook.last_error, NOT_ALLOWED);
    assert.equal(delivery.state, 'failed');
    assert.deepEqual(listener.seen, before);
  });

  test('a name that does not resolve is an ordinary failure: retried, with the one generic message', async () => {
    const u = await strict.user();
    const uuid = await created(u, 'https://nowhere.example.com/hook');
    const { hook, delivery } = await deliverTest(strict, u, uuid);
    assert.equal(hook.last_error, UNREACHABLE);
    assert.equal(delivery.state, 'pending');
  });

  test('with --webhooks-allow-private, loopback receivers are accepted and delivered to (the default refuses them)', async () => {
    const url = `http://127.0.0.1:${listener.port}/hook`;
    expectError(await (await strict.user()).post('webhooks/', { url }), 400, 'validation', 'url');
    const u = await dev.user();
    const before = listener.seen.requests;
    const { hook, delivery } = await deliverTest(dev, u, await created(u, url));
    assert.equal(hook.last_status, 'ok', hook.last_error);
    assert.equal(delivery.state, 'sent');
    assert.equal(listener.seen.requests, before + 1);
    // `localhost` too.
    const { hook: named } = await deliverTest(dev, u, await created(u, `http://localhost:${listener.port}/hook`));
    assert.equal(named.last_status, 'ok', named.last_error);
  });
});

describe('webhook errors tell nothing of the network', () => {
  test('a closed port, a non-HTTP port, a port that hangs up and a TLS mismatch give the same last_error; HTTP answers keep their status', async () => {
    const banner = await tcpListener('banner');
    const hangup = await tcpListener('hangup');
    const http500 = http.createServer((_req, res) => res.writeHead(500).end());
    await new Promise<void>((r) => http500.listen(0, '127.0.0.1', () => r()));
    try {
      const u = await dev.user();
      const urls = {
        closed: `http://127.0.0.1:${await closedPort()}/hook`,
        ssh: `http://127.0.0.1:${banner.port}/hook`,
        hangup: `http://127.0.0.1:${hangup.port}/hook`,
        tls: `https://127.0.0.1:${listener.port}/hook`,
      };
      for (const [what, url] of Object.entries(urls)) {
        const { hook, delivery } = await deliverTest(dev, u, await created(u, url));
        assert.equal(hook.last_error, UNREACHABLE, what);
        assert.equal(delivery.last_error, UNREACHABLE, what);
        assert.equal(delivery.state, 'pending', `${what}: retried like any failure`);
      }
      const { hook } = await deliverTest(dev, u, await created(u, `http://127.0.0.1:${(http500.address() as net.AddressInfo).port}/`));
      assert.equal(hook.last_error, 'receiver answered HTTP 500');
    } finally {
      await banner.close();
      await hangup.close();
      await new Promise<void>((r) => http500.close(() => r()));
    }
  });
});
