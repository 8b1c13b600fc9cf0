import { parseArgs } from 'node:util';
import { buildApp } from './app.js';
import { ConfigError, loadConfig, SETTINGS, type Config } from './config.js';
import { systemClock } from './core/clock.js';
import type { Services } from './core/context.js';
import { ApiError } from './core/errors.js';
import { randomIds } from './core/ids.js';
import { randomPassword } from './core/passwords.js';
import { Store } from './store/db.js';
import { fromDatabaseError } from './store/errors.js';
import { createUser, ensureDemoLogin, listUsers, setPassword } from './resources/users/users.js';

const USAGE = `Usage: stratus <command> [options]

Commands:
  serve                              start the API server
  users add EMAIL [--password P] [--state S]
                                     create a user (a password is generated when none is given)
  users list                         list users
  users set-password EMAIL [--password P]
                                     set a user's password (generated when none is given)

Options (every command; flags win over environment variables):
${SETTINGS.map((s) => `  --${s.flag.padEnd(20)} ${s.env.padEnd(30)} ${s.help}`).join('\n')}
  --password P, --state S            for the users commands
  --help`;

async function open(config: Config): Promise<Services> {
  const store = await Store.open(config.db);
  return { store, clock: systemClock, ids: randomIds, config };
}

async function serve(config: Config): Promise<void> {
  const services = await open(config);
  const demo = await ensureDemoLogin(services, randomPassword());
  const app = await buildApp(services);
  const address = await app.listen({ host: config.host, port: config.port });
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
      for (const u of await listUsers(services)) process.stdout.write(`${u.uuid}  ${u.state.padEnd(9)} ${u.email}\n`);
    } else if (sub === 'set-password' && email) {
      const password = values.password ?? randomPassword();
      await setPassword(services, email, password);
      process.stdout.write(`password set for ${email}${values.password ? '' : `: ${password}`}\n`);
    } else {
      throw new ConfigError(USAGE);
    }
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
  throw new ConfigError(`unknown command "${command}"\n\n${USAGE}`);
}

main(process.argv.slice(2)).catch((caught: unknown) => {
  const err = fromDatabaseError(caught) ?? caught;
  // Bad configuration or operator input: a clear message and a non-zero exit, no stack trace.
  const known = err instanceof ConfigError || err instanceof ApiError || (err as { code?: string })?.code?.startsWith('ERR_PARSE_ARGS');
  process.stderr.write(`stratus: ${known ? (err as Error).message : (err as Error)?.stack ?? String(err)}\n`);
  process.exit(known ? 2 : 1);
});
