import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Ctx } from '../../src/core/context.js';
import { registry } from '../../src/registry.js';
import { scriptedSim, type ScriptedSimulator } from '../helpers/scripted-sim.js';
import { openServices, type ServiceFixture } from '../helpers/services.js';

/**
 * Drive clone through the simulator (scripted: each clone's duration and outcome chosen by the test): the
 * copy is `cloning_dst` with a started job until the storage is done, then unmounted with the job a
 * success; a copy the storage fails is `unavailable` with the job failed.
 */
let fx: ServiceFixture<ScriptedSimulator>;
before(async () => {
  fx = await openServices({}, registry, { sim: scriptedSim });
});
after(() => fx.close());

const drives = () => fx.collection('drives');
const GiB = 1024 ** 3;

async function readyDrive(ctx: Ctx): Promise<string> {
  const made = (await drives().service.create!(ctx, [{ name: 'source', size: GiB, media: 'disk' }])) as Record<string, unknown>[];
  await fx.advance(fx.sim.storage.createMs());
  return String(made[0].uuid);
}
async function clone(ctx: Ctx, source: string): Promise<Record<string, unknown>> {
  const answer = (await drives().actions!.clone.run(ctx, source, {}, {})) as { objects: Record<string, unknown>[] };
  return answer.objects[0];
}
const jobOf = async (ctx: Ctx, copy: Record<string, unknown>) => fx.collection('jobs').service.get(ctx, String((copy.jobs as { uuid: string }[])[0].uuid));

test('a clone is cloning_dst with a started job for as long as the simulated storage says, then unmounted', async () => {
  const alice = await fx.user();
  const source = await readyDrive(alice);
  // The injected clock runs on real time plus its offset: a long copy keeps the edge clear of the test's own run.
  fx.sim.scriptClones({ ms: 600_000 });
  const copy = await clone(alice, source);
  assert.equal(copy.status, 'cloning_dst');
  assert.equal((await jobOf(alice, copy)).state, 'started');
  await fx.advance(500_000);
  assert.equal((await drives().service.get(alice, String(copy.uuid))).status, 'cloning_dst');
  await fx.advance(100_000);
  assert.equal((await drives().service.get(alice, String(copy.uuid))).status, 'unmounted');
  assert.equal((await jobOf(alice, copy)).state, 'success');
});

test('a clone the simulated storage fails is unavailable, its job failed', async () => {
  const alice = await fx.user();
  const source = await readyDrive(alice);
  fx.sim.scriptClones({ ms: 3_000, fail: true });
  const copy = await clone(alice, source);
  await fx.advance(3_000);
  assert.equal((await drives().service.get(alice, String(copy.uuid))).status, 'unavailable');
  assert.equal((await jobOf(alice, copy)).state, 'failed');
  // The fault is spent: the next clone of the same drive succeeds.
  fx.sim.scriptClones({ ms: 1_000 });
  const again = await clone(alice, source);
  await fx.advance(1_000);
  assert.equal((await drives().service.get(alice, String(again.uuid))).status, 'unmounted');
});
