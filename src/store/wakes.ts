/**
 * Wake-ups of background loops (PostgreSQL): instead of each process polling the timers, the outbox, the
 * deliveries and the shared clock several times a second, a commit that adds such work announces a `w:`
 * payload (migration 0130) on the schema's answer channel, which every serving process LISTENs to
 * (store/answer-barrier.ts). A loop sleeps until its next due time or a wake-up of its topic; while the
 * LISTEN connection is away (`listening` false) wake-ups may be missed, so the loops poll as before.
 */

/** Timers were added. */
export const WAKE_TIMERS = 'w:t';
/** Outbox events or deliveries were added. */
export const WAKE_NOTIFY = 'w:n';
/** The shared clock moved (admin/clock.ts). */
export const WAKE_CLOCK = 'w:c';

export interface WakeSource {
  /** Whether wake-ups are heard now; false: they may be missed (the loops poll). */
  readonly listening: boolean;
  /**
   * Calls `fn` with each wake-up's payload among `payloads`, and with every payload when wake-ups may have
   * been missed (listening started again). Returns the function that stops it.
   */
  on(payloads: readonly string[], fn: (payload: string) => void): () => void;
}
