import type { Db, Tx } from './db.js';

/**
 * Group commit on SQLite: write transactions that arrive together share one database transaction and one
 * COMMIT. A commit writes every page the transaction changed to the WAL, one frame each; the writes of one
 * account touch mostly the same pages (the tail of the audit log and its indexes, the owner's index leaves,
 * the answer scopes, the kept counts), so a POST alone writes ~13.5 frames and 16 POSTs committed together
 * write a few each. Fewer frames also mean fewer checkpoints copying them into the database file.
 *
 * How: `run(fn)` queues the write; the queue is taken on the next turn of the event loop (setImmediate: the
 * requests read in this turn have queued their writes by then), inside one BEGIN IMMEDIATE … COMMIT, each
 * write after the first in a SAVEPOINT of its own, one after the other. A write that throws is rolled back to
 * its savepoint alone (the first: the transaction, which holds nothing else yet, and the queue goes on in the
 * next) and its caller gets the error; a write that succeeds is released into the shared
 * transaction and its caller is answered only once the COMMIT returned, so nothing acknowledged is lost to
 * a kill -9 (WAL, synchronous=NORMAL: a commit is in the WAL file before COMMIT returns). Each write keeps
 * everything in its one transaction as before: its change, its audit entry, events and timers are released
 * into the same commit. If the commit fails, or SQLite dropped the whole transaction (it does on a full disk
 * or an I/O error), every write of the group fails. Writes queued while a group runs join it, up to `max`.
 *
 * Nothing outside the group reads what it has not committed: the group holds the store's one connection
 * (Kysely's connection lock) from BEGIN to COMMIT, so other statements, and the answers and events that
 * follow a write, come after the commit. Each write gets a handle of its own on the shared transaction, so
 * what the store keeps per transaction handle (pending counts, changes for the event stream) stays the
 * write's own and is dropped with it when it is rolled back.
 */
export class GroupCommit {
  private readonly queue: Job[] = [];
  private scheduled = false;
  /** Commits made, and writes they carried (the bench prints writes per commit). */
  commits = 0;
  writes = 0;

  constructor(
    private readonly db: Db,
    private readonly sqlite: { inTransaction: boolean },
    private readonly savepoint: { begin(): void; release(): void; rollback(): void },
    private readonly max = 64,
  ) {}

  run<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, resolve: resolve as (value: unknown) => void, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || !this.queue.length) return;
    this.scheduled = true;
    setImmediate(() => void this.drain());
  }

  private async drain(): Promise<void> {
    const done: { job: Job; out: unknown }[] = [];
    let began = false;
    try {
      await this.db.transaction().execute(async (outer) => {
        began = true;
        for (let taken = 0; this.queue.length && taken < this.max; taken++) {
          const job = this.queue.shift()!;
          // A handle of its own on the same connection and transaction (see the header).
          const tx = outer.withoutPlugins() as Tx;
          // The first write needs no savepoint: when it fails, the whole transaction (it alone) is rolled back,
          // and the writes still queued go on in the next. So a write made alone costs what it did before.
          const first = taken === 0;
          if (!first) this.savepoint.begin();
          let out: unknown;
          try {
            out = await job.fn(tx);
          } catch (err) {
            if (first || !this.sqlite.inTransaction) {
              // The first write failed, or SQLite rolled back the whole transaction (the group is lost).
              job.reject(err);
              throw err;
            }
            this.savepoint.rollback();
            this.savepoint.release();
            job.reject(err);
            continue;
          }
          if (!first) this.savepoint.release();
          done.push({ job, out });
        }
      });
    } catch (err) {
      // BEGIN failed (another process held the write lock past the busy timeout): the waiting writes fail as
      // each would have on its own. Otherwise the commit failed or the transaction was lost: nothing of the
      // group was acknowledged, every write of it fails.
      const failed = began ? done.splice(0) : this.queue.splice(0).map((job) => ({ job, out: undefined }));
      for (const { job } of failed) job.reject(err);
    } finally {
      this.scheduled = false;
    }
    if (done.length) {
      this.commits++;
      this.writes += done.length;
    }
    for (const { job, out } of done) job.resolve(out);
    this.schedule();
  }
}

interface Job {
  fn: (tx: Tx) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}
