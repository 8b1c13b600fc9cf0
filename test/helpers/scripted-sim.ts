import type { RandomSource, Simulator } from '../../src/core/sim.js';
import { createSimulator, type SimDeps } from '../../src/sim/index.js';

/**
 * A simulator whose outcomes the test chooses: the next boots (fail or not, how long) and the next drive
 * clones (fail or not, how long), in the order they begin, and a random source that never rolls a chaos
 * failure. Everything not scripted is the real simulator's (sim/index.ts), so state, leases, placement
 * and data behave as they do in the service. Use it with `openServices({}, registry, { sim: scriptedSim })`.
 */
export interface BootScript {
  fail?: boolean;
  /** How long the boot takes (ms of the injected clock); the configured delay when absent. */
  ms?: number;
}

export interface CloneScript {
  fail?: boolean;
  ms?: number;
}

export interface ScriptedSimulator extends Simulator {
  /** Queue outcomes of the next boots, in order. */
  scriptBoots(...boots: BootScript[]): void;
  /** Queue outcomes of the next drive clones, in order (decided when a clone begins). */
  scriptClones(...clones: CloneScript[]): void;
  /** Every boot that began: server, whether it will fail, its duration. */
  readonly boots: { server: string; fail: boolean; inMs: number }[];
}

/** Never a chaos failure; MACs and ports from a counter, so runs repeat. */
export function fixedRandom(): RandomSource {
  let n = 0;
  return {
    chance: () => false,
    bytes: (count) => Uint8Array.from({ length: count }, () => ++n % 256),
    int: (min, max) => min + (++n % (max - min)),
  };
}

export function scriptedSim(deps: SimDeps): ScriptedSimulator {
  const real = createSimulator(deps, fixedRandom());
  const bootQueue: BootScript[] = [];
  const cloneQueue: CloneScript[] = [];
  const boots: { server: string; fail: boolean; inMs: number }[] = [];
  /** Clone targets whose outcome was scripted to fail, by source (spent when the clone finishes). */
  const failing = new Map<string, number>();
  let cloning: CloneScript | undefined;
  return {
    ...real,
    boots,
    scriptBoots: (...b) => void bootQueue.push(...b),
    scriptClones: (...c) => void cloneQueue.push(...c),
    hypervisor: {
      ...real.hypervisor,
      async beginBoot(tx, server, avoid) {
        const planned = await real.hypervisor.beginBoot(tx, server, avoid);
        const script = bootQueue.shift();
        const boot = { fail: script?.fail ?? planned.fail, inMs: script?.ms ?? planned.inMs };
        boots.push({ server, ...boot });
        return boot;
      },
    },
    storage: {
      ...real.storage,
      // A drive clone copies the data, then asks how long it takes: the script is taken at the copy.
      async copyData(tx, from, to, size) {
        cloning = cloneQueue.shift();
        if (cloning?.fail) failing.set(from.uuid, (failing.get(from.uuid) ?? 0) + 1);
        return real.storage.copyData(tx, from, to, size);
      },
      cloneMs(size) {
        const ms = cloning?.ms;
        cloning = undefined;
        return ms ?? real.storage.cloneMs(size);
      },
      async takeCloneFailure(tx, source) {
        const n = failing.get(source) ?? 0;
        if (n) {
          if (n === 1) failing.delete(source);
          else failing.set(source, n - 1);
          return true;
        }
        return real.storage.takeCloneFailure(tx, source);
      },
    },
  };
}
