import { randomBytes, randomInt } from 'node:crypto';
import type { RandomSource } from '../core/sim.js';

/**
 * Random bytes are drawn 4 KiB at a time and handed out in slices never handed out again: a MAC per NIC
 * took a call into OpenSSL and a new buffer each (1.3% of a POST /servers/'s CPU).
 */
let pool = new Uint8Array(0);
let taken = 0;
function pooledBytes(n: number): Uint8Array {
  if (n > 256) return randomBytes(n);
  if (taken + n > pool.length) {
    pool = randomBytes(4096);
    taken = 0;
  }
  return pool.subarray(taken, (taken += n));
}

/** The simulator's chances as the running service takes them (a scripted simulator brings its own). */
export const defaultRandom: RandomSource = {
  chance: (rate) => rate > 0 && Math.random() < rate,
  bytes: pooledBytes,
  int: (min, max) => randomInt(min, max),
};
