import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type { Dialect, Tx } from './db.js';

/** One changed object of a user (or a user-level fact such as the balance) for the live event stream. */
export interface Change {
  owner: string;
  /** `drives`, `servers`, ... or `balance`; `session-ended` tells the stream a credential is gone (uuid: its hash). */
  kind: string;
  /** The object's uuid; null for a user-level fact. */
  uuid: string | null;
}

export type ChangeListener = (changes: readonly Change[]) => void;

/** NOTIFY payloads are limited to 8000 bytes: changes go out in chunks well below it. */
const CHUNK_BYTES = 6000;

/**
 * Committed changes to users' objects, for the websocket stream (http/event-stream.ts). The repository notes
 * every insert, write and delete in the transaction that makes it; nothing is kept unless a listener is
 * on (`enabled`). At commit the changes leave exactly once: on PostgreSQL as `NOTIFY` in the same
 * transaction (delivered on commit, in commit order, to every API process on the schema, itself
 * included), on SQLite (one serving process) to this process's listeners right after the commit, or, from an
 * operator command's process (`relay`), through the `change_relay` table the serving process polls. A
 * rolled-back change is never seen.
 */
export class ChangeFeed {
  enabled = false;
  private readonly pending = new WeakMap<Tx, Change[]>();
  private readonly listeners = new Set<ChangeListener>();

  /** PostgreSQL: the NOTIFY channel of this store's schema (set when the store opens). */
  channel: string | null = null;

  /**
   * An operator command's store: its changes are for the serving processes, not its own listeners. On
   * SQLite they go into `change_relay` in the transaction (a serving process reads them: Store.listenChanges);
   * on PostgreSQL NOTIFY reaches every process anyway.
   */
  relay = false;

  /**
   * One of several serving processes on one SQLite file (`serve --workers N`): its changes go to its own
   * listeners at commit and into `change_relay` tagged with this id, which every other worker reads by its
   * own cursor (Store.listenChanges); null: the only serving process.
   */
  origin: string | null = null;

  constructor(private readonly dialect: Dialect) {}

  note(tx: Tx, change: Change): void {
    if (this.enabled) this.announce(tx, change);
  }

  /**
   * Noted even where this process has no stream on: a fact every process's stream must hear of (a
   * session ended by an operator command or a process that serves no sockets).
   */
  announce(tx: Tx, change: Change): void {
    if (!change.owner) return;
    let list = this.pending.get(tx);
    if (!list) this.pending.set(tx, (list = []));
    list.push(change);
  }

  /**
   * The last statements of a transaction: PostgreSQL's NOTIFY (sent when the transaction commits), or with
   * `later` (PostgreSQL, store/db.ts `transaction`) nothing: the changes are returned, for the caller to
   * NOTIFY once the transaction committed (`payloads`).
   */
  async flush(tx: Tx, later = false): Promise<Change[] | undefined> {
    const list = this.pending.get(tx);
    if (!list) return undefined;
    this.pending.delete(tx);
    if (this.dialect !== 'postgres') {
      if (!this.relay && !this.origin) return list;
      await tx
        .insertInto('change_relay')
        .values({ changes: JSON.stringify(this.origin ? { from: this.origin, changes: list } : list) })
        .execute();
      return this.relay ? undefined : list;
    }
    if (later) return list;
    const channel = this.channel ?? schemaChannel('public');
    for (const payload of changePayloads(list)) await sql`/* shape changes.notify */ select pg_notify(${channel}, ${payload})`.execute(tx);
    return undefined;
  }

  /** After a commit on SQLite: the transaction's changes to this process's listeners. */
  committed(changes: Change[] | undefined): void {
    if (changes?.length) this.emit(changes);
  }

  emit(changes: readonly Change[]): void {
    for (const l of this.listeners) l(changes);
  }

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/** NOTIFY payloads of `list`: JSON arrays of its changes, in order, each well below PostgreSQL's 8000 bytes. */
export function changePayloads(list: readonly Change[]): string[] {
  const out: string[] = [];
  let chunk: Change[] = [];
  let size = 0;
  for (const c of list) {
    const bytes = JSON.stringify(c).length + 1;
    if (size + bytes > CHUNK_BYTES && chunk.length) {
      out.push(JSON.stringify(chunk));
      chunk = [];
      size = 0;
    }
    chunk.push(c);
    size += bytes;
  }
  if (chunk.length) out.push(JSON.stringify(chunk));
  return out;
}

/** A `change_relay` row's changes: an operator command's array, or a worker's `{from, changes}` (null: this worker's own). */
export function relayedChanges(text: string, self: string | null): Change[] | null {
  const parsed = JSON.parse(text) as Change[] | { from: string; changes: Change[] };
  if (Array.isArray(parsed)) return parsed;
  return parsed.from === self ? null : parsed.changes;
}

/** The NOTIFY channel of a schema: channels are database-wide, and each test (or deployment) has its own schema. */
export const schemaChannel = (schema: string): string => `stratus_changes_${createHash('sha256').update(schema).digest('hex').slice(0, 16)}`;

/** The channel announcing that committed data of a schema may have changed (store/answer-barrier.ts). */
export const answerChannel = (schema: string): string => `stratus_answers_${createHash('sha256').update(schema).digest('hex').slice(0, 16)}`;
