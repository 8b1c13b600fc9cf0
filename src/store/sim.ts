import { sql } from 'kysely';
import type { Db, Tx } from './db.js';
import { SENT_AHEAD_MARK } from './shapes.js';

/**
 * The SQL of the simulator's own table, `sim_state` (sim/ reads and writes it only through here). What the
 * simulated infrastructure holds about an object, keyed by (kind, uuid): a server's power-on time and leases, a drive's written bytes, a job's planned end. It lives in its own table, never in
 * the API body, so the API side cannot depend on it by accident and a real driver could replace it.
 * Writers hold the object's row lock (the API transaction that caused the change), so a plain
 * read-modify-write here does not lose updates. Its writes are answered by nobody: on PostgreSQL they travel
 * with the transaction's next round trip (store/pg-client.ts), not one each while the object is locked.
 */
export type SimState = Record<string, unknown>;

export async function readState<T extends object = SimState>(db: Db | Tx, kind: string, uuid: string): Promise<Partial<T>> {
  const row = await db.selectFrom('sim_state').select('state').where('kind', '=', kind).where('uuid', '=', uuid).executeTakeFirst();
  return row ? (JSON.parse(row.state) as Partial<T>) : {};
}

/** States of many objects of one kind, one query (uuids without state are absent). */
export async function readStates<T extends object = SimState>(db: Db | Tx, kind: string, uuids: readonly string[]): Promise<Map<string, Partial<T>>> {
  const out = new Map<string, Partial<T>>();
  if (!uuids.length) return out;
  // In slices: a statement's parameters are bounded (SQLite 32766, PostgreSQL 65535), a billing poll is not.
  for (let i = 0; i < uuids.length; i += 5000) {
    const rows = await db
      .selectFrom('sim_state')
      .select(['uuid', 'state'])
      .where('kind', '=', kind)
      .where('uuid', 'in', uuids.slice(i, i + 5000))
      .execute();
    for (const r of rows) out.set(r.uuid, JSON.parse(r.state) as Partial<T>);
  }
  return out;
}

/** Every state of one kind (a billing poll over all running guests reads them at once, not by uuid). */
export async function readAllStates<T extends object = SimState>(db: Db | Tx, kind: string): Promise<Map<string, Partial<T>>> {
  const rows = await db.selectFrom('sim_state').select(['uuid', 'state']).where('kind', '=', kind).execute();
  return new Map(rows.map((r) => [r.uuid, JSON.parse(r.state) as Partial<T>]));
}

/** Merge keys into an object's state (`undefined` removes a key); an empty state removes the row. */
export async function updateState(tx: Tx, kind: string, uuid: string, change: SimState): Promise<SimState> {
  const current = await readState(tx, kind, uuid);
  const next: SimState = { ...current };
  for (const [k, v] of Object.entries(change)) {
    if (v === undefined) delete next[k];
    else next[k] = v;
  }
  await writeState(tx, kind, uuid, next);
  return next;
}

export async function writeState(tx: Tx, kind: string, uuid: string, state: SimState): Promise<void> {
  if (!Object.keys(state).length) {
    await dropState(tx, kind, uuid);
    return;
  }
  const text = JSON.stringify(state);
  await tx
    .insertInto('sim_state')
    .values({ kind, uuid, state: text })
    .onConflict((oc) => oc.columns(['kind', 'uuid']).doUpdateSet({ state: text }))
    .modifyEnd(sql.raw(SENT_AHEAD_MARK))
    .execute();
}

export async function dropState(tx: Tx, kind: string, uuids: string | readonly string[]): Promise<void> {
  const list = typeof uuids === 'string' ? [uuids] : [...uuids];
  if (list.length) await tx.deleteFrom('sim_state').where('kind', '=', kind).where('uuid', 'in', list).modifyEnd(sql.raw(SENT_AHEAD_MARK)).execute();
}

/** States of one kind with the exact text stored (a tick that must clear only what it read compares it). */
export async function readStateTexts(db: Db | Tx, kind: string): Promise<{ uuid: string; state: string }[]> {
  return db.selectFrom('sim_state').select(['uuid', 'state']).where('kind', '=', kind).execute();
}

/** Drop a state only if it is still the text read (a newer write since then stays). */
export async function dropStateIfUnchanged(tx: Tx, kind: string, uuid: string, text: string): Promise<void> {
  await tx.deleteFrom('sim_state').where('kind', '=', kind).where('uuid', '=', uuid).where('state', '=', text).execute();
}
