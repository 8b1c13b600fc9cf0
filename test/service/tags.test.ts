import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { listQuery, openServices, type ServiceFixture } from '../helpers/services.js';

/** The tag kind's service, called directly: what a user sees of their own tags and never of another's. */
let fx: ServiceFixture;
before(async () => {
  fx = await openServices();
});
after(() => fx.close());

test('tags are created, listed with paging and a name filter, and private to their owner', async () => {
  const tags = fx.collection('tags').service;
  const alice = await fx.user();
  const bob = await fx.user();
  const made = await tags.create!(alice, [{ name: 'red' }, { name: 'green' }, { name: 'blue' }]);
  assert.ok(Array.isArray(made) && made.length === 3);
  const page = await tags.list(alice, listQuery({ limit: 2 }));
  assert.equal(page.total, 3);
  assert.equal(page.objects.length, 2);
  const named = await tags.list(alice, listQuery({ filters: { name: 'green' } }));
  assert.deepEqual(
    named.objects.map((o) => o.name),
    ['green'],
  );
  assert.equal((await tags.list(bob, listQuery())).total, 0);
  const uuid = String((made as Record<string, unknown>[])[0].uuid);
  await assert.rejects(tags.get(bob, uuid), (e: { status?: number }) => e.status === 404);
});
