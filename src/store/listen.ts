import type Pg from 'pg';

export interface ListenHandlers {
  /** Every notification on the channel, in the order PostgreSQL delivers them (commit order). */
  onNotification(payload: string): void;
  /** LISTEN is in force (again): notifications from now on arrive. */
  onListening?(): void;
  /** The connection is gone: notifications sent meanwhile are lost (it reconnects after a second). */
  onLost?(err?: Error): void;
}

/**
 * A dedicated PostgreSQL connection LISTENing on one channel, replaced a second after it is lost
 * (PostgreSQL restarted); notifications sent while it was away are not replayed, which `onLost` says.
 * `sessionSql` runs once per connection before LISTEN. Resolves once the first LISTEN is in force.
 */
export class ListenConnection {
  private closed = false;
  private client: Pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;

  private constructor(
    private readonly pg: typeof Pg,
    private readonly url: string,
    private readonly channel: string,
    private readonly handlers: ListenHandlers,
    private readonly sessionSql: string | undefined,
  ) {}

  static async open(pg: typeof Pg, url: string, channel: string, handlers: ListenHandlers, sessionSql?: string): Promise<ListenConnection> {
    const l = new ListenConnection(pg, url, channel, handlers, sessionSql);
    try {
      await l.connect();
    } catch (err) {
      await l.close();
      throw err;
    }
    return l;
  }

  /** Runs `text` on the listening connection (a NOTIFY it must see come back); rejects when there is none. */
  query(text: string, values?: unknown[]): Promise<unknown> {
    if (!this.client) return Promise.reject(new Error('not listening'));
    return values ? this.client.query(text, values) : this.client.query(text);
  }

  private async connect(): Promise<void> {
    // Named after its channel: an operator (or a test) finds it in pg_stat_activity.
    const c = new this.pg.Client({ connectionString: this.url, application_name: `stratus ${this.channel}` });
    this.client = c;
    const again = (err?: Error) => {
      if (this.closed || this.client !== c) return;
      this.client = undefined;
      this.handlers.onLost?.(err);
      void c.end().catch(() => undefined);
      this.retry = setTimeout(() => void this.connect().catch(again), 1000);
      this.retry.unref();
    };
    c.on('error', again);
    c.on('end', () => again());
    c.on('notification', (n) => {
      if (n.channel === this.channel) this.handlers.onNotification(n.payload ?? '');
    });
    await c.connect();
    if (this.sessionSql) await c.query(this.sessionSql);
    await c.query(`LISTEN ${this.channel}`);
    this.handlers.onListening?.();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }
}
