import type { Services } from '../core/context.js';
import type { Db, Tx } from '../store/db.js';
import { dropState, readAllStates, readState, readStates, writeState } from '../store/sim.js';

/**
 * The simulated network's traffic counters: the bytes each server has sent (tx), ever. While a guest
 * runs, each of its public NICs sends `nic.tx_rate` bytes/s; the operator adds a burst with `stratus sim
 * traffic UUID --send N`. As with drive data (storage.ts) nothing ticks: a counter is a few segments —
 * from `at`, `sent` bytes so far and `nics` NICs sending — so its reading at any moment is exact, and so is
 * what was sent between two moments (what billing charges a cycle for), however the guest started,
 * stopped or burst in between. Segments older than two days (what a billing poll that is late can ask
 * about; a longer gap is billed as a span from its last poll) are folded away.
 */
type Live = Pick<Services, 'config' | 'clock'>;

/** [at (ms), bytes sent up to then, public NICs sending from then, the thousandths of a byte beyond them] */
type Segment = [number, number, number, number?];

interface Traffic {
  segs?: Segment[];
}

const KIND = 'traffic';
const KEEP_MS = 2 * 86_400_000;

const rate = (s: Pick<Services, 'config'>) => s.config.delays['nic.tx_rate'];

/**
 * A counter at `t` (ms): whole bytes and thousandths beyond them, from the segment in force then (before
 * the first, its start). Integer arithmetic (bytes/s × ms = thousandths), so readings on either side of a
 * new segment add up exactly: what a cycle sent never loses a byte to rounding.
 */
function exactAt(s: Pick<Services, 'config'>, d: Traffic, t: number): { bytes: number; milli: number } {
  const segs = d.segs ?? [];
  if (!segs.length) return { bytes: 0, milli: 0 };
  let seg = segs[0]!;
  if (t < seg[0]) return { bytes: seg[1], milli: seg[3] ?? 0 };
  for (const x of segs) if (x[0] <= t) seg = x;
  const milli = (seg[3] ?? 0) + (t - seg[0]) * rate(s) * seg[2];
  return { bytes: seg[1] + Math.floor(milli / 1000), milli: milli % 1000 };
}

const readingAt = (s: Pick<Services, 'config'>, d: Traffic, t: number): number => exactAt(s, d, t).bytes;

/** A new segment from now: `nics` sending, `extra` bytes sent at once. Returns the reading after. */
async function change(tx: Tx, s: Live, server: string, nics: (current: number) => number, extra = 0): Promise<number> {
  const now = s.clock.now().getTime();
  const d = await readState<Traffic>(tx, KIND, server);
  const segs = (d.segs ?? []).filter((x) => x[0] < now);
  const current = segs.length ? segs[segs.length - 1]![2] : 0;
  const exact = exactAt(s, d, now);
  const sent = exact.bytes + extra;
  segs.push(exact.milli ? [now, sent, nics(current), exact.milli] : [now, sent, nics(current)]);
  // The segment in force two days ago stays; older ones go.
  while (segs.length > 1 && segs[1]![0] <= now - KEEP_MS) segs.shift();
  if (segs.length === 1 && !segs[0]![1] && !segs[0]![2]) await dropState(tx, KIND, server);
  else await writeState(tx, KIND, server, { segs });
  return sent;
}

/** A guest powers on: from now its `publicNics` NICs send. */
export const startSending = (tx: Tx, s: Live, server: string, publicNics: number) => change(tx, s, server, () => publicNics);

/** A guest powers off: what it sent is kept, nothing more is sent. */
export const stopSending = (tx: Tx, s: Live, server: string) => change(tx, s, server, () => 0);

/** The operator: the server sends `bytes` now, on top of its NICs' rate. Returns the counter after. */
export const sendBurst = (tx: Tx, s: Live, server: string, bytes: number) => change(tx, s, server, (nics) => nics, bytes);

/** One server's counter now. */
export async function sentBytes(db: Db | Tx, s: Live, server: string): Promise<number> {
  return readingAt(s, await readState<Traffic>(db, KIND, server), s.clock.now().getTime());
}

/**
 * What servers sent in `from`..`to` (ms), one read: every server's when `servers` is absent (a billing poll
 * over every account), else those given. Servers that sent nothing then are absent.
 */
export async function sentBetween(
  db: Db | Tx,
  s: Pick<Services, 'config'>,
  from: number,
  to: number,
  servers?: readonly string[],
): Promise<Map<string, number>> {
  const states = servers ? await readStates<Traffic>(db, KIND, servers) : await readAllStates<Traffic>(db, KIND);
  const out = new Map<string, number>();
  for (const [uuid, d] of states) {
    const sent = readingAt(s, d, to) - readingAt(s, d, from);
    if (sent > 0) out.set(uuid, sent);
  }
  return out;
}

export const forgetTraffic = (tx: Tx, server: string) => dropState(tx, KIND, server);
