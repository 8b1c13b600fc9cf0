/**
 * `stratus serve`: the API server in this process (src/main.ts loads this module only for `serve`), with
 * its scheduler loop and signal handling.
 */
import { buildApp } from './app.js';
import type { Config } from './config.js';
import { randomPassword } from './core/passwords.js';
import { openServices as open } from './cli/index.js';
import { timerHandlers } from './registry.js';
import { Scheduler } from './sim/scheduler.js';
import { ensureDemoLogin } from './resources/users/users.js';

export async function serve(config: Config): Promise<void> {
  const services = await open(config);
  // The demo login's password hash or check (scrypt, ~60 ms on the thread pool) runs while the app is built.
  const [demo, app] = await Promise.all([ensureDemoLogin(services, randomPassword()), buildApp(services)]);
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
