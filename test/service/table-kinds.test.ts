import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { totalOfPage, pageOfItems } from '../../src/store/paging.js';
import { listQuery, openServices, type ServiceFixture } from '../helpers/services.js';

/**
 * Kinds over their own tables (core/table-kind.ts), through the audit log: the caller's rows only, filters
 * as declared, newest first, and the one paging rule (a page that shows its total is not counted; one past
 * the end is).
 */
let fx: ServiceFixture;
before(async () => {
  fx = await openServices();
});
after(() => fx.close());

test('the paging rule: a short or first page shows its total; a full page or one past the end does not', () => {
  assert.equal(totalOfPage(3, 20, 0), 3);
  assert.equal(totalOfPage(0, 20, 0), 0);
  assert.equal(totalOfPage(5, 0, 10), 15);
  assert.equal(totalOfPage(20, 20, 0), undefined);
  assert.equal(totalOfPage(0, 20, 40), undefined);
  assert.deepEqual(pageOfItems([1, 2, 3, 4, 5], 2, 1), { rows: [2, 3], total: 5 });
  assert.deepEqual(pageOfItems([1, 2, 3], 0, 1), { rows: [2, 3], total: 3 });
});

test('the audit log lists the caller’s entries, filtered, newest first, counted past the end of the list', async () => {
  const policies = fx.collection('fwpolicies').service;
  const logs = fx.collection('logs').service;
  const alice = await fx.user();
  const bob = await fx.user();
  // Creating a firewall policy is audited (an entry per policy).
  const made = (await policies.create!(alice, [{ name: 'a' }, { name: 'b' }, { name: 'c' }])) as Record<string, unknown>[];
  const [ofBob] = (await policies.create!(bob, [{ name: 'x' }])) as Record<string, unknown>[];
  const all = await logs.list(alice, listQuery());
  assert.equal(all.total, 3, `${all.total} entries`);
  assert.ok(all.objects.every((e) => (e.actor as { uuid: string } | null)?.uuid === alice.caller.uuid));
  const ofB = await logs.list(alice, listQuery({ filters: { uuid: String(made[1].uuid) } }));
  assert.ok(ofB.objects.length >= 1 && ofB.objects.every((e) => e.uuid === made[1].uuid));
  // Another user's resource: its entries are not the caller's, even asked for by uuid.
  assert.equal((await logs.list(alice, listQuery({ filters: { uuid: String(ofBob.uuid) } }))).total, 0);
  assert.equal((await logs.list(bob, listQuery())).total, 1);
  const newest = await logs.list(alice, listQuery({ limit: 1 }));
  assert.equal(newest.objects[0].uuid, all.objects[0].uuid);
  // Past the end: no rows, and the total still counted (not taken from the empty page).
  const past = await logs.list(alice, listQuery({ limit: 2, offset: all.total + 5 }));
  assert.deepEqual([past.objects.length, past.total], [0, all.total]);
  const contains = await logs.list(alice, listQuery({ filters: { name__contains: String(all.objects[0].action).slice(1, 4).toUpperCase() } }));
  assert.ok(contains.total >= 1, 'name__contains matches case-insensitively');
  await assert.rejects(logs.get(alice, String(made[0].uuid)), (e: { status?: number }) => e.status === 405 || e.status === 404 || e.status === 400);
});
