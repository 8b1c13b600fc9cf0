/**
 * The built-in catalogue of locations (`--locations zrh,sjc` needs no files): the real service's locations as
 * its recorded `/locations/` answer lists them (id, display name, country), with what Stratus makes differ
 * between them when it serves several: the currency accounts bill in, the hosts' CPU type (and with it the
 * capabilities and the price list: AMD locations bill `cpu`/`mem`, Intel ones `intel_cpu`/`intel_mem`), the
 * public IP pool, the VLAN tags and the library drives. The currencies, pools and libraries are Stratus's
 * choices (the recording shows none of them): each location bills in the currency of its country where the
 * price list has one (CHF, EUR, GBP, USD), USD elsewhere; pools are distinct blocks so an address (or a VLAN
 * tag) names its location. `--location-settings` overrides any of this per location (config.ts).
 */
export interface LocationEntry {
  id: string;
  displayName: string;
  countryCode: string;
  currency: 'CHF' | 'EUR' | 'GBP' | 'USD';
  cpuType: 'amd' | 'intel';
  /** `CIDR[@GATEWAY],…` as `--ip-pool` takes it. */
  ipPool: string;
  /** `FROM-TO` as `--vlan-pool` takes it: 200 tags of its own per location (its place in the catalogue). */
  vlanPool: string;
  /** Distributions missing from this location's library (the built-in library otherwise). */
  libraryWithout: string[];
  /** The documentation version the recorded answer links to. */
  docs: string;
}

const entry = (
  id: string,
  displayName: string,
  countryCode: string,
  currency: LocationEntry['currency'],
  cpuType: LocationEntry['cpuType'],
  ipPool: string,
  libraryWithout: string[] = [],
  docs = '2.11',
): Omit<LocationEntry, 'vlanPool'> => ({ id, displayName, countryCode, currency, cpuType, ipPool, libraryWithout, docs });

/** Every location the recorded answer (and the published list of endpoints) names. */
export const LOCATIONS: Record<string, LocationEntry> = Object.fromEntries(
  [
    // The default location: what a deployment of one location has always been (EUR, AMD, the full library).
    entry('zrh', 'Zurich, Switzerland', 'CH', 'EUR', 'amd', '185.12.6.0/24', [], '2.14'),
    entry('gva', 'Geneva, Switzerland', 'CH', 'CHF', 'amd', '185.12.7.0/24'),
    entry('fra', 'Frankfurt, Germany', 'DE', 'EUR', 'amd', '185.12.8.0/24'),
    entry('dub', 'Dublin, Ireland', 'IE', 'EUR', 'intel', '185.12.9.0/24', ['openSUSE']),
    entry('lon', 'London, United Kingdom', 'GB', 'GBP', 'intel', '185.12.10.0/24', ['openSUSE']),
    entry('sjc', 'San Jose, United States', 'US', 'USD', 'intel', '162.213.36.0/24', ['openSUSE', 'Fedora']),
    entry('wdc', 'Washington DC, United States', 'US', 'USD', 'intel', '162.213.37.0/24', ['openSUSE', 'Fedora']),
    entry('mia', 'Miami, United States', 'US', 'USD', 'intel', '162.213.38.0/24', ['openSUSE', 'Fedora']),
    entry('hnl', 'Honolulu, United States', 'US', 'USD', 'intel', '162.213.39.0/24', ['openSUSE', 'Fedora']),
    entry('mel', 'Melbourne, Australia', 'AU', 'USD', 'amd', '103.16.40.0/24', ['openSUSE']),
    entry('per', 'Perth, Australia', 'AU', 'USD', 'amd', '103.16.41.0/24', ['openSUSE']),
    entry('mnl', 'Manila, Philippines', 'PH', 'USD', 'amd', '103.16.42.0/24', ['openSUSE', 'Fedora']),
    entry('mnl2', 'Manila-2, Philippines', 'PH', 'USD', 'amd', '103.16.43.0/24', ['openSUSE', 'Fedora']),
    entry('crk', 'Clark, Philippines', 'PH', 'USD', 'amd', '103.16.44.0/24', ['openSUSE', 'Fedora']),
    entry('tyo', 'Tokyo, Japan', 'JP', 'USD', 'amd', '103.16.45.0/24', ['openSUSE']),
    entry('ruh', 'Riyadh, Saudi Arabia', 'SA', 'USD', 'amd', '103.16.46.0/24', ['openSUSE', 'Fedora']),
  ].map((e, i) => [e.id, { ...e, vlanPool: `${i * 200 + 2}-${i * 200 + 201}` }]),
);

/**
 * Where a location other than the first keeps its state: its own store beside the first's. A SQLite file
 * `dir/name.db` becomes `dir/name-sjc.db` (`:memory:` stays: each opening is a database of its own); a
 * PostgreSQL URL gets the schema `<schema>_sjc` (its search_path's first schema, `public` when it names
 * none), which `serve`/`migrate` create. The first location's store is `--db` itself, so a deployment that
 * grows from one location to several keeps its data where it was.
 */
export function locationDb(db: string, code: string): string {
  if (db === ':memory:') return db;
  if (!/^postgres(ql)?:\/\//.test(db)) {
    const m = /^(.*?)(\.[A-Za-z0-9]{1,8})?$/.exec(db)!;
    return `${m[1]}-${code}${m[2] ?? ''}`;
  }
  const u = new URL(db);
  const options = u.searchParams.get('options') ?? '';
  const current = /search_path=([^\s,]+)/.exec(options)?.[1] ?? 'public';
  const schema = `${current}_${code}`;
  const rest = options.replace(/-c\s*search_path=\S+/, '').trim();
  u.searchParams.delete('options');
  const others = [...u.searchParams].map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  const opt = `options=${encodeURIComponent(`${rest ? `${rest} ` : ''}-c search_path=${schema}`)}`;
  return `${u.protocol}//${u.username ? `${u.username}${u.password ? `:${u.password}` : ''}@` : ''}${u.host}${u.pathname}?${[...others, opt].join('&')}`;
}
