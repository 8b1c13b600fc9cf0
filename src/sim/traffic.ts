import type { Services } from '../core/context.js';
import type { Db, Tx } from '../store/db.js';
import { dropState, readAllStates, readState, readStates, writeState } from './state.js';

/**
 * The simulated network's traffic counters: the bytes each server has sent (tx), ever. While a guest
 * runs, each of its public NICs sends `nic.tx_rate` bytes/s; the operator adds a burst with `stratus sim
 * traffic UUID --send N`. As with drive data (storage.ts), a counter is kept as of its last change plus
 * who is sending since when, so a reading at any moment is exact without ticks. Counters only grow; what
 * reads them (billing) charges the growth between two readings.
 */
type Live = Pick<Services, 'config' | 'clock'>;

interface Traffic {
  /** Bytes sent up to `at`. */
  sent?: number;
  /** Since when (ms) the public NICs below have been sending. */
  at?: number;
  /** Public NICs sending now (a running guest's). */
  nics?: number;
}

const KIND = 'traffic';

const rate = (s: Pick<Services, 'config'>) => s.config.delays['nic.tx_rate'];

/** A counter's reading at `t` (ms). */
function readingAt(s: Pick<Services, 'config'>, d: Traffic, t: number): number {
  const sending = d.nics && d.at !== undefined ? Math.floor((Math.max(0, t - d.at) / 1000) * rate(s) * d.nics) : 0;
  return (d.sent ?? 0) + sending;
}

/** Fold the counter at `now`, with `nics` public NICs sending from then (0: none). */
async function fold(tx: Tx, s: Live, server: string, nics: number, extra = 0): Promise<number> {
  const now = s.clock.now().getTime();
  const sent = readingAt(s, await readState<Traffic>(tx, KIND, server), now) + extra;
  const next: Traffic = { sent: sent || undefined, at: nics ? now : undefined, nics: nics || undefined };
  await writeState(tx, KIND, server, JSON.parse(JSON.stringify(next)) as Record<string, unknown>);
  return sent;
}

/** A guest powers on: from now its `publicNics` NICs send. */
export const startSending = (tx: Tx, s: Live, server: string, publicNics: number) => fold(tx, s, server, publicNics);

/** A guest powers off: what it sent is kept, nothing more is sent. */
export const stopSending = (tx: Tx, s: Live, server: string) => fold(tx, s, server, 0);

/** The operator: the server sends `bytes` now, on top of its NICs' rate. Returns the counter after. */
export async function sendBurst(tx: Tx, s: Live, server: string, bytes: number): Promise<number> {
  const d = await readState<Traffic>(tx, KIND, server);
  // Added to what was sent before; the NICs keep sending from when they began (no rounding at a fold).
  await writeState(tx, KIND, server, { ...d, sent: (d.sent ?? 0) + bytes });
  return readingAt(s, d, s.clock.now().getTime()) + bytes;
}

/** One server's counter now. */
export async function sentBytes(db: Db | Tx, s: Live, server: string): Promise<number> {
  return readingAt(s, await readState<Traffic>(db, KIND, server), s.clock.now().getTime());
}

/**
 * Counters of many servers at `at` (ms), one read: every counter when `servers` is absent (a billing poll
 * over every account), else those of the servers given. Servers that never sent anything are absent.
 */
export async function sentAt(db: Db | Tx, s: Pick<Services, 'config'>, at: number, servers?: readonly string[]): Promise<Map<string, number>> {
  const states = servers ? await readStates<Traffic>(db, KIND, servers) : await readAllStates<Traffic>(db, KIND);
  const out = new Map<string, number>();
  for (const [uuid, d] of states) out.set(uuid, readingAt(s, d, at));
  return out;
}

export const forgetTraffic = (tx: Tx, server: string) => dropState(tx, KIND, server);
