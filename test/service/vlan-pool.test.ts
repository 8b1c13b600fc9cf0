import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { FrozenClock } from '../helpers/clock.js';
import { assignVlans } from '../../src/resources/vlans/vlans.js';
import { openServices, type ServiceFixture } from '../helpers/services.js';
import { onlyOn } from '../helpers/skips.js';
import { until } from '../helpers/until.js';

/**
 * VLAN tags come from the location's pool, lowest free first, and never twice, even when two transactions
 * assign at the same time: no constraint guards the tag, so the assignment takes turns on a claim.
 */
let fx: ServiceFixture;
before(async () => {
  fx = await openServices({ 'vlan-pool': '10-20' }, undefined, { clock: new FrozenClock(new Date('2026-03-01T00:00:00Z')) });
});
after(() => fx.close());

const tagOf = async (uuid: string): Promise<unknown> => {
  for await (const row of fx.services.store.resources.ownedFields(fx.services.store.db, 'vlans', ['bottom_vlan_tag']))
    if (row.uuid === uuid) return Number(row.fields.bottom_vlan_tag);
  return undefined;
};

test('tags are the lowest free ones of the pool, and an exhausted pool is refused', async () => {
  const alice = await fx.user();
  const store = fx.services.store;
  const made = await store.transaction((tx) => assignVlans(tx, fx.services, alice.caller.uuid, 2));
  assert.deepEqual(await Promise.all(made.map(tagOf)), [10, 11]);
  await assert.rejects(
    store.transaction((tx) => assignVlans(tx, fx.services, alice.caller.uuid, 10)),
    (e: { status?: number; message?: string }) => e.status === 403 && /10-20 .* 9 free tags, 10 asked/.test(String(e.message)),
  );
});

test('two transactions assigning at once get different tags', { skip: onlyOn('postgres') }, async () => {
  const store = fx.services.store;
  const [bob, carol] = [await fx.user(), await fx.user()];
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let first: string[] = [];
  let assigned!: () => void;
  const firstAssigned = new Promise<void>((r) => (assigned = r));
  // The first holds its transaction open after taking a tag; the second assigns meanwhile.
  const one = store.transaction(async (tx) => {
    first = await assignVlans(tx, fx.services, bob.caller.uuid, 1);
    assigned();
    await held;
  });
  await firstAssigned;
  const two = store.transaction((tx) => assignVlans(tx, fx.services, carol.caller.uuid, 1));
  // Let the first commit once the second is waiting for its turn (or, without the claim, has already taken one).
  let done = false;
  void two.then(
    () => (done = true),
    () => (done = true),
  );
  await until('the second assignment waits or ends', async () => {
    if (done) return true;
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_locks where not granted`.execute(store.db);
    return rows[0].n > 0;
  });
  release();
  await one;
  const second = await two;
  const tags = [await tagOf(first[0]), await tagOf(second[0])];
  assert.notEqual(tags[0], tags[1], `both got tag ${String(tags[0])}`);
});
