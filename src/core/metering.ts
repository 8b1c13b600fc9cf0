import type { Services } from './context.js';
import type { Db, Tx } from '../store/db.js';

/**
 * What a resource kind contributes to billing (reference §16.6): at a poll, the usage of every account
 * at once. Each item names the usage keys it counts under, most specific first (`intel_cpu`, `cpu`): it
 * counts under all of them in `/currentusage/`, subscriptions of any of them cover it (specific first),
 * and it is charged under the first key the price catalogue prices.
 */
export interface Usage {
  owner: string;
  keys: readonly string[];
  /** Base units: MHz, bytes, objects, licences. */
  amount: number;
  /** When the use began (ms since the epoch), for a cycle it only partly covers; absent = long before. */
  since?: number;
  /** The object that uses it (a server, drive, snapshot, IP, VLAN): `/usage/` records it per poll. */
  uuid?: string;
  /**
   * `amount` is a volume used in the measured period (bytes a server sent in the cycle, tx), charged by
   * volume — price per unit, not per second.
   */
  volume?: boolean;
}

/**
 * A kind's meter: the usage of every account at `at`, or of one account (`owner`), read set-wise. Volumes
 * (`Usage.volume`) are what was used from `from` (the start of the cycle or span measured) to `at`.
 */
export type Meter = (s: Pick<Services, 'store' | 'clock' | 'config' | 'sim'>, db: Db | Tx, at: Date, owner?: string, from?: Date) => Promise<Usage[]>;

/** A kind billed per object an account holds (IPs, VLANs): one of `key` per owned object, from its creation. */
export const perObject =
  (kind: string, key: string): Meter =>
  async (s, db, _at, owner) => {
    const out: Usage[] = [];
    const keys = [key];
    for await (const r of s.store.resources.ownedFields(db, kind, [], { owner }))
      out.push({ owner: r.owner_uuid, keys, amount: 1, since: Date.parse(r.created_at), uuid: r.uuid });
    return out;
  };
