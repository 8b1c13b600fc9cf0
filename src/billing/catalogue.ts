import { readFileSync } from 'node:fs';
import { ConfigError } from '../core/errors.js';
import { Money } from './money.js';

/**
 * The price catalogue (reference §16.2): one row per (resource, burst level, currency), as `GET /pricing/`
 * lists them. Level 0 is the subscription price; levels ≥ 1 are burst prices. `multiplier` turns "price
 * per unit" into "price per base unit per second" (cpu: MHz·s, mem and storage: byte·s, tx: bytes, ip and
 * vlan: object·s). The file the operator gives (`--pricing FILE`) has the shape of a `/pricing/` answer —
 * a saved `GET /pricing/?limit=0` is a valid catalogue — plus optional `licenses` and `discounts`. The keys of
 * its `current` map name resources that have burst levels but no price rows (the recorded `sms`); its values,
 * the levels of the moment it was saved, are not read: levels start at 1 and follow usage (levels.ts).
 *
 * The default, `prices.json`, is the default location's (zrh) catalogue as recorded in 2022
 * (`/pricing/`, `/currentusage/`): the 16 resources of `current`, and 484 rows (the recorded total_count) —
 * cpu, mem, tx, sparc_t4_cpu and sparc_t4_mem at levels 0..20, dssd, ssd, zadara, ip, vlan and vlan_ecx at
 * 0..1, four licences at 0 (4 currencies each: 5×84 + 6×8 + 4×4 = 484), and `sms` without rows (as in the
 * libcloud fixture, where it is in `current` and has none either). The five recorded rows (dssd) come first,
 * with their recorded ids and prices; the rest were not recorded: the libcloud fixture's (2014) prices, the
 * earlier default's for vlan_ecx, and a family's for the resources new in 2022 (sparc_t4_* as cpu/mem, zadara
 * as dssd). Keys of other locations and eras (`intel_cpu`/`intel_mem`, the older `msft_*` licences) are in
 * `prices-intel.json`, a full catalogue for a location with Intel hosts, unused unless given with `--pricing`
 * (kept for per-location catalogues).
 */
export const CURRENCIES = ['CHF', 'EUR', 'GBP', 'USD'] as const;

export interface PriceRow {
  id: string;
  currency: string;
  level: number;
  multiplier: number;
  price: string;
  resource: string;
  unit: string;
}

export interface License {
  id: number;
  name: string;
  long_name: string;
  type: 'install' | 'instance' | 'stub';
  user_metric: string;
  burstable: boolean;
}

export interface Discount {
  period: string;
  value: string;
}

/** The highest burst level a resource may have: 20 for cpu/mem/tx and their variants, 1 for the rest. */
export function maxLevelOf(resource: string): number {
  return /(^|_)(cpu|mem)($|_)|^tx($|_)/.test(resource) ? 20 : 1;
}

const LICENSE_TYPES = ['install', 'instance', 'stub'];

export class PriceCatalogue {
  readonly rows: readonly PriceRow[];
  readonly licenses: readonly License[];
  readonly discounts: readonly Discount[];
  /** resource -> currency -> level -> row */
  private readonly index = new Map<string, Map<string, Map<number, PriceRow>>>();
  /** Resources with burst levels and no price rows (`sms`). */
  private readonly unpriced: readonly string[];

  constructor(rows: PriceRow[], licenses: License[], discounts: Discount[], unpriced: readonly string[] = []) {
    this.rows = rows;
    this.licenses = licenses;
    this.discounts = discounts;
    for (const r of rows) {
      let byCurrency = this.index.get(r.resource);
      if (!byCurrency) this.index.set(r.resource, (byCurrency = new Map()));
      let byLevel = byCurrency.get(r.currency);
      if (!byLevel) byCurrency.set(r.currency, (byLevel = new Map()));
      byLevel.set(r.level, r);
    }
    this.unpriced = [...new Set(unpriced)].filter((r) => !this.index.has(r));
  }

  /** Every resource key with a burst level (what `/pricing/` `current` and `/currentusage/` name), sorted. */
  get resources(): string[] {
    return [...this.index.keys(), ...this.unpriced].sort();
  }

  /** Every resource key that has price rows, sorted. */
  get priced(): string[] {
    return [...this.index.keys()].sort();
  }

  has(resource: string): boolean {
    return this.index.has(resource);
  }

  /**
   * The row that prices `resource` at `level` in `currency`: the row of that level, or of the highest level
   * below it that has one (licences have only level 0 rows while the service shows them at level 1).
   */
  rowAt(resource: string, level: number, currency: string): PriceRow | undefined {
    const byLevel = this.index.get(resource)?.get(currency);
    if (!byLevel) return undefined;
    for (let l = level; l >= 0; l--) {
      const row = byLevel.get(l);
      if (row) return row;
    }
    return undefined;
  }

  /** Price per base unit per second at a level (exact decimal). */
  perUnitSecond(resource: string, level: number, currency: string): Money | undefined {
    const row = this.rowAt(resource, level, currency);
    return row ? new Money(row.price).div(row.multiplier) : undefined;
  }

  /** The display unit of a resource (`GHz` of `GHz/hour`, `GB`, `IP`, ...). */
  unitOf(resource: string): string {
    const row = this.index.get(resource)?.values().next().value?.values().next().value as PriceRow | undefined;
    return row ? (row.unit.split('/')[0] ?? '') : '';
  }

