import type { Services } from '../../core/context.js';
import type { Meter, Usage } from '../../core/metering.js';
import type { Obj } from '../../core/input.js';

/** A licence a drive holds, as billing counts it (reference §16.5). */
export interface HeldLicence {
  /** The licence's name: its usage key, what subscriptions to it cover. */
  name: string;
  type: 'install' | 'instance' | 'stub';
  /** The server attribute counted per licence (`smp`: one per core), or '' for one per holder. */
  metric: string;
  /** The entry's `amount`: how many the drive holds (for a stub, the customer's own count). */
  amount: number;
}

/**
 * The licences a drive's `licenses` holds: `[{amount, license: {name, ...} | "/api/2.0/licenses/12/", user}]`.
 * The catalogue's entry (by name, or by the id in the URI) says its type and metric; an entry the
 * catalogue does not know keeps what it carries (default `instance`, as the schema's default type).
 */
export function licencesOf(s: Pick<Services, 'config'>, body: Obj): HeldLicence[] {
  const out: HeldLicence[] = [];
  for (const entry of (body.licenses as unknown[] | undefined) ?? []) {
    if (!entry || typeof entry !== 'object') continue;
    const e = entry as Obj;
    const raw = e.license;
    const lic = raw && typeof raw === 'object' ? (raw as Obj) : {};
    const uri = typeof raw === 'string' ? raw : typeof lic.resource_uri === 'string' ? lic.resource_uri : '';
    const id = /\/licenses\/(\d+)\/?$/.exec(uri)?.[1];
    const known =
      (typeof lic.name === 'string' ? s.config.pricing.license(lic.name) : undefined) ??
      (id ? s.config.pricing.licenses.find((l) => String(l.id) === id) : undefined);
    const name = known?.name ?? (typeof lic.name === 'string' ? lic.name : undefined);
    if (!name) continue;
    const type = known?.type ?? (['install', 'instance', 'stub'].includes(lic.type as string) ? (lic.type as HeldLicence['type']) : 'instance');
    const metric = known?.user_metric ?? (typeof lic.user_metric === 'string' ? lic.user_metric : '');
    const amount = Number.isSafeInteger(e.amount) && (e.amount as number) > 0 ? (e.amount as number) : 1;
    out.push({ name, type, metric, amount });
  }
  return out;
}

/**
 * What drives use (reference §16.6): each account drive's size in bytes under its storage type (`dssd`,
 * `ssd`, ...), from its creation; and the licences billed per installation (§16.5 `install`: per drive
 * holding one, whether or not it runs; `stub`: the customer's own count, `amount`), from the drive's
 * creation. Licences billed per running instance are the servers' (servers/meter.ts). Library drives
 * belong to no account and cost nothing.
 */
export const driveUsage: Meter = async (s, db, _at, owner) => {
  // The three fields billing reads, not the bodies: a poll reads every account's drives at once.
  const out: Usage[] = [];
  // One keys list per storage type, shared by its drives.
  const keysOf = new Map<string, readonly string[]>();
  for await (const r of s.store.resources.ownedFields(db, 'drives', ['storage_type', 'size', 'licenses'], { owner })) {
    const since = Date.parse(r.created_at);
    const { storage_type, size, licenses: held } = r.fields;
    const type = String(storage_type ?? 'dssd');
    let keys = keysOf.get(type);
    if (!keys) keysOf.set(type, (keys = [type]));
    out.push({ owner: r.owner_uuid, keys, amount: Number(size), since, uuid: r.uuid });
    const licenses = typeof held === 'string' && held !== '[]' ? (JSON.parse(held) as unknown) : undefined;
    if (!Array.isArray(licenses) || !licenses.length) continue;
    for (const l of licencesOf(s, { licenses }))
      if (l.type !== 'instance') out.push({ owner: r.owner_uuid, keys: [l.name], amount: l.amount, since, uuid: r.uuid });
  }
  return out;
};
