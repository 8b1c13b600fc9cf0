import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface Config {
  host: string;
  port: number;
  /** A SQLite file path, `:memory:`, or a `postgres://` URL. */
  db: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Largest accepted request body in bytes; bigger ones get 413. */
  bodyLimit: number;
  /** A client must send its whole request within this many ms. */
  requestTimeoutMs: number;
  /** Idle keep-alive connections close after this many ms. */
  keepAliveTimeoutMs: number;
  currency: string;
  capabilities: Record<string, unknown>;
}

/** Every setting: flag name, environment variable, default, and how to read it. */
interface Setting<K extends keyof Config> {
  key: K;
  flag: string;
  env: string;
  help: string;
  parse(raw: string): Config[K];
  fallback: () => Config[K];
}

class ConfigError extends Error {}

const int = (name: string, min: number, max: number) => (raw: string) => {
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${n}`);
  return n;
};

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

const DEFAULT_CAPABILITIES = fileURLToPath(new URL('./resources/capabilities/defaults.json', import.meta.url));

export const SETTINGS: Setting<keyof Config>[] = [
  { key: 'host', flag: 'host', env: 'STRATUS_HOST', help: 'address to listen on', parse: (s) => s, fallback: () => '127.0.0.1' },
  { key: 'port', flag: 'port', env: 'STRATUS_PORT', help: 'TCP port (0 = any free port)', parse: int('port', 0, 65535), fallback: () => 8080 },
  {
    key: 'db',
    flag: 'db',
    env: 'STRATUS_DATABASE_URL',
    help: 'SQLite file, :memory:, or postgres://user@host/db',
    parse: (s) => {
      if (!s) throw new ConfigError('db must not be empty');
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
  { key: 'bodyLimit', flag: 'body-limit', env: 'STRATUS_BODY_LIMIT', help: 'max request body bytes', parse: int('body-limit', 1024, 1 << 30), fallback: () => 1 << 20 },
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
    key: 'capabilities',
    flag: 'capabilities',
    env: 'STRATUS_CAPABILITIES',
    help: 'JSON file with the location capabilities',
    parse: readCapabilities,
    fallback: () => readCapabilities(DEFAULT_CAPABILITIES),
  },
];

/**
 * One typed config from flags, then environment, then defaults. Anything invalid throws a ConfigError
 * whose message names the setting, and start-up stops.
 */
export function loadConfig(flags: Record<string, string | undefined>, env: NodeJS.ProcessEnv = process.env): Config {
  const out: Partial<Record<keyof Config, unknown>> = {};
  for (const s of SETTINGS) {
    const raw = flags[s.flag] ?? env[s.env];
    out[s.key] = raw === undefined ? s.fallback() : s.parse(raw);
  }
  return out as Config;
}

export { ConfigError };
