import { accessSync, constants, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { assetPath } from './assets.js';
import { ConfigError } from './core/errors.js';
import { DEFAULT_DELAYS, parseDelays, type Delays } from './sim/delays.js';
import { DEFAULT_RULES, parseRuleJson, parseRuleList, RuleError, type Rule } from './core/rate-rules.js';
import { BUILTIN_CATALOGUE, readCatalogue, type LibraryEntry } from './resources/libdrives/catalogue.js';
import { DEFAULT_LOGIN_PROTECTION, describeLoginProtection, LoginRuleError, parseLoginProtection, type LoginProtection } from './core/login-rules.js';
import { readCatalogue as readPriceCatalogue, type PriceCatalogue } from './billing/catalogue.js';
import { parseCapacity, DEFAULT_CAPACITY, type CloudCapacity } from './billing/capacity.js';
import { LOCATIONS, locationDb } from './core/locations.js';
import { DEFAULT_IP_POOL, DEFAULT_NAMESERVERS, parseIpPool, parseNameservers, type IpPoolBlock } from './core/ip-pool.js';

export interface Config {
  host: string;
  port: number;
  /**
   * API processes `serve` runs on the one listening socket (node:cluster; src/serve-workers.ts): 1 = this
   * process alone. Any worker answers any request: sessions, rate limits and timers live in the store.
   */
  workers: number;
  /** A SQLite file path, `:memory:`, or a `postgres://` URL. */
  db: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Largest accepted request body in bytes; bigger ones get 413. */
  bodyLimit: number;
  /** The largest drive image an upload may bring (bytes). */
  uploadLimit: number;
  /** MiB of presented objects kept for reuse (each object version is built and serialised once). */
  cacheMiB: number;
  answerCacheMiB: number;
  /** SQLite prepared statements kept for reuse (least recently used out). */
  statementCache: number;
  /** Verified logins kept (per account and client address), so a repeated Basic header skips scrypt. */
  credentialCache: number;
  /** A client must send its whole request within this many ms. */
  requestTimeoutMs: number;
  /** Idle keep-alive connections close after this many ms. */
  keepAliveTimeoutMs: number;
  /** SMTP server for outgoing mail (`smtp://user:pass@host:587`); null = write mail to the outbox folder. */
  smtpUrl: string | null;
  /** Webhooks may go to loopback, private and link-local addresses (local development); off: public addresses only. */
  webhooksAllowPrivate: boolean;
  /** Folder for `.eml` files when no SMTP server is configured. */
  outbox: string;
  /** `From:` of outgoing mail. */
  mailFrom: string;
  /** Base of links in e-mails (`https://cloud.example.com`); null = `http://<host>:<port>` of this server. */
  publicUrl: string | null;
  /** Promo codes sign-up accepts (exact, case-insensitive); empty = only a null/absent promo. */
  promoCodes: string[];
  /** Seconds a Digest nonce stays valid before the client is told `stale=true`. */
  digestNonceTtl: number;
  currency: string;
  /** The price catalogue, licences and discounts (billing/catalogue.ts), checked at start. */
  pricing: PriceCatalogue;
  /** What a new account's balance starts at (a decimal string). */
  openingBalance: string;
  /** How long usage records (`/usage/`, `/burstusage/`, `/dailyburstusage/`) are kept, ms of the injected clock. */
  usageRetentionMs: number;
  /** The simulated cloud's capacity per resource, which burst levels follow (billing/capacity.ts). */
  cloudCapacity: CloudCapacity;
  /** The CPU type of this location's hosts: a new server's default `cpu_type`. */
  cpuType: 'amd' | 'intel';
  capabilities: Record<string, unknown>;
  /** Probability (0..1) that a simulated boot fails; 0 = never (chaos testing). */
  simFailureRate: number;
  /** Simulated hypervisor hosts (and as many storage nodes) objects are placed on: availability groups. */
  simHosts: number;
  /** Serve HTTPS (with a certificate from the local CA in the data folder, or `tlsCert`/`tlsKey`). */
  tls: boolean;
  /** PEM files of the certificate (chain) and key to serve HTTPS with; both or neither. */
  tlsCert: string | null;
  tlsKey: string | null;
  /** The location this service is (`zrh`): `/locations/`, and the `{location}.cloudsigma.com` name it answers as. */
  location: string;
  /**
   * Every location this deployment serves (`--locations zrh,sjc`), each a cloud of its own with its own store
   * (core/locations.ts); one, `location`, unless given. `location` is then the one operator commands act on
   * and the one a host naming none (localhost, an address) reaches: the first unless `--location` names another.
   */
  locations: string[];
  /** Host named in VNC tunnel URLs (`vnc://<host>:<port>`). */
  vncHost: string;
  /** Simulated durations of infrastructure operations, ms. */
  delays: Delays;
  /** The deployment's rate-limit rules (the spec's table by default), or null when limits are off. */
  rateLimits: readonly Rule[] | null;
  /** The library drive catalogue (checked), stored into the database at start-up. */
  libdrives: LibraryEntry[];
  /** Public IPv4 blocks the operator assigns from and DHCP leases come from (`185.12.6.0/24@185.12.6.1,…`). */
  ipPool: IpPoolBlock[];
  /** Nameservers every pool IP shows. */
  nameservers: string[];
  /** VLAN tags the operator assigns VLANs from (`bottom_vlan_tag`, lowest free first); null = VLANs show no tag. */
  vlanPool: VlanPool | null;
  /**
   * Per-location overrides of the built-in catalogue (`--location-settings`), by location code: what a
   * location of several takes instead of its catalogue entry or the deployment's setting.
   */
  locationSettings: Record<string, LocationOverrides>;
  /** Login protection against password guessing (resources/accounts/login-guard.ts), or null when off. */
  loginProtection: LoginProtection | null;
  /** The `--ci` preset: other settings' defaults become what a test pipeline wants (no limits, no delays). */
  ci: boolean;
  /** The demo account's e-mail and password, set by the operator (a pipeline knows them); null = generated on first start. */
  demoLogin: { email: string; password: string } | null;
  /** The admin plane's token (`Authorization: Bearer …`); null = generated at start; 'off' = no admin plane. */
  adminToken: string | null;
  /** Who may reach the admin plane: loopback addresses only (default) or any client that has the token. */
  adminAccess: 'loopback' | 'any';
  /** Where `serve` writes `{url, email, password, admin_token, pid}` once it answers; null = nowhere. */
  readyFile: string | null;
  /** The web console's build folder (dist/ui/, scripts/build.js), served at /ui/; null = no console. */
  consoleDir: string | null;
  /** A seed file (src/admin/seed.ts) `serve` applies before it answers; null = none. */
  seed: string | null;
  /** Log lines as JSON (pino's) or readable text; default pretty on a terminal, json otherwise. */
  logFormat: 'pretty' | 'json';
  /** One `info` line per request: method, path, status, duration, request id, user. */
  accessLog: boolean;
}

/** A range of VLAN tags, both ends included (1..4094). */
export interface VlanPool {
  from: number;
  to: number;
}

/** What `--location-settings` may set for one location (each key as the setting of the same name takes it). */
export type LocationOverrides = Partial<Pick<Config, 'rateLimits' | 'ipPool' | 'vlanPool' | 'currency' | 'cpuType' | 'pricing' | 'capabilities'>>;

/** Every setting: flag name, environment variable, default, and how to read it. */
interface Setting<K extends keyof Config> {
  key: K;
  flag: string;
  env: string;
  help: string;
  /** `ci`: whether the `--ci` preset is on (a few settings read their value against its defaults). */
  parse(raw: string, ctx: { ci: boolean }): Config[K];
  fallback: () => Config[K];
  /** The default under `--ci`, when it differs. */
  ci?: () => Config[K];
  /** A switch: `--flag` alone means `true` (the environment variable takes 1/0, true/false). */
  boolean?: true;
  /** The default as help shows it, where the value itself does not say it (a file, a rule table). */
  shown?: string;
}

const int = (name: string, min: number, max: number) => (raw: string) => {
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
};

/** A retention as days, hours or minutes (`31d`, `12h`, `90m`), from 1 minute to 10 years. */
function readRetention(raw: string): number {
  const m = /^(\d{1,7})(d|h|m)$/.exec(raw);
  const ms = m ? Number(m[1]) * { d: 86_400_000, h: 3_600_000, m: 60_000 }[m[2] as 'd' | 'h' | 'm'] : NaN;
  if (!(ms >= 60_000 && ms <= 3650 * 86_400_000)) throw new ConfigError(`usage-retention must be a duration like 31d, 12h or 90m (1m to 3650d), got "${raw}"`);
  return ms;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

function readCapabilities(path: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new ConfigError(`cannot read capabilities file ${path}: ${(e as Error).message}`);
  }
  const caps = parsed as Record<string, unknown>;
  if (typeof caps !== 'object' || caps === null || Array.isArray(caps) || typeof caps.hosts !== 'object' || typeof caps.hypervisors !== 'object')
    throw new ConfigError(`capabilities file ${path} must be a JSON object with "hosts" and "hypervisors"`);
  return caps;
}

/** `off`, `default` (the spec's table), an inline rule list (`GET=1000/min,...`), or a JSON rule file. */
function readRateLimits(raw: string): readonly Rule[] | null {
  const value = raw.trim();
  if (value === 'off') return null;
  if (value === 'default') return DEFAULT_RULES;
  try {
    if (value.includes('=')) return parseRuleList(value) as Rule[];
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(value, 'utf8'));
    } catch (e) {
      throw new ConfigError(`rate-limits: cannot read rule file ${value}: ${(e as Error).message} (give off, default, rules like GET=100/min, or a JSON file)`);
    }
    return parseRuleJson(parsed);
  } catch (e) {
    if (e instanceof RuleError) throw new ConfigError(`rate-limits${value.includes('=') ? '' : ` file ${value}`}: ${e.message}`);
    throw e;
  }
}

