import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, locationConfig, settingDefault, SETTINGS, type Config } from '../config.js';
import { AdjustableClock } from '../core/clock.js';
import { syncClock } from '../admin/clock.js';
import type { Services } from '../core/context.js';
import { ApiError } from '../core/errors.js';
import { randomIds } from '../core/ids.js';
import { Store } from '../store/db.js';
import { EventSubscriptions } from '../core/events.js';
import { fromDatabaseError } from '../store/errors.js';
import { ipsCommand, vlansCommand } from './network.js';
import { billingCommand } from './billing.js';
import { simCommand } from './sim.js';
import { clockCommand, exportCommand, faultsCommand, importCommand, resetOneCommand, seedCommand } from './admin.js';
import { resetCommand, usersCommand } from './users.js';
import { VERSION } from '../version.js';
import { withSimulator } from '../sim/index.js';
import { EVENT_NOTIFICATIONS } from '../resources/notifications/types.js';
import { progressOn, type Progress } from './progress.js';

/**
 * The `stratus` command line: argument parsing and the operator commands (`users`, `ips`, `vlans`, `sim`),
 * callable in-process (tests) as well as from src/main.ts. `serve` is the process's own business: main.ts
 * hands it in as `serve`; without it (in-process) a valid `serve` is refused. Output goes through `io`;
 * the result is the exit code: 0, 2 for bad configuration or operator input (a message, no stack trace),
 * 1 for anything unexpected (with its stack).
 *
 * Every command and subcommand is a row of COMMANDS below (its arguments, its own options, its help), so
 * `stratus help CMD`, `stratus CMD --help` and the refusal of arguments a command does not take come from
 * one place. The settings (src/config.ts SETTINGS) are accepted by every command.
 */
interface Sub {
  /** The subcommand's word (none for a command without subcommands). */
  name?: string;
  /** Its positional arguments as shown, e.g. `EMAIL [STATE]`, and how many it takes. */
  args: string;
  min: number;
  max: number;
  /** Its own options (names of OWN_OPTIONS). */
  options?: string[];
  help: string;
}

interface CommandDef {
  summary: string;
  subs: Sub[];
}

/** Options that belong to some commands only (each is refused elsewhere). */
const OWN_OPTIONS: Record<string, { type: 'string' | 'boolean'; value?: string; help: string }> = {
  password: { type: 'string', value: 'P', help: 'the password (generated and printed when not given)' },
  state: { type: 'string', value: 'S', help: 'account state: REGULAR (default), TRIAL, GUEST or NEW_USER' },
  off: { type: 'boolean', help: 'exempt the account from rate limits' },
  reset: { type: 'boolean', help: "drop the account's override: the deployment's rules apply" },
  set: { type: 'string', value: 'RULES', help: "override rules, e.g. 'GET=1000/min,POST:/servers/=5000/day,PUT=off'" },
  count: { type: 'string', value: 'N', help: 'how many (default 1)' },
  written: { type: 'string', value: 'BYTES', help: 'set the bytes of data written on the drive' },
  send: { type: 'string', value: 'BYTES', help: 'the server sends this many bytes now (its tx counter grows by them)' },
  address: { type: 'string', value: 'IP', help: 'a client address (IPv4 or IPv6)' },
  all: { type: 'boolean', help: 'every account and address' },
  method: { type: 'string', value: 'M', help: 'how the payment was made, shown in the ledger (default operator)' },
  limits: { type: 'string', value: 'RULES', help: "rate limits of the new account: off, or rules like 'GET=1000/min'" },
  progress: { type: 'boolean', help: 'progress on stderr also when it is not a terminal (on a terminal it is always shown)' },
};

