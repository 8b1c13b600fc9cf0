import { after, before, beforeEach, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type net from 'node:net';
import type { Ctx, Resolver } from '../../src/core/context.js';
import { Notifier } from '../../src/notify/worker.js';
import type { Mailer } from '../../src/resources/notifications/mail.js';
import { UNREACHABLE } from '../../src/notify/webhook.js';
import { openServices } from '../helpers/services.js';

/**
 * Webhook deliveries as the notification worker makes them, on the injected clock: a failing receiver is
 * retried on a doubling schedule and given up after 8 attempts; a deleted webhook's pending deliveries are
 * dropped without a call; a receiver that never answers costs one attempt, not a stuck worker. The expected
 * schedule is written out here, not computed from the code's own backoff function.
 */
let receiver: Awaited<ReturnType<typeof listen>>;

/** A loopback HTTP receiver whose answer the test sets: a status, or `hang` (accepts, never answers). */
async function listen() {
  const state = { answer: 204 as number | 'hang', requests: 0 };
  const hanging = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    state.requests++;
    req.resume();
    if (state.answer === 'hang') return void hanging.add(res);
    const status = state.answer;
    req.on('end', () => res.writeHead(status).end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as net.AddressInfo).port;
  const drop = () => {
    for (const res of hanging) res.destroy();
    hanging.clear();
  };
  return {
    state,
    port,
    drop,
    close: () => {
      drop();
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Mail is not the subject here. */
const noMail: Mailer = { kind: 'outbox', send: async () => ({ via: 'outbox', file: '' }), close: () => {} };
/** A public-looking name for the loopback receiver (what `--webhooks-allow-private` lets through). */
const resolve: Resolver = async (host) => {
  if (host === 'hooks.example.test') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
};
const TIMEOUT_MS = 300;

before(async () => {
  receiver = await listen();
});
after(() => receiver.close());
beforeEach(() => {
  receiver.state.answer = 204;
  receiver.state.requests = 0;
});

/**
 * Each test its own services and worker (a delivery another test left pending would be taken by this one's
 * passes), on a clock that stands still between the test's moves, so a retry's due time can be compared to
 * the millisecond.
 */
/** `timeoutMs`: the worker's bound on a delivery; short only where the receiver never answers (a loaded machine answers slowly). */
async function open(t: TestContext, timeoutMs = 60_000) {
  const fx = await openServices({ 'webhooks-allow-private': 'true' });
  const clock = { ms: Math.floor(Date.now() / 1000) * 1000, now: () => new Date(clock.ms) };
  fx.services.resolve = resolve;
  fx.services.clock = clock;
  const notifier = new Notifier(fx.services, noMail, undefined, { webhookTimeoutMs: timeoutMs });
  t.after(async () => {
    // The receiver's held requests first (a broken timeout): the worker's pass then ends.
    receiver.drop();
    await notifier.stop();
    await fx.close();
  });
  const webhooks = fx.collection('webhooks');
  return {
    fx,
    notifier,
    webhooks,
    now: () => clock.ms,
    advance: (ms: number) => void (clock.ms += ms),
    /** A webhook of a new user, with one test delivery queued (the `test` action); nothing sent yet. */
    async hookWithDelivery(): Promise<{ ctx: Ctx; uuid: string }> {
      const ctx = await fx.user();
      const made = (await webhooks.service.create!(ctx, [{ url: `http://hooks.example.test:${receiver.port}/in` }])) as Record<string, unknown>[];
      const uuid = String(made[0].uuid);
      await webhooks.actions!.test.run(ctx, uuid, {}, {});
      return { ctx, uuid };
    },
    /** The one delivery of a webhook, as its `deliveries/` view shows it. */
    async delivery(ctx: Ctx, uuid: string): Promise<DeliveryView> {
      const view = (await webhooks.views!.deliveries(ctx, uuid)) as { objects: DeliveryView[] };
      assert.equal(view.objects.length, 1);
      return view.objects[0];
    },
  };
}

interface DeliveryView {
  attempts: number;
  state: string;
  last_error: string | null;
  next_attempt_at: string | null;
}
test('a failing receiver is retried after 5, 10, 20, 40, 80, 160 and 320 s, and given up after the 8th attempt', async (t) => {
  const w = await open(t);
  const { ctx, uuid } = await w.hookWithDelivery();
  receiver.state.answer = 500;
  const waits = [5, 10, 20, 40, 80, 160, 320];
  for (let attempt = 1; attempt <= 8; attempt++) {
    assert.equal(await w.notifier.runDue(), 1, `attempt ${attempt} is made when due`);
    assert.equal(receiver.state.requests, attempt);
    const d = await w.delivery(ctx, uuid);
    assert.equal(d.attempts, attempt);
    assert.equal(d.last_error, 'receiver answered HTTP 500');
    if (attempt === 8) break;
    const wait = waits[attempt - 1] * 1000;
    assert.equal(d.state, 'pending');
    assert.equal(Date.parse(d.next_attempt_at!), w.now() + wait, `retry ${attempt} after ${waits[attempt - 1]} s`);
    w.advance(wait - 1);
    assert.equal(await w.notifier.runDue(), 0, `not retried before ${waits[attempt - 1]} s`);
    w.advance(1);
  }
  const given = await w.delivery(ctx, uuid);
  assert.equal(given.state, 'failed');
  assert.equal(given.next_attempt_at, null);
  assert.equal(given.last_error, 'receiver answered HTTP 500');
  const hook = await w.webhooks.service.get(ctx, uuid);
  assert.equal(hook.last_status, 'failing');
  assert.equal(hook.last_error, 'receiver answered HTTP 500');
  // Given up means no 9th call, however long one waits.
  w.advance(24 * 3600_000);
  assert.equal(await w.notifier.runDue(), 0);
  assert.equal(receiver.state.requests, 8);
});

test('a retry that succeeds marks the delivery sent and the webhook ok', async (t) => {
  const w = await open(t);
  const { ctx, uuid } = await w.hookWithDelivery();
  receiver.state.answer = 503;
  await w.notifier.runDue();
  receiver.state.answer = 204;
  w.advance(5000);
  assert.equal(await w.notifier.runDue(), 1);
  const d = await w.delivery(ctx, uuid);
  assert.deepEqual([d.state, d.attempts, d.last_error], ['sent', 2, null]);
  assert.equal((await w.webhooks.service.get(ctx, uuid)).last_status, 'ok');
});

test("a deleted webhook's pending deliveries are given up without a call", async (t) => {
  const w = await open(t);
  const { ctx, uuid } = await w.hookWithDelivery();
  await w.webhooks.service.remove!(ctx, uuid);
  assert.equal(await w.notifier.runDue(), 1);
  assert.equal(receiver.state.requests, 0, 'nothing is sent for a deleted webhook');
  const rows = await w.fx.services.store.notifications.deliveries.recentOf(w.fx.services.store.db, uuid, 50);
  assert.deepEqual(
    rows.map((r) => [r.state, r.last_error]),
    [['failed', 'webhook deleted']],
  );
  w.advance(3600_000);
  assert.equal(await w.notifier.runDue(), 0, 'and never retried');
  // The worker's bookkeeping does not bring the webhook back.
  await assert.rejects(w.webhooks.service.get(ctx, uuid), (e: { status?: number }) => e.status === 404);
});

test('a receiver that never answers costs one attempt: the worker moves on and retries later', { timeout: 120_000 }, async (t) => {
  const w = await open(t, TIMEOUT_MS);
  const { ctx, uuid } = await w.hookWithDelivery();
  receiver.state.answer = 'hang';
  assert.equal(await w.notifier.runDue(), 1);
  assert.equal(receiver.state.requests, 1, 'the request reached the receiver');
  const d = await w.delivery(ctx, uuid);
  assert.equal(d.state, 'pending');
  assert.equal(d.attempts, 1);
  assert.equal(d.last_error, UNREACHABLE);
  assert.equal(Date.parse(d.next_attempt_at!), w.now() + 5000);
  assert.equal((await w.webhooks.service.get(ctx, uuid)).last_status, 'failing');
});