/** `FROM-TO` VLAN tags (1..4094), or `off`. */
function readVlanPool(raw: string): VlanPool | null {
  const value = raw.trim();
  if (value === 'off') return null;
  const m = /^(\d{1,4})-(\d{1,4})$/.exec(value);
  const [from, to] = m ? [Number(m[1]), Number(m[2])] : [NaN, NaN];
  if (!m || from < 1 || to > 4094 || from > to)
    throw new ConfigError(`vlan-pool must be FROM-TO with 1 <= FROM <= TO <= 4094 (e.g. 100-199), or off; got "${raw}"`);
  return { from, to };
}

/** The settings `--location-settings` may set per location (by flag name) and the Config key each sets. */
const LOCATION_KEYS = ['rate-limits', 'ip-pool', 'vlan-pool', 'currency', 'cpu-type', 'pricing', 'capabilities'] as const;

/**
 * `--location-settings`: inline JSON (starting with `{`) or a JSON file, `{code: {flag: value}}`, each value read
 * by that setting's own parser, so it takes exactly what the flag takes and a bad one is refused the same way.
 */
function readLocationSettings(raw: string): Record<string, LocationOverrides> {
  const value = raw.trim();
  let doc: unknown;
  try {
    doc = JSON.parse(value.startsWith('{') ? value : readFileSync(value, 'utf8'));
  } catch (e) {
    throw new ConfigError(`location-settings: cannot read ${value.startsWith('{') ? 'the inline JSON' : value} (${(e as Error).message})`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new ConfigError('location-settings must be a JSON object of locations: {"sjc": {...}}');
  const out: Record<string, LocationOverrides> = {};
  for (const [code, given] of Object.entries(doc)) {
    if (!LOCATIONS[code]) throw new ConfigError(`location-settings: unknown location "${code}"; the built-in ones are ${Object.keys(LOCATIONS).join(', ')}`);
    if (typeof given !== 'object' || given === null || Array.isArray(given)) throw new ConfigError(`location-settings: ${code} must be an object of settings`);
    const own: Record<string, unknown> = {};
    for (const [flag, v] of Object.entries(given as Record<string, unknown>)) {
      const setting = SETTINGS.find((x) => x.flag === flag);
      if (!setting || !(LOCATION_KEYS as readonly string[]).includes(flag))
        throw new ConfigError(`location-settings: ${code}: "${flag}" is not a per-location setting (${LOCATION_KEYS.join(', ')})`);
      if (typeof v !== 'string') throw new ConfigError(`location-settings: ${code}: ${flag} must be a string, as the flag takes it`);
      try {
        own[setting.key] = setting.parse(v, { ci: false });
      } catch (e) {
        throw new ConfigError(`location-settings: ${code}: ${(e as Error).message}`);
      }
    }
    out[code] = own as LocationOverrides;
  }
  return out;
}

/** An optional absolute URL setting ('' = unset) with one of the given schemes. */
function readUrl(name: string, schemes: string[], example: string, raw: string): URL | null {
  const value = raw.trim();
  if (value === '') return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(`${name} must be a URL like ${example}, got "${raw}"`);
  }
  if (!schemes.includes(url.protocol)) throw new ConfigError(`${name} must start with ${schemes.map((p) => `${p}//`).join(' or ')}`);
  if (!url.hostname) throw new ConfigError(`${name} must name a host`);
  return url;
}

function readSmtpUrl(raw: string): string | null {
  return readUrl('smtp-url', ['smtp:', 'smtps:'], 'smtp://user:pass@host:587', raw) ? raw.trim() : null;
}

function readPublicUrl(raw: string): string | null {
  const url = readUrl('public-url', ['http:', 'https:'], 'https://cloud.example.com', raw);
  if (!url) return null;
  if (url.search || url.hash) throw new ConfigError('public-url must not have a query or fragment');
  return raw.trim().replace(/\/+$/, '');
}

function readPromoCodes(raw: string): string[] {
  const codes = raw
    .split(',')
    .map((c) => c.trim())
    .filter((c) => c !== '');
  for (const c of codes)
    if (!/^[\x21-\x7e]{1,64}$/.test(c)) throw new ConfigError(`promo-codes: "${c}" is not a promo code (1-64 printable characters, no spaces)`);
  return codes;
}

/** A switch's value from the environment (or `true` from a bare flag). */
const readSwitch = (name: string) => (raw: string) => {
  const v = raw.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  throw new ConfigError(`${name} must be 1 or 0 (true or false), got "${raw}"`);
};

/** A PEM file that exists and can be read (its content is checked when the server starts). */
function readablePemFile(name: string, raw: string): string {
  const path = raw.trim();
  try {
    accessSync(path, constants.R_OK);
  } catch {
    throw new ConfigError(`${name}: cannot read "${path}": give a readable PEM file`);
  }
  return path;
}

/** `EMAIL:PASSWORD` (split at the first colon: an e-mail has none, a password may). */
function readDemoLogin(raw: string): { email: string; password: string } {
  const at = raw.indexOf(':');
  const email = at < 0 ? '' : raw.slice(0, at).trim().toLowerCase();
  const password = at < 0 ? '' : raw.slice(at + 1);
  if (!/^[^\s@:]+@[^\s@:]+$/.test(email) || email.length > 254) throw new ConfigError('demo-login must be EMAIL:PASSWORD, e.g. ci@example.com:s3cret');
  if (password.length < 1 || password.length > 256 || /[\0\r\n]/.test(password))
    throw new ConfigError('demo-login: the password must be 1 to 256 characters on one line');
  return { email, password };
}

/** Under `--ci` every simulated duration is 0 (`drive.write_rate` and `nic.tx_rate` are rates, not durations: they stay). */
const CI_DELAYS: Delays = {
  ...(Object.fromEntries(Object.keys(DEFAULT_DELAYS).map((k) => [k, 0])) as Delays),
  'drive.write_rate': DEFAULT_DELAYS['drive.write_rate'],
  'nic.tx_rate': DEFAULT_DELAYS['nic.tx_rate'],
};

/** A parser from another module whose errors become ConfigErrors. */
const wrapped =
  <T>(parse: (raw: string) => T) =>
  (raw: string): T => {
    try {
      return parse(raw);
    } catch (e) {
      throw new ConfigError((e as Error).message);
    }
  };

const DEFAULT_CAPABILITIES = assetPath('resources/capabilities/defaults.json');
const DEFAULT_PRICING = assetPath('billing/prices.json');
/** The price list of a location with Intel hosts (`intel_cpu`/`intel_mem`), when several are served. */
const INTEL_PRICING = assetPath('billing/prices-intel.json');
let intelPricing: PriceCatalogue | undefined;

export const SETTINGS: Setting<keyof Config>[] = [
  { key: 'host', flag: 'host', env: 'STRATUS_HOST', help: 'address to listen on', parse: (s) => s, fallback: () => '127.0.0.1' },
  { key: 'port', flag: 'port', env: 'STRATUS_PORT', help: 'TCP port (0 = any free port)', parse: int('port', 0, 65535), fallback: () => 8080 },
  {
    key: 'workers',
    flag: 'workers',
    env: 'STRATUS_WORKERS',
    help: 'API processes sharing the port and the database: a number, or auto (one per core); SIGHUP replaces them one by one',
    parse: (raw) => (raw.trim() === 'auto' ? availableParallelism() : int('workers', 1, 256)(raw.trim())),
    fallback: () => 1,
  },
  {
    key: 'db',
    flag: 'db',
    env: 'STRATUS_DATABASE_URL',
    help: 'SQLite file, :memory:, or postgres://user@host/db',
    parse: (s) => {
      if (!s) throw new ConfigError('db must not be empty');
      const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(s)?.[1];
      if (scheme && !/^postgres(ql)?$/.test(scheme))
        throw new ConfigError(`db: "${scheme}://" databases are not supported; give a SQLite file path, :memory:, or postgres://user@host/db`);
      return s;
    },
    fallback: () => './data/stratus.db',
  },
  {
    key: 'logLevel',
    flag: 'log-level',
    env: 'STRATUS_LOG_LEVEL',
    help: LOG_LEVELS.join('|'),
    parse: (s) => {
      if (!(LOG_LEVELS as readonly string[]).includes(s)) throw new ConfigError(`log-level must be one of ${LOG_LEVELS.join(', ')}`);
      return s as Config['logLevel'];
    },
    fallback: () => 'info',
  },
  {
    key: 'logFormat',
    flag: 'log-format',
    env: 'STRATUS_LOG_FORMAT',
    help: 'pretty (readable lines) or json (one JSON object a line, for log collectors)',
    parse: (raw) => {
      if (raw !== 'pretty' && raw !== 'json') throw new ConfigError(`log-format must be pretty or json, got "${raw}"`);
      return raw;
    },
    fallback: () => (process.stdout.isTTY ? 'pretty' : 'json'),
    shown: 'pretty on a terminal, json otherwise',
  },
  {
    key: 'accessLog',
    flag: 'access-log',
    env: 'STRATUS_ACCESS_LOG',
    help: 'log every request at info: method, path, status, duration, request id, user',
    parse: readSwitch('access-log'),
    fallback: () => false,
    boolean: true,
  },
  {
    key: 'bodyLimit',
    flag: 'body-limit',
    env: 'STRATUS_BODY_LIMIT',
    help: 'max request body bytes',
    parse: int('body-limit', 1024, 1 << 30),
    fallback: () => 1 << 20,
  },
  {
    key: 'uploadLimit',
    flag: 'upload-limit',
    env: 'STRATUS_UPLOAD_LIMIT',
    help: 'max bytes of a drive image uploaded (plain, chunked or resumable)',
    parse: int('upload-limit', 1, Number.MAX_SAFE_INTEGER),
    fallback: () => 100 * 1024 ** 3,
  },
  {
    key: 'cacheMiB',
    flag: 'cache-mib',
    env: 'STRATUS_CACHE_MIB',
    help: 'MiB of presented objects kept for reuse, as objects and as served text, half each (0 = none)',
    parse: int('cache-mib', 0, 65536),
    fallback: () => 32,
  },
  {
    key: 'answerCacheMiB',
    flag: 'answer-cache-mib',
    env: 'STRATUS_ANSWER_CACHE_MIB',
    help: 'MiB of GET answers kept for reuse while no row changes (0 = none; on PostgreSQL one more connection, LISTENing)',
    parse: int('answer-cache-mib', 0, 65536),
    fallback: () => 16,
  },
  {
    key: 'statementCache',
    flag: 'statement-cache',
    env: 'STRATUS_STATEMENT_CACHE',
    help: 'SQLite prepared statements kept for reuse, least recently used out (native memory, tens of KiB each; 0 = none)',
    parse: int('statement-cache', 0, 100_000),
    fallback: () => 500,
  },
  {
    key: 'credentialCache',
    flag: 'credential-cache',
    env: 'STRATUS_CREDENTIAL_CACHE',
    help: 'verified logins kept (per account and client address), the least recently verified out; a miss costs a scrypt check (0 = none)',
    parse: int('credential-cache', 0, 10_000_000),
    fallback: () => 10_000,
  },
  {
    key: 'requestTimeoutMs',
    flag: 'request-timeout',
    env: 'STRATUS_REQUEST_TIMEOUT_MS',
    help: 'ms a client has to send a whole request',
    parse: int('request-timeout', 100, 3_600_000),
    fallback: () => 30_000,
  },
  {
    key: 'keepAliveTimeoutMs',
    flag: 'keep-alive-timeout',
    env: 'STRATUS_KEEP_ALIVE_TIMEOUT_MS',
    help: 'ms an idle keep-alive connection stays open',
    parse: int('keep-alive-timeout', 100, 3_600_000),
    fallback: () => 72_000,
  },
  {
    key: 'currency',
    flag: 'currency',
    env: 'STRATUS_CURRENCY',
    help: 'account currency code',
    parse: (s) => {
      if (!/^[A-Z]{3}$/.test(s)) throw new ConfigError('currency must be a three-letter upper-case code');
      return s;
    },
    fallback: () => 'EUR',
  },
  {
    key: 'pricing',
    flag: 'pricing',
    env: 'STRATUS_PRICING',
    help: 'JSON price catalogue (a saved GET /pricing/?limit=0 answer, plus optional licenses and discounts)',
    parse: readPriceCatalogue,
    shown: 'built-in (src/billing/prices.json)',
    fallback: () => readPriceCatalogue(DEFAULT_PRICING),
  },
  {
    key: 'openingBalance',
    flag: 'opening-balance',
    env: 'STRATUS_OPENING_BALANCE',
    help: "a new account's balance",
    parse: (s) => {
      if (!/^\d{1,15}(\.\d{1,20})?$/.test(s)) throw new ConfigError('opening-balance must be a non-negative decimal like 100 or 250.50');
      return s;
    },
    fallback: () => '10000',
  },
  {
    key: 'usageRetentionMs',
    flag: 'usage-retention',
    env: 'STRATUS_USAGE_RETENTION',
    help: 'how long usage records (/usage/, /burstusage/, /dailyburstusage/) are kept: 31d, 12h, ... (pruned hourly)',
    parse: readRetention,
    shown: '31d',
    fallback: () => 31 * 86_400_000,
  },
  {
    key: 'cloudCapacity',
    flag: 'cloud-capacity',
    env: 'STRATUS_CLOUD_CAPACITY',
    help: 'simulated cloud capacity burst levels follow: cpu=MHz,mem=bytes,tx=bytes per 5 minutes',
    parse: parseCapacity,
    shown: Object.entries(DEFAULT_CAPACITY)
      .map(([k, v]) => `${k}=${v}`)
      .join(','),
    fallback: () => ({ ...DEFAULT_CAPACITY }),
  },
  {
    key: 'cpuType',
    flag: 'cpu-type',
    env: 'STRATUS_CPU_TYPE',
    help: "amd|intel: this location's hosts, a new server's default cpu_type",
    parse: (s) => {
      if (s !== 'amd' && s !== 'intel') throw new ConfigError('cpu-type must be amd or intel');
      return s;
    },
    fallback: () => 'amd',
  },
  { key: 'smtpUrl', flag: 'smtp-url', env: 'STRATUS_SMTP_URL', help: 'SMTP server for mail (none: outbox folder)', parse: readSmtpUrl, fallback: () => null },
  {
    key: 'outbox',
    flag: 'outbox',
    env: 'STRATUS_OUTBOX',
    help: 'folder for .eml files when no SMTP',
    parse: (s) => {
      if (!s.trim()) throw new ConfigError('outbox must not be empty');
      return s;
    },
    fallback: () => './data/outbox',
  },
  {
    key: 'mailFrom',
    flag: 'mail-from',
    env: 'STRATUS_MAIL_FROM',
    help: 'From: address of outgoing mail',
    parse: (s) => {
      if (!/@/.test(s) || /[\r\n]/.test(s)) throw new ConfigError('mail-from must be an e-mail address, e.g. "Stratus <no-reply@example.com>"');
      return s;
    },
    fallback: () => 'Stratus <no-reply@stratus.local>',
  },
  {
    key: 'webhooksAllowPrivate',
    flag: 'webhooks-allow-private',
    env: 'STRATUS_WEBHOOKS_ALLOW_PRIVATE',
    help: 'let webhooks go to loopback, private and link-local addresses (local development); off: public addresses only',
    parse: readSwitch('webhooks-allow-private'),
    fallback: () => false,
    boolean: true,
  },
  { key: 'publicUrl', flag: 'public-url', env: 'STRATUS_PUBLIC_URL', help: 'base of links in e-mails', parse: readPublicUrl, fallback: () => null },
  { key: 'promoCodes', flag: 'promo-codes', env: 'STRATUS_PROMO_CODES', help: 'comma list of accepted promo codes', parse: readPromoCodes, fallback: () => [] },
  {
    key: 'digestNonceTtl',
    flag: 'digest-nonce-ttl',
    env: 'STRATUS_DIGEST_NONCE_TTL',
    help: 'seconds a Digest nonce is valid',
    parse: int('digest-nonce-ttl', 10, 86_400),
    fallback: () => 300,
  },
  {
    key: 'capabilities',
    flag: 'capabilities',
    env: 'STRATUS_CAPABILITIES',
    help: 'JSON file with the location capabilities',
    parse: readCapabilities,
    shown: 'built-in (src/resources/capabilities/defaults.json)',
    fallback: () => readCapabilities(DEFAULT_CAPABILITIES),
  },
  {
    key: 'rateLimits',
    flag: 'rate-limits',
    env: 'STRATUS_RATE_LIMITS',
    help: 'off | default | rules (GET=100/min,...) | JSON rule file',
    parse: readRateLimits,
    shown: "default (the spec's table; off under --ci)",
    fallback: () => DEFAULT_RULES,
    ci: () => null,
  },
  {
    key: 'loginProtection',
    flag: 'login-protection',
    env: 'STRATUS_LOGIN_PROTECTION',
    help: 'off | default | rules (pair=5,address=20,account=50,window=15m,lock=15m)',
    parse: (raw) => {
      try {
        return parseLoginProtection(raw);
      } catch (e) {
        if (e instanceof LoginRuleError) throw new ConfigError(`login-protection: ${e.message}`);
        throw e;
      }
    },
    shown: `default (${describeLoginProtection(DEFAULT_LOGIN_PROTECTION)}; off under --ci)`,
    fallback: () => ({ ...DEFAULT_LOGIN_PROTECTION }),
    ci: () => null,
  },
  {
    key: 'delays',
    flag: 'delays',
    env: 'STRATUS_DELAYS',
    help: 'simulated operation durations, e.g. drive.create=0,drive.clone=30000 (ms)',
    parse: (raw, { ci }) => {
      try {
        return parseDelays(raw, ci ? CI_DELAYS : DEFAULT_DELAYS);
      } catch (e) {
        throw new ConfigError((e as Error).message);
      }
    },
    shown: `${Object.entries(DEFAULT_DELAYS)
      .map(([k, v]) => `${k}=${v}`)
      .join(',')} (durations 0 under --ci)`,
    fallback: () => ({ ...DEFAULT_DELAYS }),
    ci: () => ({ ...CI_DELAYS }),
  },
  {
    key: 'libdrives',
    flag: 'libdrives',
    env: 'STRATUS_LIBDRIVES',
    help: 'JSON file with the library drive catalogue',
    parse: (path) => {
      try {
        return readCatalogue(path);
      } catch (e) {
        throw new ConfigError(`libdrives: ${(e as Error).message}`);
      }
    },
    shown: 'built-in (src/resources/libdrives/catalogue.json)',
    fallback: () => readCatalogue(BUILTIN_CATALOGUE),
  },
  {
    key: 'simFailureRate',
    flag: 'sim-failure-rate',
    env: 'STRATUS_SIM_FAILURE_RATE',
    help: 'probability (0..1) that a simulated boot fails',
    parse: (raw) => {
      const n = Number(raw);
      if (!/^(0(\.\d+)?|1(\.0+)?)$/.test(raw) || n < 0 || n > 1) throw new ConfigError(`sim-failure-rate must be a number from 0 to 1, got "${raw}"`);
      return n;
    },
    fallback: () => 0,
  },
  {
    key: 'simHosts',
    flag: 'sim-hosts',
    env: 'STRATUS_SIM_HOSTS',
    help: 'simulated hypervisor hosts, and as many storage nodes, that servers and drives are placed on (availability groups)',
    parse: (raw) => {
      if (!/^[1-9]\d{0,4}$/.test(raw)) throw new ConfigError(`sim-hosts must be a whole number from 1 to 99999, got "${raw}"`);
      return Number(raw);
    },
    fallback: () => 8,
  },
  {
    key: 'location',
    flag: 'location',
    env: 'STRATUS_LOCATION',
    help: 'location code this service is (zrh, fra, ...): what /locations/ answers and the {location}.cloudsigma.com name it serves',
    parse: (raw) => {
      if (!/^[A-Za-z][A-Za-z0-9]{1,15}$/.test(raw))
        throw new ConfigError(`location must be a location code of letters and digits (zrh, fra, mnl2), got "${raw}"`);
      return raw.toLowerCase();
    },
    fallback: () => 'zrh',
  },
  {
    key: 'locations',
    flag: 'locations',
    env: 'STRATUS_LOCATIONS',
    help: `locations this deployment serves, each its own cloud chosen by the request's host (${Object.keys(LOCATIONS).join(', ')})`,
    parse: (raw) => {
      const codes = raw.split(',').map((c) => c.trim().toLowerCase());
      for (const c of codes)
        if (!LOCATIONS[c]) throw new ConfigError(`locations: unknown location "${c}"; the built-in ones are ${Object.keys(LOCATIONS).join(', ')}`);
      if (new Set(codes).size !== codes.length) throw new ConfigError(`locations: a location is named twice in "${raw}"`);
      return codes;
    },
    shown: 'the one of --location',
    fallback: () => [],
  },
  {
    key: 'vncHost',
    flag: 'vnc-host',
    env: 'STRATUS_VNC_HOST',
    help: 'host named in VNC tunnel URLs',
    parse: (raw) => {
      if (!/^[A-Za-z0-9.:-]{1,253}$/.test(raw)) throw new ConfigError('vnc-host must be a host name or address');
      return raw;
    },
    fallback: () => '127.0.0.1',
  },
  {
    key: 'ipPool',
    flag: 'ip-pool',
    env: 'STRATUS_IP_POOL',
    help: 'public IP pool: CIDR[@GATEWAY],...',
    parse: wrapped(parseIpPool),
    shown: DEFAULT_IP_POOL,
    fallback: () => parseIpPool(DEFAULT_IP_POOL),
  },
  {
    key: 'vlanPool',
    flag: 'vlan-pool',
    env: 'STRATUS_VLAN_POOL',
    help: 'VLAN tags VLANs are assigned from: FROM-TO (1..4094), or off (VLANs show no bottom_vlan_tag)',
    parse: readVlanPool,
    shown: 'off (with several locations: a range of its own each)',
    fallback: () => null,
  },
  {
    key: 'locationSettings',
    flag: 'location-settings',
    env: 'STRATUS_LOCATION_SETTINGS',
    help: `per-location settings over the catalogue, JSON (inline or a file): {"sjc": {"rate-limits": "GET=50/min", ...}}; keys ${LOCATION_KEYS.join(', ')}`,
    parse: readLocationSettings,
    shown: 'none (the catalogue, src/core/locations.ts)',
    fallback: () => ({}),
  },
  {
    key: 'nameservers',
    flag: 'nameservers',
    env: 'STRATUS_NAMESERVERS',
    help: 'nameservers of pool IPs, comma list',
    parse: wrapped(parseNameservers),
    shown: DEFAULT_NAMESERVERS,
    fallback: () => parseNameservers(DEFAULT_NAMESERVERS),
  },
  {
    key: 'tls',
    flag: 'tls',
    env: 'STRATUS_TLS',
    help: 'serve HTTPS as the real hosts (*.cloudsigma.com, localhost, the listen address) with a certificate of a local CA kept in the data folder',
    parse: readSwitch('tls'),
    fallback: () => false,
    boolean: true,
  },
  {
    key: 'tlsCert',
    flag: 'tls-cert',
    env: 'STRATUS_TLS_CERT',
    help: 'PEM file of the certificate (and chain) to serve HTTPS with, instead of the local CA (with --tls-key; implies --tls)',
    parse: (raw) => readablePemFile('tls-cert', raw),
    fallback: () => null,
  },
  {
    key: 'tlsKey',
    flag: 'tls-key',
    env: 'STRATUS_TLS_KEY',
    help: 'PEM file of the private key of --tls-cert',
    parse: (raw) => readablePemFile('tls-key', raw),
    fallback: () => null,
  },
  {
    key: 'ci',
    flag: 'ci',
    env: 'STRATUS_CI',
    help: 'preset for test pipelines: rate limits and login protection off, simulated delays 0 (each still settable)',
    parse: readSwitch('ci'),
    fallback: () => false,
    boolean: true,
  },
  {
    key: 'demoLogin',
    flag: 'demo-login',
    env: 'STRATUS_DEMO_LOGIN',
    help: 'EMAIL:PASSWORD of the demo account (created or its password set at start)',
    parse: readDemoLogin,
    shown: 'demo@stratus.local with a generated password, on a database without users',
    fallback: () => null,
  },
  {
    key: 'adminToken',
    flag: 'admin-token',
    env: 'STRATUS_ADMIN_TOKEN',
    help: 'token of the admin plane /_stratus/admin/ (16+ characters), or off; unset: generated and printed at start',
    parse: (raw) => {
      if (raw === 'off') return 'off';
      if (!/^[\x21-\x7e]{16,256}$/.test(raw)) throw new ConfigError('admin-token must be 16 to 256 printable characters without spaces, or off');
      return raw;
    },
    fallback: () => null,
    shown: 'generated at every start',
  },
  {
    key: 'adminAccess',
    flag: 'admin-access',
    env: 'STRATUS_ADMIN_ACCESS',
    help: 'who may reach the admin plane: loopback (clients on this machine) or any (anyone with the token)',
    parse: (raw) => {
      if (raw !== 'loopback' && raw !== 'any') throw new ConfigError('admin-access must be loopback or any');
      return raw;
    },
    fallback: () => 'loopback',
  },
  {
    key: 'consoleDir',
    flag: 'console-dir',
    env: 'STRATUS_CONSOLE_DIR',
    help: 'the web console build served at /ui/ (off: none)',
    parse: (raw) => {
      if (!raw.trim()) throw new ConfigError('console-dir must be a folder or off');
      return raw === 'off' ? null : raw;
    },
    // From src/ (tsx) and from dist/ (the bundle) alike: the build's dist/ui/ (scripts/build.js).
    fallback: () => assetPath('../dist/ui/'),
  },
  {
    key: 'readyFile',
    flag: 'ready-file',
    env: 'STRATUS_READY_FILE',
    help: 'file serve writes {url, email, password, admin_token, pid} to (JSON) once it answers',
    parse: (raw) => {
      if (!raw.trim()) throw new ConfigError('ready-file must be a file path');
      return raw;
    },
    fallback: () => null,
  },
  {
    key: 'seed',
    flag: 'seed',
    env: 'STRATUS_SEED',
    help: 'seed file (JSON: users, their IPs, VLANs, drives, servers, tags) serve applies before it answers; idempotent',
    parse: (raw) => {
      if (!raw.trim()) throw new ConfigError('seed must be a file path');
      return raw;
    },
    fallback: () => null,
  },
];

/** A setting's default as `--help` shows it. */
export function settingDefault(s: Setting<keyof Config>): string {
  if (s.shown !== undefined) return s.shown;
  const v = s.fallback();
  if (v === null || (Array.isArray(v) && v.length === 0)) return 'none';
  if (typeof v === 'boolean') return v ? 'on' : 'off';
  return String(v);
}

/**
 * One typed config from flags, then environment, then defaults. Anything invalid throws a ConfigError
 * whose message names the setting, and start-up stops.
 */
export function loadConfig(flags: Record<string, string | boolean | undefined>, env: NodeJS.ProcessEnv = process.env): Config {
  const out: Partial<Record<keyof Config, unknown>> = {};
  const rawOf = (s: Setting<keyof Config>): string | undefined => {
    const flag = flags[s.flag];
    return typeof flag === 'boolean' ? String(flag) : (flag ?? env[s.env]);
  };
  const ciRaw = rawOf(SETTINGS.find((s) => s.key === 'ci')!);
  const ci = ciRaw === undefined ? false : readSwitch('ci')(ciRaw);
  for (const s of SETTINGS) {
    const raw = rawOf(s);
    out[s.key] = raw === undefined ? (ci && s.ci ? s.ci() : s.fallback()) : s.parse(raw, { ci });
  }
  let config = out as Config;
  if (config.locations.length === 0) config.locations = [config.location];
  else if (rawOf(SETTINGS.find((s) => s.key === 'location')!) === undefined) config.location = config.locations[0];
  else if (!config.locations.includes(config.location))
    throw new ConfigError(`location ${config.location} is not one of --locations (${config.locations.join(', ')})`);
  for (const code of Object.keys(config.locationSettings))
    if (!config.locations.includes(code)) throw new ConfigError(`location-settings: ${code} is not served here (${config.locations.join(', ')})`);
  // One location: its own settings are the deployment's (with several, locationConfig applies each one's).
  if (config.locations.length === 1) config = { ...config, ...config.locationSettings[config.location] };
  if (config.workers > 1 && config.db === ':memory:')
    throw new ConfigError('workers: an in-memory database belongs to one process; give --db a SQLite file or postgres:// URL, or --workers 1');
  if (config.workers > 1 && config.locations.length > 1) throw new ConfigError('workers: several --locations run in one process; give --workers 1');
  // A location whose hosts are Intel (`--cpu-type intel`) offers that type where the capabilities say amd.
  config.capabilities = hostCapabilities(config.capabilities, config.cpuType);
  checkCurrency(config);
  for (const code of config.locations.length > 1 ? config.locations : []) locationConfig(config, code);
  return config;
}

/** The currency must be one the price list prices (a location's own, checked at start). */
function checkCurrency(config: Config, where = ''): void {
  if (!config.pricing.rowAt('cpu', 0, config.currency) && !config.pricing.rows.some((r) => r.currency === config.currency))
    throw new ConfigError(
      `${where}currency ${config.currency} has no prices in the price catalogue (--pricing); it prices ${[...new Set(config.pricing.rows.map((r) => r.currency))].join(', ')}`,
    );
}

/**
 * The configuration of one served location. With one location it is `config` itself (a deployment of one
 * location is what it always was: every setting as given). With several, each location's entry of the
 * built-in catalogue (core/locations.ts) sets its currency, hosts (CPU type, capabilities, price list), IP
 * pool and library, and each has its own store (`locationDb`: the first keeps `--db`).
 */
export function locationConfig(config: Config, code: string): Config {
  if (config.locations.length === 1) return config;
  const e = LOCATIONS[code];
  if (!e || !config.locations.includes(code)) throw new ConfigError(`location ${code} is not served here (${config.locations.join(', ')})`);
  const own: Config = {
    ...config,
    location: code,
    db: code === config.locations[0] ? config.db : locationDb(config.db, code),
    currency: e.currency,
    cpuType: e.cpuType,
    // AMD locations bill on --pricing (the built-in zrh list by default), Intel ones on the Intel list.
    pricing: e.cpuType === 'intel' ? (intelPricing ??= readPriceCatalogue(INTEL_PRICING)) : config.pricing,
    capabilities: hostCapabilities(config.capabilities, e.cpuType),
    ipPool: parseIpPool(e.ipPool),
    vlanPool: readVlanPool(e.vlanPool),
    libdrives: config.libdrives.filter((d) => !e.libraryWithout.includes(String(d.body.distribution))),
  };
  // `--location-settings`: this location's own values over the catalogue's (capabilities follow its CPU type).
  const over = config.locationSettings[code] ?? {};
  const cpuType = over.cpuType ?? own.cpuType;
  const mine: Config = { ...own, ...over, capabilities: hostCapabilities(over.capabilities ?? config.capabilities, cpuType) };
  if (over.cpuType && !over.pricing) mine.pricing = cpuType === 'intel' ? (intelPricing ??= readPriceCatalogue(INTEL_PRICING)) : config.pricing;
  checkCurrency(mine, `location ${code}: `);
  return mine;
}

/** A location whose hosts are Intel (`--cpu-type intel`) offers that type where the capabilities say amd. */
function hostCapabilities(capabilities: Record<string, unknown>, cpuType: Config['cpuType']): Record<string, unknown> {
  const hypervisors = capabilities.hypervisors as Record<string, string[]> | undefined;
  if (cpuType !== 'amd' && hypervisors?.kvm && !hypervisors.kvm.includes(cpuType))
    return { ...capabilities, hypervisors: { ...hypervisors, kvm: hypervisors.kvm.map((t) => (t === 'amd' ? cpuType : t)) } };
  return capabilities;
}

export { ConfigError };