export const COMMANDS: Record<string, CommandDef> = {
  serve: {
    summary: 'start the API server (creates or upgrades the schema of --db)',
    subs: [{ args: '', min: 0, max: 0, help: 'serve the API at http://HOST:PORT/api/2.0/ until SIGTERM or SIGINT' }],
  },
  migrate: {
    summary: 'create or upgrade the schema of --db (other commands only use a current one)',
    subs: [{ args: '', min: 0, max: 0, help: 'create the schema, or upgrade it to this version; says which it did' }],
  },
  users: {
    summary: 'accounts: add, list, passwords, states, rate limits, login locks',
    subs: [
      {
        name: 'add',
        args: 'EMAIL',
        min: 1,
        max: 1,
        options: ['password', 'state', 'limits'],
        help: 'create a user (a password is generated when none is given)',
      },
      { name: 'list', args: '', min: 0, max: 0, help: 'list users' },
      { name: 'set-password', args: 'EMAIL', min: 1, max: 1, options: ['password'], help: "set a user's password (generated when none is given)" },
      { name: 'set-state', args: 'EMAIL STATE', min: 2, max: 2, help: "set an account's state (REGULAR, TRIAL, GUEST, NEW_USER)" },
      {
        name: 'limits',
        args: 'EMAIL',
        min: 1,
        max: 1,
        options: ['off', 'reset', 'set'],
        help: "show an account's rate limits; --off exempts it, --reset returns it to the deployment's, --set overrides rules",
      },
      {
        name: 'unlock',
        args: '[EMAIL]',
        min: 0,
        max: 1,
        options: ['address', 'all'],
        help: 'clear failed logins (login protection) of an account from every address, of an --address for every account, or --all',
      },
    ],
  },
  ips: {
    summary: 'public IP addresses of the --ip-pool',
    subs: [
      { name: 'assign', args: 'EMAIL', min: 1, max: 1, options: ['count'], help: 'give an account N free addresses of the --ip-pool' },
      { name: 'release', args: 'ADDRESS', min: 1, max: 1, help: 'take an address back into the pool' },
      { name: 'list', args: '[EMAIL]', min: 0, max: 1, help: 'addresses in use (assigned and DHCP leases)' },
    ],
  },
  vlans: {
    summary: 'private VLANs',
    subs: [
      { name: 'assign', args: 'EMAIL', min: 1, max: 1, options: ['count'], help: 'give an account N new private VLANs' },
      { name: 'release', args: 'UUID', min: 1, max: 1, help: 'remove a VLAN' },
      { name: 'list', args: '[EMAIL]', min: 0, max: 1, help: 'VLANs and their owners' },
    ],
  },
  billing: {
    summary: "accounts' money: payments and balances",
    subs: [
      {
        name: 'topup',
        args: 'EMAIL AMOUNT',
        min: 2,
        max: 2,
        options: ['method'],
        help: 'pay AMOUNT into an account (a ledger credit "Payment through METHOD - <uuid>")',
      },
      { name: 'show', args: 'EMAIL', min: 1, max: 1, help: "an account's balance" },
    ],
  },
  sim: {
    summary: 'make the simulated infrastructure act',
    subs: [
      {
        name: 'server',
        args: 'UUID EVENT',
        min: 2,
        max: 2,
        help: 'make the simulated guest/host act: poweroff, crash, fail_next_boot, acpi_ignore, acpi_obey, host_failure',
      },
      { name: 'drive', args: 'UUID', min: 1, max: 1, options: ['written'], help: 'show or set (--written) the data written on a simulated drive' },
      { name: 'traffic', args: 'UUID', min: 1, max: 1, options: ['send'], help: "show a server's tx counter (bytes sent), or add a burst (--send)" },
    ],
  },
  reset: {
    summary: 'empty the service (every account; the library, settings, clock and demo login stay), or one account',
    subs: [
      {
        args: '[EMAIL]',
        min: 0,
        max: 1,
        help: 'as POST /_stratus/admin/reset: without EMAIL every account goes; with it that account is emptied (its login stays). A running server sees it at once (its cached logins end within 2 s)',
      },
    ],
  },
  seed: {
    summary: 'create users and what they hold from a JSON file (idempotent; the format is in the README)',
    subs: [{ args: 'FILE', min: 1, max: 1, options: ['progress'], help: 'as POST /_stratus/admin/seed and serve --seed FILE; seeding twice changes nothing' }],
  },
  export: {
    summary: 'write the whole state of --db as one JSON file',
    subs: [{ args: '[FILE]', min: 0, max: 1, options: ['progress'], help: 'as GET /_stratus/admin/state; without FILE (or -) to stdout' }],
  },
  import: {
    summary: 'replace the whole state of --db with an exported file (same Stratus version)',
    subs: [{ args: 'FILE', min: 1, max: 1, options: ['progress'], help: 'as POST /_stratus/admin/state; a file from another schema is refused' }],
  },
  clock: {
    summary: "the deployment's clock, shared by every server process on --db",
    subs: [
      { name: 'show', args: '', min: 0, max: 0, help: 'the simulated time and its offset from real time' },
      {
        name: 'advance',
        args: 'DURATION',
        min: 1,
        max: 1,
        help: 'move forward by 90s, 30m, 1h, 2d or 1h30m; running servers run the work that fell due at their next tick',
      },
      { name: 'set', args: 'ISO-TIME', min: 1, max: 1, help: 'move forward to a time (2030-01-01T00:00:00Z); earlier times are refused (exit 2)' },
    ],
  },
  faults: {
    summary: 'make the simulated infrastructure fail once (the admin plane also injects HTTP 503/500)',
    subs: [
      { name: 'boot', args: 'SERVER', min: 1, max: 1, help: 'the next boot of the server fails' },
      { name: 'clone', args: '[DRIVE]', min: 0, max: 1, help: 'the next clone of the drive (without DRIVE: of any drive) fails' },
    ],
  },
  help: {
    summary: 'show the help of a command',
    subs: [{ args: '[COMMAND]', min: 0, max: 1, help: 'the commands, or one command with its options and settings' }],
  },
};

