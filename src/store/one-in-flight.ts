/**
 * Work sent in batches over one connection, one batch in flight at a time: what is added while a batch is in
 * flight joins the next, sent as soon as that one is back. Under load one round trip serves everything that
 * arrived during the previous one, and the connection never queues queries (store/answer-barrier.ts: its
 * barriers and its write announcements). `deferred`: a batch started while none is in flight leaves on the
 * next turn of the event loop, so the calls made in this turn join it.
 */
export class OneInFlight<B> {
  private next: B | null = null;
  private busy = false;
  private scheduled = false;

  constructor(
    private readonly opts: {
      empty: () => B;
      /** Sends a batch; settles once the connection answered (a failure is the batch's to report). */
      send: (batch: B) => Promise<void>;
      deferred?: boolean;
    },
  ) {}

  /** Adds to the batch that leaves next (`fill` puts this call's part in it). */
  add(fill: (batch: B) => void): void {
    fill((this.next ??= this.opts.empty()));
    if (this.busy || this.scheduled) return;
    if (!this.opts.deferred) return this.sendNext();
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.sendNext();
    });
  }

  private sendNext(): void {
    const batch = this.next;
    if (this.busy || !batch) return;
    this.next = null;
    this.busy = true;
    const back = () => {
      this.busy = false;
      this.sendNext();
    };
    this.opts.send(batch).then(back, back);
  }
}
