import { parseArgs } from 'node:util';
import { buildApp } from './app.js';
import { ConfigError, loadConfig, SETTINGS, type Config } from './config.js';
import { systemClock } from './core/clock.js';
import type { Services } from './core/context.js';
import { ApiError } from './core/errors.js';
import { randomIds } from './core/ids.js';
import { randomPassword } from './core/passwords.js';
import { Store } from './store/db.js';
import { simCommand } from './cli/sim.js';
import { Scheduler } from './sim/scheduler.js';
import { timerHandlers } from './registry.js';
import { EventSubscriptions } from './core/events.js';
import { fromDatabaseError } from './store/errors.js';
import { createUser, ensureDemoLogin, listUsers, setPassword, setState, USER_STATES } from './resources/users/users.js';
import { limitsCommand } from './cli/limits.js';
import { ipsCommand, vlansCommand } from './cli/network.js';

const USAGE = `Usage: stratus <command> [options]

Commands:
  serve                              start the API server
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

async function open(config: Config): Promise<Services> {
  const store = await Store.open(config.db);
  return { store, clock: systemClock, ids: randomIds, config, events: new EventSubscriptions() };
}

async function serve(config: Config): Promise<void> {
  const services = await open(config);
  const demo = await ensureDemoLogin(services, randomPassword());
  const app = await buildApp(services);
  // Simulated infrastructure and recurring work (boots, clones, the reconciler, ...): durable timers
  // declared by the kinds, run by this process's scheduler (several processes share them).
  const scheduler = new Scheduler(services, timerHandlers(), app.log);
  const address = await app.listen({ host: config.host, port: config.port });
  scheduler.start();
  const base = `${address}/api/2.0/`;
  const lines = [`Stratus listening at ${base} (database: ${services.store.dialect} ${services.store.location})`];
  if (demo) {
    lines.push(`Demo login: ${demo.email} / ${demo.password}`);
    lines.push(`Try: curl -u '${demo.email}:${demo.password}' ${base}capabilities/`);
  }
  process.stdout.write(lines.join('\n') + '\n');

  // SIGTERM/SIGINT: stop accepting, let in-flight requests finish, then close the database.
  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    await app.close();
    await scheduler.stop();
    await services.store.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void shutdown('SIGTERM'));
  process.once('SIGINT', () => void shutdown('SIGINT'));
}

async function users(config: Config, args: string[], values: Record<string, string | undefined>): Promise<void> {
  const [sub, email] = args;
  const services = await open(config);
  try {
    if (sub === 'add' && email) {
      const password = values.password ?? randomPassword();
      const user = await createUser(services, { email, password, state: values.state });
      process.stdout.write(`created ${user.email} ${user.uuid}${values.password ? '' : `\npassword: ${password}`}\n`);
    } else if (sub === 'list') {
      for (const u of await listUsers(services))
        process.stdout.write(`${u.uuid}  ${u.state.padEnd(9)} ${u.email}${u.password_hash ? '' : '  (no password yet)'}\n`);
    } else if (sub === 'set-password' && email) {
      const password = values.password ?? randomPassword();
      await setPassword(services, email, password);
      process.stdout.write(`password set for ${email}${values.password ? '' : `: ${password}`}\n`);
    } else if (sub === 'set-state' && email && args[2]) {
      const state = args[2].toUpperCase();
      if (!(USER_STATES as readonly string[]).includes(state)) throw new ConfigError(`state must be one of ${USER_STATES.join(', ')}`);
      const user = await setState(services, email, state);
      process.stdout.write(`state of ${user.email} set to ${state}\n`);
    } else if (sub === 'limits' && email) {
      process.stdout.write(await limitsCommand(services, email, values as unknown as { off?: boolean; reset?: boolean; set?: string }));
    } else {
      throw new ConfigError(USAGE);
    }
  } finally {
    await services.store.close();
  }
}

async function network(config: Config, command: 'ips' | 'vlans', args: string[], values: Record<string, string | undefined>): Promise<void> {
  const services = await open(config);
  try {
    process.stdout.write(await (command === 'ips' ? ipsCommand : vlansCommand)(services, args, values, USAGE));
  } finally {
    await services.store.close();
  }
}

async function sim(config: Config, args: string[], values: Record<string, string | undefined>): Promise<void> {
  const services = await open(config);
  try {
    process.stdout.write(await simCommand(services, args, values, USAGE));
  } finally {
    await services.store.close();
  }
}

async function main(argv: string[]): Promise<void> {
  const options = Object.fromEntries([
    ...SETTINGS.map((s) => [s.flag, { type: 'string' as const }]),
    ['password', { type: 'string' as const }],
    ['state', { type: 'string' as const }],
    ['help', { type: 'boolean' as const }],
    ['off', { type: 'boolean' as const }],
    ['reset', { type: 'boolean' as const }],
    ['set', { type: 'string' as const }],
    ['count', { type: 'string' as const }],
    ['written', { type: 'string' as const }],
  ]);
  const { values, positionals } = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  const flags = values as Record<string, string | undefined>;
  if (flags.help || positionals.length === 0) {
    process.stdout.write(USAGE + '\n');
    return;
  }
  const config = loadConfig(flags);
  const [command, ...rest] = positionals;
  if (command === 'serve') return serve(config);
  if (command === 'users') return users(config, rest, flags);
  if (command === 'ips' || command === 'vlans') return network(config, command, rest, flags);
  if (command === 'sim') return sim(config, rest, flags);
  throw new ConfigError(`unknown command "${command}"\n\n${USAGE}`);
}

main(process.argv.slice(2)).catch((caught: unknown) => {
  const err = fromDatabaseError(caught) ?? caught;
  // Bad configuration or operator input: a clear message and a non-zero exit, no stack trace.
  const known = err instanceof ConfigError || err instanceof ApiError || (err as { code?: string })?.code?.startsWith('ERR_PARSE_ARGS');
  process.stderr.write(`stratus: ${known ? (err as Error).message : (err as Error)?.stack ?? String(err)}\n`);
  process.exit(known ? 2 : 1);
});