const subLine = (cmd: string, sub: Sub) =>
  ['stratus', cmd, sub.name, sub.args, ...(sub.options ?? []).map((o) => `[--${o}${OWN_OPTIONS[o].value ? ` ${OWN_OPTIONS[o].value}` : ''}]`)]
    .filter(Boolean)
    .join(' ');

export const USAGE = `Usage: stratus <command> [arguments] [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`)
  .join('\n')}

\`stratus help COMMAND\` or \`stratus COMMAND --help\` shows a command's arguments, options and settings
(with their defaults); \`stratus --version\` the version. Settings are flags or STRATUS_* environment variables.`;

/** One command's help: its forms, its own options, and every setting with its environment variable and default. */
export function commandHelp(name: string): string {
  const c = COMMANDS[name];
  const own = [...new Set(c.subs.flatMap((s) => s.options ?? []))];
  const lines = [`Usage (${c.summary}):`, ''];
  for (const sub of c.subs) lines.push(`  ${subLine(name, sub)}`, `      ${sub.help}`);
  if (own.length) {
    lines.push('', 'Options:');
    for (const o of own) lines.push(`  --${`${o}${OWN_OPTIONS[o].value ? ` ${OWN_OPTIONS[o].value}` : ''}`.padEnd(16)} ${OWN_OPTIONS[o].help}`);
  }
  if (name !== 'help') {
    lines.push('', 'Settings (flags win over environment variables; every command takes them):');
    for (const s of SETTINGS) lines.push(`  --${s.flag.padEnd(20)} ${s.env.padEnd(30)} default: ${settingDefault(s)}`, `      ${s.help}`);
    lines.push('  -h, --help              this help');
  }
  return lines.join('\n');
}

export interface CliIo {
  out(s: string): void;
  err(s: string): void;
  /** Whether `err` is a terminal (progress is shown there without --progress). */
  errIsTTY?: boolean;
}

export interface CliOptions {
  /** Where settings not given as flags come from (default: process.env). */
  env?: NodeJS.ProcessEnv;
  /** Runs `serve` with the loaded configuration (src/main.ts); absent, `serve` is refused. */
  serve?: (config: Config) => Promise<void>;
}

/**
 * The services an operator command (or the server) works with: the store of `--db`, the shared clock.
 * `schema`: the server and `stratus migrate` create or upgrade the schema; other commands only check it.
 */
export async function openServices(config: Config, schema: 'migrate' | 'check'): Promise<Services> {
  // Several locations: the one of --location (the first by default), with its own store; the shared clock's
  // offset is kept in the first location's.
  const here = locationConfig(config, config.location);
  const store = await Store.open(here.db, { cacheMiB: config.cacheMiB, statementCache: config.statementCache, schema });
  let clockStore: Store | undefined;
  if (here.db !== config.db)
    clockStore = await Store.open(config.db, { cacheMiB: 1, schema }).catch(async (e: unknown) => {
      await store.close();
      throw e;
    });
  // The deployment's shared clock (real time plus the offset the admin plane or `stratus clock` set).
  const services: Services = withSimulator({
    store,
    clock: new AdjustableClock(),
    ids: randomIds,
    config: here,
    events: new EventSubscriptions(),
    ...(clockStore ? { clockStore } : {}),
  });
  await syncClock(services);
  return services;
}

/**
 * An operator command changes money and state as the API does, so it records the same events and
 * changes: the event types the serving process's consumers take get outbox rows (its notification worker
 * fans them out and delivers them, now or at its next start), and the changes of users' objects go to the
 * serving processes' event streams (store/changes.ts: NOTIFY, or SQLite's relay table).
 */
