import { createHash } from 'node:crypto';
import type { Services } from '../core/context.js';
import type { Db, Tx } from '../store/db.js';
import { dropState, readStates, writeState } from '../store/sim.js';

/**
 * Where the simulated infrastructure puts things: a running server on one of `--sim-hosts` hypervisor
 * hosts, a drive on one of as many storage nodes. The API's availability groups (reference §5.1, §6.1)
 * are the caller's objects grouped by what they share here.
 *
 * A placement is the object's own hash over the hosts (stable and spread, no scan of the others, no race
 * between processes), moved to the next host when the caller asked to `avoid` the hosts of other
 * objects. It is kept in the simulator's table under its own kind, so neither the API body nor the
 * hypervisor's or storage's own state carry it; a drive stored before placements existed is where its
 * hash says.
 */
const KIND = 'placement';

interface Placement {
  /** Host (servers) or storage node (drives), 0-based. */
  at: number;
}

type Sim = Pick<Services, 'config'>;

function home(s: Sim, uuid: string): number {
  return createHash('sha1').update(uuid).digest().readUInt32BE(0) % s.config.simHosts;
}

/**
 * Where each of the given objects is (an object without a stored placement is at its hash, or absent
 * with `storedOnly`).
 */
export async function placementsOf(db: Db | Tx, s: Sim, uuids: readonly string[], opts: { storedOnly?: boolean } = {}): Promise<Map<string, number>> {
  const stored = await readStates<Placement>(db, KIND, uuids);
  const out = new Map<string, number>();
  for (const u of uuids) {
    const at = stored.get(u)?.at;
    if (at !== undefined) out.set(u, at);
    else if (!opts.storedOnly) out.set(u, home(s, u));
  }
  return out;
}

/**
 * Put an object somewhere: its home host unless that hosts one of `avoid`, then the next host that does
 * not. When every host holds an object to avoid, the home host (the real service places it anyway).
 */
export async function place(tx: Tx, s: Sim, uuid: string, avoid: readonly string[] = []): Promise<number> {
  const taken = new Set(avoid.length ? (await placementsOf(tx, s, avoid)).values() : []);
  const start = home(s, uuid);
  let at = start;
  for (let i = 0; i < s.config.simHosts; i++) {
    const candidate = (start + i) % s.config.simHosts;
    if (!taken.has(candidate)) {
      at = candidate;
      break;
    }
  }
  await writeState(tx, KIND, uuid, { at } satisfies Placement);
  return at;
}

/** The object left its host (a server powered off, a drive was deleted). */
export const unplace = (tx: Tx, uuids: string | readonly string[]) => dropState(tx, KIND, uuids);

/** Groups of the given objects that share a host, largest first, then by first member (a stable answer). */
export async function groupsOf(db: Db | Tx, s: Sim, uuids: readonly string[]): Promise<string[][]> {
  const where = await placementsOf(db, s, uuids);
  const groups = new Map<number, string[]>();
  for (const [uuid, at] of where) groups.set(at, [...(groups.get(at) ?? []), uuid]);
  return [...groups.values()].map((g) => g.sort()).sort((a, b) => b.length - a.length || a[0].localeCompare(b[0]));
}

/** The given objects that share `uuid`'s host, `uuid` included (it must be one of them). */
export async function groupOf(db: Db | Tx, s: Sim, uuid: string, uuids: readonly string[]): Promise<string[]> {
  return (await groupsOf(db, s, uuids)).find((g) => g.includes(uuid)) ?? [];
}
