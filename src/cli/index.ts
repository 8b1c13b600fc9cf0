import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, SETTINGS, type Config } from '../config.js';
import { systemClock } from '../core/clock.js';
import type { Services } from '../core/context.js';
import { ApiError } from '../core/errors.js';
import { randomIds } from '../core/ids.js';
import { Store } from '../store/db.js';
import { EventSubscriptions } from '../core/events.js';
import { fromDatabaseError } from '../store/errors.js';
import { ipsCommand, vlansCommand } from './network.js';
import { simCommand } from './sim.js';
import { usersCommand } from './users.js';

/**
 * The `stratus` command line: argument parsing and the operator commands (`users`, `ips`, `vlans`, `sim`),
 * callable in-process (tests) as well as from src/main.ts. `serve` is the process's own business: main.ts
 * hands it in as `serve`; without it (in-process) a valid `serve` is refused. Output goes through `io`;
 * the result is the exit code: 0, 2 for bad configuration or operator input (a message, no stack trace),
 * 1 for anything unexpected (with its stack).
 */
export const USAGE = `Usage: stratus <command> [options]

Commands:
  serve                              start the API server (creates or upgrades the schema)
  migrate                            create or upgrade the schema of --db (other commands only
                                     use a database that is current)
  users add EMAIL [--password P] [--state S]
                                     create a user (a password is generated when none is given)
  users list                         list users
  users set-state EMAIL STATE        set an account's state (REGULAR, TRIAL, GUEST, NEW_USER)
  users set-password EMAIL [--password P]
                                     set a user's password (generated when none is given)
  users limits EMAIL [--off | --reset | --set RULES]
                                     show an account's rate limits; --off exempts it, --reset
                                     returns it to the deployment's, --set overrides rules, e.g.
                                     --set 'GET=1000/min,POST=200/min,POST:/servers/=5000/day,PUT=off'
  users unlock EMAIL | --address IP | --all
                                     clear failed logins (login protection) of an account from
                                     every address, of an address for every account, or all
  ips assign EMAIL [--count N]       give an account N free addresses of the --ip-pool (default 1)
  ips release ADDRESS                take an address back into the pool
  ips list [EMAIL]                   addresses in use (assigned and DHCP leases)
  vlans assign EMAIL [--count N]     give an account N new private VLANs (default 1)
  vlans release UUID                 remove a VLAN
  vlans list [EMAIL]                 VLANs and their owners
  sim server UUID EVENT              make the simulated guest/host act: poweroff, crash,
                                     fail_next_boot, acpi_ignore, acpi_obey, host_failure
  sim drive UUID [--written BYTES]   show or set the data written on a simulated drive

Options (every command; flags win over environment variables):
${SETTINGS.map((s) => `  --${s.flag.padEnd(20)} ${s.env.padEnd(30)} ${s.help}`).join('\n')}
  --password P, --state S            for the users commands
  --help`;

export interface CliIo {
  out(s: string): void;
  err(s: string): void;
}

export interface CliOptions {
  /** Where settings not given as flags come from (default: process.env). */
  env?: NodeJS.ProcessEnv;
  /** Runs `serve` with the loaded configuration (src/main.ts); absent, `serve` is refused. */
  serve?: (config: Config) => Promise<void>;
}

/**
 * The services an operator command (or the server) works with: the store of `--db`, the real clock.
 * `schema`: the server and `stratus migrate` create or upgrade the schema; other commands only check it.
 */
export async function openServices(config: Config, schema: 'migrate' | 'check'): Promise<Services> {
  const store = await Store.open(config.db, { cacheMiB: config.cacheMiB, schema });
  return { store, clock: systemClock, ids: randomIds, config, events: new EventSubscriptions() };
}

const OPTIONS = Object.fromEntries([
  ...SETTINGS.map((s) => [s.flag, { type: s.boolean ? ('boolean' as const) : ('string' as const) }]),
  ['password', { type: 'string' as const }],
  ['state', { type: 'string' as const }],
  ['help', { type: 'boolean' as const }],
  ['off', { type: 'boolean' as const }],
  ['reset', { type: 'boolean' as const }],
  ['set', { type: 'string' as const }],
  ['count', { type: 'string' as const }],
  ['address', { type: 'string' as const }],
  ['all', { type: 'boolean' as const }],
  ['written', { type: 'string' as const }],
]);

type Command = (s: Services, args: string[], opts: Record<string, string | undefined>, usage: string) => Promise<string>;
const COMMANDS: Record<string, Command> = {
  users: usersCommand as Command,
  ips: ipsCommand,
  vlans: vlansCommand,
  sim: simCommand,
};

async function dispatch(argv: string[], io: CliIo, opts: CliOptions): Promise<void> {
  const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  const flags = values as Record<string, string | undefined>;
  if (flags.help || positionals.length === 0) {
    io.out(USAGE + '\n');
    return;
  }
  const config = loadConfig(flags, opts.env ?? process.env);
  const [command, ...rest] = positionals;
  if (command === 'serve') {
    if (!opts.serve) throw new ConfigError('serve runs only as its own process (bin/stratus.js serve)');
    return opts.serve(config);
  }
  if (command === 'migrate') return migrateCommand(config, rest, io);
  const run = COMMANDS[command];
  if (!run) throw new ConfigError(`unknown command "${command}"\n\n${USAGE}`);
  const services = await openServices(config, 'check');
  try {
    io.out(await run(services, rest, flags, USAGE));
  } finally {
    await services.store.close();
  }
}

/** `stratus migrate`: creates the schema of `--db`, or upgrades it to this version's; says which it did. */
async function migrateCommand(config: Config, args: string[], io: CliIo): Promise<void> {
  if (args.length) throw new ConfigError(`migrate takes no arguments, got "${args.join(' ')}"`);
  const store = await Store.open(config.db, { cacheMiB: config.cacheMiB, schema: 'migrate' });
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
