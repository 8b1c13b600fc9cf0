/**
 * `stratus serve --workers N`: N API processes on one listening socket and one store (node:cluster; each
 * worker accepts connections from the shared socket itself: a connection no worker has accepted yet waits in
 * the kernel's queue for a live one, whatever happens to the others). Any worker answers any request:
 * what a request depends on lives in the store or beside it, shared by every process on the database:
 * sessions and Digest nonces (tables), rate-limit counters (PostgreSQL's `rate_counters`, or a side file
 * beside a SQLite database: store/limits/counters.ts), timers (claimed exactly once: PostgreSQL's advisory
 * locks, SQLite's IMMEDIATE transactions, core/scheduler.ts), kept answers (checked against a token
 * that every process's commit moves: http/answer-cache.ts) and the event stream (PostgreSQL NOTIFY, or
 * SQLite's `change_relay` read by each worker's cursor: store/changes.ts).
 *
 * The primary does the one-time steps before any worker starts (schema, TLS material, demo login, seed),
 * prints the start banner and writes the ready file once every worker listens, and then only watches:
 * - one worker at a time owns the scheduler's polling loop (`scheduler` message); when it ends, another does;
 * - a worker that dies is replaced (a crash loop, 5 deaths within 10 s of their start, stops the service);
 * - SIGHUP replaces the workers one by one: the new one listens before the old one drains (stops accepting,
 *   finishes what it has, answers requests still arriving on its open connections with `Connection: close`,
 *   and lets idle keep-alive connections run out their announced timeout: http/drain.ts), so a restart drops
 *   no request; the next old worker is replaced once this one no longer accepts;
 * - SIGTERM/SIGINT drain every worker (idle connections end at once), then the primary exits 0.
 */
import cluster, { type Worker } from 'node:cluster';
import { rmSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Config } from './config.js';
import { randomAlnum, randomPassword } from './core/passwords.js';
import { openServices as open } from './cli/index.js';
import { timerHandlers } from './registry.js';
import { Scheduler } from './core/scheduler.js';
import { ensureDemoLogin } from './resources/users/users.js';
import { loadTls } from './http/tls.js';
import { exitOnFatalErrors } from './fatal.js';
import { prettyLine } from './http/log-format.js';
import type { SeedReport } from './admin/seed.js';
import { clearReadyFile, demoLimits, readyContent, seedAtStart, startBanner, writeReadyFile } from './serve-steps.js';

/** A worker's messages to the primary: it listens; it no longer accepts (draining). */
export type ToPrimary = { type: 'listening'; address: string } | { type: 'stopped' };
/** The primary's messages to a worker: own the scheduler loop; drain and exit (a restart's drain keeps idle connections). */
export type ToWorker = { type: 'scheduler' } | { type: 'drain'; restart: boolean };

const CRASH_WINDOW_MS = 10_000;
const CRASH_LIMIT = 5;

interface Member {
  worker: Worker;
  startedAt: number;
  listening: boolean;
  /** Told to stop (a restart or shutdown): its exit is expected. */
  retiring: boolean;
  /** A restart's drain (keeps idle connections) rather than a stop's. */
  restart: boolean;
  /** Resolves once it no longer accepts connections (or has exited). */
  stopped: Promise<void>;
  exited: Promise<void>;
}