function operatorEvents(s: Services): void {
  s.events?.subscribe(Object.keys(EVENT_NOTIFICATIONS));
  s.store.changes.enabled = true;
  s.store.changes.relay = true;
}

/**
 * Every served location's services (`serve` with several locations): each its own store, simulator and
 * configuration (config.ts locationConfig), all on one clock whose offset the first location's store keeps.
 */
export async function openLocations(config: Config, schema: 'migrate' | 'check'): Promise<Services[]> {
  const clock = new AdjustableClock();
  const out: Services[] = [];
  try {
    for (const code of config.locations) {
      const c = locationConfig(config, code);
      const store = await Store.open(c.db, { cacheMiB: config.cacheMiB, statementCache: config.statementCache, schema });
      out.push(withSimulator({ store, clock, ids: randomIds, config: c, events: new EventSubscriptions(), ...(out[0] ? { clockStore: out[0].store } : {}) }));
    }
  } catch (e) {
    await Promise.allSettled(out.map((s) => s.store.close()));
    throw e;
  }
  await syncClock(out[0]);
  return out;
}

/** Closes what openServices opened. */
export async function closeServices(s: Services): Promise<void> {
  await s.store.close();
  if (s.clockStore && s.clockStore !== s.store) await s.clockStore.close();
}

const OPTIONS = {
  ...Object.fromEntries(SETTINGS.map((s) => [s.flag, { type: s.boolean ? ('boolean' as const) : ('string' as const) }])),
  ...Object.fromEntries(Object.entries(OWN_OPTIONS).map(([k, o]) => [k, { type: o.type }])),
  help: { type: 'boolean' as const, short: 'h' },
  version: { type: 'boolean' as const },
};

type Command = (s: Services, args: string[], opts: Record<string, string | undefined>, usage: string, progress?: Progress) => Promise<string>;
const OPERATOR: Record<string, Command> = {
  reset: (s, args) => (args[0] ? resetOneCommand(s, args[0]) : resetCommand(s)),
  seed: seedCommand,
  export: exportCommand,
  import: importCommand,
  clock: clockCommand,
  faults: faultsCommand,
  users: usersCommand as Command,
  ips: ipsCommand,
  vlans: vlansCommand,
  sim: simCommand,
  billing: billingCommand as Command,
};

/**
 * The command line checked against COMMANDS before anything runs: a known command and subcommand, as many
 * arguments as it takes, and only options that apply to it. Returns the subcommand.
 */
function checkLine(command: string, rest: string[], flags: Record<string, unknown>): Sub {
  const c = COMMANDS[command];
  if (!c) throw new ConfigError(`unknown command "${command}"; the commands are ${Object.keys(COMMANDS).join(', ')} (stratus --help)`);
  const named = c.subs[0].name !== undefined;
  const sub = named ? c.subs.find((s) => s.name === rest[0]) : c.subs[0];
  if (!sub)
    throw new ConfigError(
      `${command}: ${rest[0] === undefined ? 'a subcommand is needed' : `unknown subcommand "${rest[0]}"`}; one of ${c.subs.map((s) => s.name).join(', ')} (stratus help ${command})`,
    );
  const args = named ? rest.slice(1) : rest;
  const form = subLine(command, sub);
  if (args.length > sub.max) throw new ConfigError(`unexpected argument "${args[sub.max]}": ${form} (stratus help ${command})`);
  if (args.length < sub.min) throw new ConfigError(`missing argument: ${form} (stratus help ${command})`);
  for (const o of Object.keys(OWN_OPTIONS))
    if (flags[o] !== undefined && !(sub.options ?? []).includes(o))
      throw new ConfigError(`--${o} does not apply to "${[command, sub.name].filter(Boolean).join(' ')}": ${form} (stratus help ${command})`);
  return sub;
}

/** The closest option name to a mistyped one (at most two edits away), for "did you mean". */
function closestOption(name: string): string | undefined {
  const distance = (a: string, b: string) => {
    let row = Array.from({ length: b.length + 1 }, (_, i) => i);
    for (let i = 1; i <= a.length; i++) {
      const next = [i];
      for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      row = next;
    }
    return row[b.length];
  };
  const best = Object.keys(OPTIONS)
    .map((o) => ({ o, d: distance(name, o) }))
    .sort((a, b) => a.d - b.d)[0];
  return best && best.d <= 2 ? best.o : undefined;
}

