import { test } from 'node:test';
import assert from 'node:assert/strict';
import { IDLE_MAX_MS, PassLoop } from '../../src/core/pass-loop.js';
import type { WakeSource } from '../../src/store/wakes.js';

/** A wake source the test fires by hand. */
function handWakes(): WakeSource & { fire(payload: string): void; listening: boolean } {
  const subs: { payloads: readonly string[]; fn: (p: string) => void }[] = [];
  return {
    listening: true,
    on(payloads, fn) {
      const s = { payloads, fn };
      subs.push(s);
      return () => void subs.splice(subs.indexOf(s), 1);
    },
    fire(payload) {
      for (const s of [...subs]) if (s.payloads.includes(payload)) s.fn(payload);
    },
  };
}

/** Lets a pass started by a timer finish (its promises), without moving time. */
const settle = () => new Promise((r) => setImmediate(r));

test('an idle loop that hears wake-ups sleeps until its next due time or a wake-up, and polls while it hears none', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  let passes = 0;
  const loop = new PassLoop(
    async () => {
      passes++;
      return 0;
    },
    (err) => assert.fail(String(err)),
  );
  const wakes = handWakes();
  let due: number | null = null;
  loop.start(100, { wakes, payloads: ['w:t'], nextDueIn: async () => due });
  t.mock.timers.tick(0);
  await settle();
  assert.equal(passes, 1);
  // Nothing pending: no pass for the longest sleep (a polling loop ran one every 100 ms).
  for (let i = 0; i < 10; i++) {
    t.mock.timers.tick(100);
    await settle();
  }
  t.mock.timers.tick(IDLE_MAX_MS - 1300);
  await settle();
  assert.equal(passes, 1);
  // A wake-up of another topic changes nothing; one of its own runs a pass at once (a poll interval after the last).
  wakes.fire('w:n');
  t.mock.timers.tick(100);
  await settle();
  assert.equal(passes, 1);
  due = 5000;
  wakes.fire('w:t');
  t.mock.timers.tick(100);
  await settle();
  assert.equal(passes, 2);
  // The next work is due in 5 s: the loop sleeps that long.
  t.mock.timers.tick(4900);
  await settle();
  assert.equal(passes, 2);
  t.mock.timers.tick(100);
  await settle();
  assert.equal(passes, 3);
  // Wake-ups may be missed (the LISTEN connection is away): it polls.
  wakes.listening = false;
  due = null;
  t.mock.timers.tick(5000);
  await settle();
  t.mock.timers.tick(100);
  await settle();
  t.mock.timers.tick(100);
  await settle();
  assert.equal(passes, 6);
  await loop.stop();
});
