import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { endSession, endUserSessions, findSession, SESSION_ENDED, SESSION_TTL_MS, startSession } from '../../src/resources/accounts/sessions.js';
import { setPassword } from '../../src/resources/users/users.js';
import { openServices, type ServiceFixture } from '../helpers/services.js';

/**
 * Cookie sessions (resources/accounts/sessions.ts), called directly: created for a user, found by their id,
 * expired by the injected clock, ended one by one or all of a user's at once.
 */
let fx: ServiceFixture;
before(async () => {
  fx = await openServices();
});
after(() => fx.close());

test('a new session is found by its id, with its user and CSRF token; an unknown or malformed id finds nothing', async () => {
  const alice = await fx.user();
  const started = await startSession(fx.services, alice.caller.uuid);
  assert.match(started.id, /^[0-9a-f]{32}$/);
  assert.equal(started.csrfToken.length, 32);
  assert.equal(started.maxAgeS, SESSION_TTL_MS / 1000);
  const found = await findSession(fx.services, started.id);
  assert.deepEqual(found, { caller: alice.caller, csrfToken: started.csrfToken });
  assert.equal(await findSession(fx.services, 'f'.repeat(32)), null);
  assert.equal(await findSession(fx.services, 'not-a-session-id'), null);
});

test('a session expires when its lifetime (14 days) has passed on the injected clock', async () => {
  assert.equal(SESSION_TTL_MS, 14 * 24 * 3600_000);
  const alice = await fx.user();
  const { id } = await startSession(fx.services, alice.caller.uuid);
  fx.clock.advance(SESSION_TTL_MS - 1000);
  assert.ok(await findSession(fx.services, id));
  fx.clock.advance(1000);
  assert.equal(await findSession(fx.services, id), null);
});

test('ending a session deletes it and no other; its stream credential is announced as ended', async () => {
  const alice = await fx.user();
  const one = await startSession(fx.services, alice.caller.uuid);
  const two = await startSession(fx.services, alice.caller.uuid);
  const announced: unknown[] = [];
  const announce = fx.services.store.changes.announce.bind(fx.services.store.changes);
  fx.services.store.changes.announce = (tx, change) => {
    announced.push(change);
    announce(tx, change);
  };
  try {
    await endSession(fx.services, one.id, { owner: alice.caller.uuid, credential: 'stream-1' });
  } finally {
    fx.services.store.changes.announce = announce;
  }
  assert.equal(await findSession(fx.services, one.id), null);
  assert.ok(await findSession(fx.services, two.id));
  assert.deepEqual(announced, [{ owner: alice.caller.uuid, kind: SESSION_ENDED, uuid: 'stream-1' }]);
  // Logging out twice, or without a session, is fine.
  await endSession(fx.services, one.id);
  await endSession(fx.services, undefined);
});

test("ending a user's sessions (a new password) ends all of theirs and none of another's", async () => {
  const alice = await fx.user();
  const bob = await fx.user();
  const a1 = await startSession(fx.services, alice.caller.uuid);
  const a2 = await startSession(fx.services, alice.caller.uuid);
  const b1 = await startSession(fx.services, bob.caller.uuid);
  assert.equal(await fx.services.store.transaction((tx) => endUserSessions(tx, fx.services, alice.caller.uuid)), 2);
  assert.equal(await findSession(fx.services, a1.id), null);
  assert.equal(await findSession(fx.services, a2.id), null);
  assert.ok(await findSession(fx.services, b1.id));
  await setPassword(fx.services, bob.caller.email, 'a-new-password');
  assert.equal(await findSession(fx.services, b1.id), null);
});
