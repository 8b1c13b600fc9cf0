import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Ctx } from '../../src/core/context.js';
import { Scheduler } from '../../src/core/scheduler.js';
import { registry, timerHandlers } from '../../src/registry.js';
import { scriptedSim, type ScriptedSimulator } from '../helpers/scripted-sim.js';
import { listQuery, openServices, type ServiceFixture } from '../helpers/services.js';

/**
 * The server power state machine on the service tier, with a scripted simulator choosing each boot's
 * outcome and duration: start -> starting -> running on the injected clock, stop, a failed boot, start
 * refused while running, and a boot that survives a scheduler restart (its timer is durable).
 */
/** The injected clock runs on real time plus its offset: durations far beyond a test's run keep the edges clear. */
const BOOT_MS = 600_000;
const STOP_MS = 400_000;
let fx: ServiceFixture<ScriptedSimulator>;
before(async () => {
  fx = await openServices({ delays: `server.stop=${STOP_MS}` }, registry, { sim: scriptedSim });
});
after(() => fx.close());

const servers = () => fx.collection('servers');
const MINIMAL = { cpu: 1000, mem: 536870912, name: 'power', vnc_password: 'secret' };

async function newServer(ctx: Ctx): Promise<string> {
  const made = (await servers().service.create!(ctx, [MINIMAL])) as Record<string, unknown>[];
  return String(made[0].uuid);
}
const act = (ctx: Ctx, uuid: string, action: string) => servers().actions![action].run(ctx, uuid, {}, {});
const status = async (ctx: Ctx, uuid: string) => (await servers().service.get(ctx, uuid)).status;
/** The server's audit actions (`!`: with an error), sorted (entries of one moment have no order). */
async function audit(ctx: Ctx, uuid: string): Promise<string[]> {
  const page = await fx.collection('logs').service.list(ctx, listQuery({ filters: { uuid } }));
  return page.objects.map((e) => `${String(e.action)}${e.error_type ? '!' : ''}`).sort();
}

test('start: starting until the boot the simulator planned is over, then running with a power-on time', async () => {
  const alice = await fx.user();
  const uuid = await newServer(alice);
  fx.sim.scriptBoots({ ms: BOOT_MS });
  await act(alice, uuid, 'start');
  assert.equal(await status(alice, uuid), 'starting');
  assert.deepEqual(fx.sim.boots.at(-1), { server: uuid, fail: false, inMs: BOOT_MS });
  await fx.advance(BOOT_MS - 100_000);
  assert.equal(await status(alice, uuid), 'starting', 'not before the planned boot time');
  const before = fx.clock.now().getTime();
  await fx.advance(100_000);
  assert.equal(await status(alice, uuid), 'running');
  const guest = (await fx.sim.hypervisor.guestStates(fx.services.store.db, [uuid])).get(uuid);
  assert.ok(guest?.active_since !== undefined && guest.active_since >= before + 100_000 && guest.active_since <= fx.clock.now().getTime());
  assert.deepEqual(await audit(alice, uuid), ['boot', 'create', 'start_send']);
});

test('stop: stopping for the hard-stop delay, then stopped and off the hypervisor', async () => {
  const alice = await fx.user();
  const uuid = await newServer(alice);
  fx.sim.scriptBoots({ ms: 1_000 });
  await act(alice, uuid, 'start');
  await fx.advance(1_000);
  await act(alice, uuid, 'stop');
  assert.equal(await status(alice, uuid), 'stopping');
  assert.equal(fx.sim.hypervisor.stopMs(), STOP_MS);
  await fx.advance(STOP_MS - 100_000);
  assert.equal(await status(alice, uuid), 'stopping');
  await fx.advance(100_000);
  assert.equal(await status(alice, uuid), 'stopped');
  const guest = (await fx.sim.hypervisor.guestStates(fx.services.store.db, [uuid])).get(uuid);
  assert.equal(guest?.active_since, undefined, 'powered off');
  assert.deepEqual(await audit(alice, uuid), ['boot', 'create', 'start_send', 'stop', 'stop_send']);
});

test('a boot the simulator fails leaves the server stopped, with the failed boot in the audit log', async () => {
  const alice = await fx.user();
  const uuid = await newServer(alice);
  fx.sim.scriptBoots({ fail: true, ms: 2_000 });
  await act(alice, uuid, 'start');
  await fx.advance(2_000);
  assert.equal(await status(alice, uuid), 'stopped');
  assert.deepEqual(await audit(alice, uuid), ['boot!', 'create', 'start_send']);
  const guest = (await fx.sim.hypervisor.guestStates(fx.services.store.db, [uuid])).get(uuid);
  assert.equal(guest?.active_since, undefined, 'never powered on');
  // The next boot (not scripted to fail) succeeds.
  fx.sim.scriptBoots({ ms: 1_000 });
  await act(alice, uuid, 'start');
  await fx.advance(1_000);
  assert.equal(await status(alice, uuid), 'running');
});

test('start is refused while the server is starting or running (403), and changes nothing', async () => {
  const alice = await fx.user();
  const uuid = await newServer(alice);
  fx.sim.scriptBoots({ ms: 1_000 });
  await act(alice, uuid, 'start');
  const boots = fx.sim.boots.length;
  await assert.rejects(act(alice, uuid, 'start'), (e: { status?: number }) => e.status === 403);
  await fx.advance(1_000);
  assert.equal(await status(alice, uuid), 'running');
  await assert.rejects(act(alice, uuid, 'start'), (e: { status?: number; message?: string }) => e.status === 403 && /started/.test(e.message ?? ''));
  assert.equal(fx.sim.boots.length, boots, 'no second boot began');
  assert.deepEqual(await audit(alice, uuid), ['boot', 'create', 'start_send']);
});

test('a boot in progress survives a scheduler restart: a new scheduler finishes it, once', async () => {
  const alice = await fx.user();
  const uuid = await newServer(alice);
  fx.sim.scriptBoots({ ms: BOOT_MS });
  await act(alice, uuid, 'start');
  // The process that started the boot goes away; another one (a fresh scheduler on the same store) runs on.
  await fx.scheduler.stop();
  const next = new Scheduler(fx.services, timerHandlers(registry));
  fx.clock.advance(BOOT_MS);
  await next.runDue();
  await next.runDue();
  assert.equal(await status(alice, uuid), 'running');
  assert.deepEqual(await audit(alice, uuid), ['boot', 'create', 'start_send'], 'booted exactly once');
  await next.stop();
});
