import { randomBytes, randomInt } from 'node:crypto';
import type { RandomSource } from '../core/sim.js';

/** The simulator's chances as the running service takes them (a scripted simulator brings its own). */
export const defaultRandom: RandomSource = {
  chance: (rate) => rate > 0 && Math.random() < rate,
  bytes: (n) => randomBytes(n),
  int: (min, max) => randomInt(min, max),
};