export async function servePrimary(config: Config): Promise<void> {
  const log = primaryLog(config);
  // A fatal error of the primary stops the service (its workers see it gone and drain): exit 1, said in the log.
  exitOnFatalErrors((err, kind) => log('fatal', { err: errorFields(err), kind }, `fatal error (${kind}): exiting`, true));
  if (config.readyFile) clearReadyFile(config.readyFile);
  // The one-time steps, on a store the primary closes before any worker opens its own.
  const services = await open(config, 'migrate');
  const adminToken = config.adminToken ?? randomAlnum(32);
  services.config = { ...config, adminToken };
  const database = `${services.store.dialect} ${services.store.location}`;
  let demo: { email: string; password: string } | null;
  let seeded: SeedReport | null;
  let tls: Awaited<ReturnType<typeof loadTls>>;
  try {
    // The local CA (--tls) is made here once, not raced for by the workers.
    tls = await loadTls(config);
    demo = await ensureDemoLogin(services, randomPassword(), config.demoLogin);
    if (demo && !config.demoLogin) await demoLimits(services, demo.email);
    const scheduler = new Scheduler(services, timerHandlers());
    seeded = config.seed ? await seedAtStart(services, config.seed, () => scheduler.runDue()) : null;
  } finally {
    await services.store.close();
  }

  // Every worker accepts from the one listening socket itself, rather than the primary accepting and handing each
  // connection over (node's round robin): a connection handed to a worker that has just died (kill -9) stays open
  // in the primary, unanswered, forever; one the kernel still queues waits for a live worker instead.
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  // Every worker shares the admin token (a generated one too); a flag given on the command line wins anyway.
  const env = { STRATUS_ADMIN_TOKEN: adminToken };
  const members = new Map<number, Member>();
  let owner: Member | null = null;
  let stopping = false;
  let started = false;
  const crashes: number[] = [];

  const electOwner = () => {
    if (owner && !owner.retiring && members.has(owner.worker.id)) return;
    owner = [...members.values()].find((m) => m.listening && !m.retiring) ?? null;
    owner?.worker.send({ type: 'scheduler' } satisfies ToWorker, () => {});
  };

  const fork = (): Promise<string> => {
    const worker = cluster.fork(env);
    let stopped = () => {};
    const m: Member = {
      worker,
      startedAt: Date.now(),
      listening: false,
      retiring: false,
      restart: false,
      stopped: new Promise((resolve) => (stopped = resolve)),
      exited: new Promise((resolve) => worker.once('exit', () => resolve())),
    };
    members.set(worker.id, m);
    // A message to a worker whose channel has just closed fails on the worker object: not the primary's end.
    worker.on('error', (err) => log('warn', { worker: worker.process.pid, err: String(err) }, 'worker channel error'));
    return new Promise<string>((resolve, reject) => {
      worker.on('message', (msg: ToPrimary) => {
        if (msg?.type === 'stopped') stopped();
        if (msg?.type !== 'listening') return;
        m.listening = true;
        // Retired while it started (a stop during a restart): told now, as it listens for the primary's messages.
        if (m.retiring) tell(m);
        electOwner();
        resolve(msg.address);
      });
      worker.once('exit', (code, signal) => {
        stopped();
        members.delete(worker.id);
        if (owner === m) owner = null;
        electOwner();
        if (!m.listening) reject(new Error(`worker ${worker.process.pid} exited before it listened (${signal ?? code})`));
        // At start a worker that cannot serve (a port in use) fails the start instead (below); one that listened and
        // died before the others did is replaced like any other (else the service could be left with none).
        if (stopping || m.retiring || (!started && !m.listening)) return;
        log('warn', { worker: worker.process.pid, code, signal }, 'worker died; starting another');
        const now = Date.now();
        if (now - m.startedAt < CRASH_WINDOW_MS) crashes.push(now);
        while (crashes.length && now - crashes[0] > CRASH_WINDOW_MS) crashes.shift();
        if (crashes.length >= CRASH_LIMIT) {
          log('error', { crashes: crashes.length }, 'workers keep dying at start: stopping');
          void stopAll(1);
          return;
        }
        fork().catch((err: unknown) => log('error', { err: String(err) }, 'replacement worker failed'));
      });
    });
  };

  // A worker exiting meanwhile cannot be told (its channel is closing): its exit ends its retirement anyway.
  const tell = (m: Member) => {
    if (m.worker.isConnected()) m.worker.send({ type: 'drain', restart: m.restart } satisfies ToWorker, () => {});
  };

  /** Tells a worker to drain (a restart's drain, or a stop's); its `stopped` and `exited` say how far it is. */
  const retire = (m: Member, restart: boolean): Member => {
    // A stop during a restart's drain: told again, its idle connections end now.
    if (m.retiring && (restart || !m.restart)) return m;
    m.retiring = true;
    m.restart = restart;
    if (owner === m) {
      owner = null;
      electOwner();
    }
    if (m.listening) tell(m);
    return m;
  };

  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    log('info', { workers: members.size }, 'shutting down');
    if (config.readyFile) rmSync(config.readyFile, { force: true });
    await Promise.all([...members.values()].map((m) => retire(m, false).exited));
    process.exit(code);
  };

  let restarting = false;
  /** SIGHUP: each worker replaced by a new one that listens before the old one drains. */
  const rollingRestart = async () => {
    if (restarting || stopping) return;
    restarting = true;
    const old = [...members.values()].filter((m) => !m.retiring);
    log('info', { workers: old.length }, 'restarting workers one by one');
    try {
      // The next old worker is replaced as soon as this one no longer accepts; it finishes its drain meanwhile.
      for (const m of old) {
        if (stopping) break;
        await fork();
        await retire(m, true).stopped;
      }
      log('info', { workers: members.size }, 'workers restarted');
    } catch (err) {
      log('error', { err: String(err) }, 'restart failed');
    } finally {
      restarting = false;
    }
  };

  process.once('SIGTERM', () => void stopAll(0));
  process.once('SIGINT', () => void stopAll(0));
  process.on('SIGHUP', () => void rollingRestart());

  let address: string;
  try {
    const addresses = await Promise.all(Array.from({ length: config.workers }, () => fork()));
    address = addresses[0];
    started = true;
  } catch (err) {
    await stopAll(1);
    throw err;
  }
  const base = `${address}/api/2.0/`;
  const banner = startBanner({ config, address, database, demo, tls, adminToken, seeded, workers: config.workers });
  log('info', banner, `Stratus listening at ${base} (database: ${database}; ${config.workers} workers)`, true);
  if (config.readyFile) {
    writeReadyFile(config.readyFile, readyContent({ url: base, demo, adminToken, tls }));
  }
}

/** An error as pino's serializer writes it in the workers' lines. */
function errorFields(err: unknown): Record<string, unknown> {
  return err instanceof Error ? { type: err.name, message: err.message, stack: err.stack } : { message: String(err) };
}

const LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const;

/**
 * The primary's log lines, in the workers' format (pino's JSON, or its readable form): the primary loads no
 * HTTP server, so no logger of its own. `always`: written whatever the log level (the start banner).
 */
function primaryLog(config: Config) {
  const threshold = config.logLevel === 'silent' ? Infinity : LEVELS[config.logLevel];
  const host = hostname();
  return (level: keyof typeof LEVELS, fields: Record<string, unknown>, msg: string, always = false) => {
    if (!always && LEVELS[level] < threshold) return;
    const line = JSON.stringify({ level: LEVELS[level], time: Date.now(), pid: process.pid, hostname: host, role: 'primary', ...fields, msg });
    process.stdout.write((config.logFormat === 'pretty' ? prettyLine(line) : line) + '\n');
  };
}
