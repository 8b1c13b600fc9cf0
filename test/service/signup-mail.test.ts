import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { signUp, type SignupDeps } from '../../src/resources/accounts/signup.js';
import { claimDue, type EmailContent } from '../../src/resources/notifications/deliveries.js';
import { findUserByEmail } from '../../src/resources/users/users.js';
import { openServices, type ServiceFixture } from '../helpers/services.js';

/**
 * Sign-up's e-mail goes through the outbox as every e-mail does: a delivery row committed with the sign-up,
 * for the notification worker to send (nothing is sent while the request waits).
 */
let fx: ServiceFixture;
before(async () => {
  fx = await openServices();
});
after(() => fx.close());

const deps: SignupDeps = {
  mailer: { kind: 'smtp' },
  publicUrl: () => 'https://cloud.example.com',
  log: { info: () => undefined, error: () => undefined },
};

/** The pending e-mail deliveries to `address`, as the worker would claim them. */
async function queuedTo(address: string) {
  const due = await claimDue(fx.services, 100);
  return due.filter((d) => d.channel === 'email' && d.address === address).map((d) => ({ ...d, mail: JSON.parse(d.content) as EmailContent }));
}

test('a new account: its confirmation link is a delivery to its own address', async () => {
  const email = `mail-${process.pid}-1@example.com`;
  const { uuid } = await signUp(fx.services, deps, { email });
  const [queued, ...more] = await queuedTo(email);
  assert.equal(more.length, 0);
  assert.equal(queued.type, 'signup_confirm');
  assert.equal(queued.owner_uuid, uuid);
  assert.match(queued.mail.subject, /confirm/i);
  assert.match(queued.mail.text, /https:\/\/cloud\.example\.com\/accounts\/confirm\/[A-Za-z0-9_-]{43}/);
  assert.equal((await findUserByEmail(fx.services, email))?.state, 'NEW_USER');
});

test('an address that has an account gets a notice, queued the same way, without a link', async () => {
  const owner = await fx.user();
  await signUp(fx.services, deps, { email: owner.caller.email });
  const [queued, ...more] = await queuedTo(owner.caller.email);
  assert.equal(more.length, 0);
  assert.equal(queued.type, 'signup_attempt');
  assert.equal(queued.owner_uuid, owner.caller.uuid);
  assert.match(queued.mail.text, /already has an account/);
  assert.doesNotMatch(queued.mail.text, /accounts\/confirm/);
});