  license(name: string): License | undefined {
    return this.licenses.find((l) => l.name === name);
  }
}

const fail = (file: string, what: string): never => {
  throw new ConfigError(`pricing: ${file}: ${what}`);
};

function checkRow(file: string, raw: unknown, i: number): PriceRow {
  const at = `objects[${i}]`;
  if (!raw || typeof raw !== 'object') return fail(file, `${at} is not an object`);
  const r = raw as Record<string, unknown>;
  const id = typeof r.id === 'number' ? String(r.id) : r.id;
  if (typeof id !== 'string' || !/^\d+$/.test(id)) fail(file, `${at}.id must be a numeric string`);
  if (typeof r.resource !== 'string' || !/^[a-z0-9_]{1,64}$/.test(r.resource)) fail(file, `${at}.resource must be a resource key (a-z, 0-9, _)`);
  if (!CURRENCIES.includes(r.currency as (typeof CURRENCIES)[number])) fail(file, `${at}.currency must be one of ${CURRENCIES.join(', ')}`);
  const resource = r.resource as string;
  const max = maxLevelOf(resource);
  if (!Number.isInteger(r.level) || (r.level as number) < 0 || (r.level as number) > max)
    fail(file, `${at}.level must be an integer 0..${max} for ${resource}`);
  if (!Number.isSafeInteger(r.multiplier) || (r.multiplier as number) <= 0) fail(file, `${at}.multiplier must be a positive integer`);
  const price = typeof r.price === 'number' ? String(r.price) : r.price;
  if (typeof price !== 'string' || !/^\d+(\.\d+)?$/.test(price)) fail(file, `${at}.price must be a non-negative decimal string`);
  if (typeof r.unit !== 'string') fail(file, `${at}.unit must be a string`);
  return {
    id: id as string,
    currency: r.currency as string,
    level: r.level as number,
    multiplier: r.multiplier as number,
    price: new Money(price as string).toFixed(20),
    resource,
    unit: r.unit as string,
  };
}

function checkLicense(file: string, raw: unknown, i: number): License {
  const at = `licenses[${i}]`;
  const r = (raw ?? {}) as Record<string, unknown>;
  if (!Number.isSafeInteger(r.id) || (r.id as number) <= 0) fail(file, `${at}.id must be a positive integer`);
  if (typeof r.name !== 'string' || !r.name) fail(file, `${at}.name must be a non-empty string`);
  if (!LICENSE_TYPES.includes(r.type as string)) fail(file, `${at}.type must be one of ${LICENSE_TYPES.join(', ')}`);
  return {
    id: r.id as number,
    name: r.name as string,
    long_name: typeof r.long_name === 'string' ? r.long_name : '',
    type: r.type as License['type'],
    user_metric: typeof r.user_metric === 'string' ? r.user_metric : '',
    burstable: r.burstable === true,
  };
}

function checkDiscount(file: string, raw: unknown, i: number): Discount {
  const r = (raw ?? {}) as Record<string, unknown>;
  if (typeof r.period !== 'string' || !/^\d+ (day|week|month|year)s?$/.test(r.period)) fail(file, `discounts[${i}].period must look like "3 months"`);
  const value = String(r.value ?? '');
  if (!/^0?\.\d+$|^[01](\.\d+)?$/.test(value) || new Money(value).gt(1)) fail(file, `discounts[${i}].value must be a fraction 0..1`);
  return { period: r.period as string, value: new Money(value).toFixed(10) };
}

/** Read and check a catalogue file; every problem names the file and the entry (a bad file stops start-up). */
export function readCatalogue(file: string): PriceCatalogue {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    return fail(file, `cannot read it as JSON (${(err as Error).message})`);
  }
  const d = (doc ?? {}) as Record<string, unknown>;
  if (!Array.isArray(d.objects) || !d.objects.length) return fail(file, 'needs a non-empty "objects" list of price rows');
  const rows = d.objects.map((r, i) => checkRow(file, r, i));
  const ids = new Set<string>();
  const keys = new Set<string>();
  for (const r of rows) {
    if (ids.has(r.id)) fail(file, `price id ${r.id} appears twice`);
    ids.add(r.id);
    const key = `${r.resource}/${r.level}/${r.currency}`;
    if (keys.has(key)) fail(file, `two prices for ${r.resource} level ${r.level} in ${r.currency}`);
    keys.add(key);
  }
  // Level 0 (the subscription price) exists for every resource and currency that has any row.
  for (const k of keys) {
    const [resource, , currency] = k.split('/');
    if (!keys.has(`${resource}/0/${currency}`)) fail(file, `${resource} has no level 0 (subscription) price in ${currency}`);
  }
  const licenses = Array.isArray(d.licenses) ? d.licenses.map((l, i) => checkLicense(file, l, i)) : [];
  const discounts = Array.isArray(d.discounts) ? d.discounts.map((x, i) => checkDiscount(file, x, i)) : [];
  const unpriced: string[] = [];
  if (d.current !== undefined) {
    if (!d.current || typeof d.current !== 'object' || Array.isArray(d.current)) fail(file, '"current" must be an object of resource keys');
    for (const key of Object.keys(d.current as object)) {
      if (!/^[a-z0-9_]{1,64}$/.test(key)) fail(file, `current.${key} is not a resource key (a-z, 0-9, _)`);
      unpriced.push(key);
    }
  }
  return new PriceCatalogue(rows, licenses, discounts, unpriced);
}