/**
 * Node's parser refuses an unknown option or a missing value with a paragraph of its own; the command line
 * answers in its one-line form instead, with the form of the command that was typed (or the global usage).
 */
function parseLine(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (e) {
    const code = (e as { code?: string }).code ?? '';
    if (!code.startsWith('ERR_PARSE_ARGS_')) throw e;
    const option = /'(-[^' ]+)/.exec((e as Error).message)?.[1] ?? '';
    const words = argv.filter((a) => !a.startsWith('-'));
    const c = COMMANDS[words[0] ?? ''];
    const sub = c && (c.subs[0].name === undefined ? c.subs[0] : c.subs.find((s) => s.name === words[1]));
    const form = c
      ? `${sub ? subLine(words[0], sub) : `stratus ${words[0]} ${c.subs.map((s) => s.name).join('|')} …`} (stratus help ${words[0]})`
      : 'stratus <command> [arguments] [options] (stratus --help)';
    if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') throw new ConfigError(`${option} needs a value: ${form}`);
    const near = closestOption(option.replace(/^-+/, ''));
    throw new ConfigError(`unknown option "${option}"${near ? ` (did you mean --${near}?)` : ''}: ${form}`);
  }
}

async function dispatch(argv: string[], io: CliIo, opts: CliOptions): Promise<void> {
  const { values, positionals } = parseLine(argv);
  const flags = values as Record<string, string | boolean | undefined>;
  if (flags.version) {
    io.out(`stratus ${VERSION}\n`);
    return;
  }
  const [command, ...rest] = positionals;
  if (command === undefined) {
    io.out(USAGE + '\n');
    return;
  }
  if (command === 'help' || flags.help) {
    const topic = command === 'help' ? (rest[0] ?? (flags.help ? 'help' : undefined)) : command;
    if (command === 'help') checkLine('help', rest, {});
    if (topic !== undefined && !COMMANDS[topic]) throw new ConfigError(`unknown command "${topic}"; the commands are ${Object.keys(COMMANDS).join(', ')}`);
    io.out((topic === undefined ? USAGE : commandHelp(topic)) + '\n');
    return;
  }
  checkLine(command, rest, flags);
  const config = loadConfig(flags, opts.env ?? process.env);
  if (command === 'serve') {
    if (!opts.serve) throw new ConfigError('serve runs only as its own process (bin/stratus.js serve)');
    return opts.serve(config);
  }
  if (command === 'migrate') return migrateCommand(config, io);
  const services = await openServices(config, 'check');
  operatorEvents(services);
  try {
    const progress = progressOn(io.err, command, { tty: io.errIsTTY === true, asked: flags.progress === true });
    io.out(await OPERATOR[command](services, rest, flags as Record<string, string | undefined>, commandHelp(command), progress));
  } finally {
    await closeServices(services);
  }
}

/** `stratus migrate`: creates the schema of `--db` (of every location's store), or upgrades it to this version's; says which it did. */
async function migrateCommand(config: Config, io: CliIo): Promise<void> {
  for (const code of config.locations) {
    const store = await Store.open(locationConfig(config, code).db, { cacheMiB: config.cacheMiB, schema: 'migrate' });
    try {
      const { known } = await store.schemaStatus();
      const where = `${store.dialect} ${store.location}`;
      const n = store.migrated.length;
      io.out(
        n === 0
          ? `schema of ${where} is current (${known.at(-1)})\n`
          : `schema of ${where} ${n === known.length ? 'created' : 'upgraded'}: ${n} migration(s) applied, now at ${known.at(-1)}\n`,
      );
    } finally {
      await store.close();
    }
  }
}

/** Runs one `stratus …` command line; resolves to its exit code. */
export async function runCli(argv: string[], io: CliIo, opts: CliOptions = {}): Promise<number> {
  try {
    await dispatch(argv, io, opts);
    return 0;
  } catch (caught: unknown) {
    const err = fromDatabaseError(caught) ?? caught;
    // Bad configuration or operator input: a clear message and a non-zero exit, no stack trace.
    const known = err instanceof ConfigError || err instanceof ApiError || (err as { code?: string })?.code?.startsWith('ERR_PARSE_ARGS');
    io.err(`stratus: ${known ? (err as Error).message : ((err as Error)?.stack ?? String(err))}\n`);
    return known ? 2 : 1;
  }
}
