import { sql } from 'kysely';
import type { Db, Dialect, Tx } from './db.js';
import { TABLE_NAMES, TABLES, type TableName } from './tables.js';

/**
 * The SQL of whole-deployment and whole-account state (admin reset, `stratus export|import`), driven by the
 * table description (tables.ts): a table added there is reset and exported without an edit here.
 */
export class StateQueries {
  constructor(private readonly dialect: Dialect) {}

  /** The exported tables this database has, by name (kysely's own bookkeeping never travels). */
  async tableNames(db: Db | Tx): Promise<string[]> {
    const rows =
      this.dialect === 'postgres'
        ? (
            await sql<{ name: string }>`select table_name as name from information_schema.tables
            where table_schema = current_schema() and table_type = 'BASE TABLE' and table_name not like 'kysely_%'`.execute(db)
          ).rows
        : (
            await sql<{ name: string }>`select name from sqlite_master where type = 'table' and name not like 'sqlite_%' and name not like 'kysely_%'`.execute(
              db,
            )
          ).rows;
    return rows
      .map((r) => r.name)
      .filter((name) => TABLES[name as TableName]?.exported !== false)
      .sort();
  }

  /** Every row of a table. */
  async rowsOf(db: Db | Tx, table: string): Promise<Record<string, unknown>[]> {
    return (await sql<Record<string, unknown>>`select * from ${sql.table(table)}`.execute(db)).rows;
  }

  /**
   * Replaces the rows of `names` with `given`, in order (`users` first: others refer to it); cached
   * presentations are keyed by row version, so imported rows get versions above any seen before.
   */
  async replaceAll(
    tx: Tx,
    names: readonly string[],
    given: Record<string, Record<string, unknown>[]>,
    paramsPerInsert: number,
    /** Called after each table is in (tables done so far, the table). */
    onTable?: (done: number, table: string) => void,
  ): Promise<Record<string, number>> {
    const bump = await this.maxVersion(tx);
    const order = [...names].sort((a, b) => Number(b === 'users') - Number(a === 'users'));
    for (const t of [...order].reverse()) await sql`delete from ${sql.table(t)}`.execute(tx);
    const counts: Record<string, number> = {};
    for (const t of order) {
      const rows = given[t];
      counts[t] = rows.length;
      const width = Math.max(1, Object.keys(rows[0] ?? {}).length);
      const batch = Math.max(1, Math.floor(paramsPerInsert / width));
      for (let i = 0; i < rows.length; i += batch)
        await tx
          .insertInto(t as 'settings')
          .values(rows.slice(i, i + batch) as never)
          .execute();
      onTable?.(Object.keys(counts).length, t);
    }
    for (const t of ['resources', 'resource_counts']) if (names.includes(t)) await sql`update ${sql.table(t)} set version = version + ${bump}`.execute(tx);
    if (this.dialect === 'postgres') await this.resetSequences(tx);
    return counts;
  }

  private async maxVersion(tx: Tx): Promise<number> {
    const r = await sql<{
      v: number | string | null;
    }>`select max(v) as v from (select max(version) as v from resources union all select max(version) as v from resource_counts) m`.execute(tx);
    return Number(r.rows[0]?.v ?? 0) + 1;
  }

  /** PostgreSQL's serial columns continue after the imported keys (SQLite's autoincrement follows by itself). */
  private async resetSequences(tx: Tx): Promise<void> {
    const cols = await sql<{ t: string; c: string }>`select table_name as t, column_name as c from information_schema.columns
    where table_schema = current_schema() and column_default like 'nextval%'`.execute(tx);
    for (const { t, c } of cols.rows)
      await sql`select setval(pg_get_serial_sequence(${t}, ${c}), coalesce((select max(${sql.ref(c)}) from ${sql.table(t)}), 0) + 1, false)`.execute(tx);
  }

  /**
   * Empties every table the description says a reset empties, keeping what it says to keep; answers the
   * rows deleted per table and the users whose sessions ended (their sockets are to close).
   */
  async emptyAll(tx: Tx): Promise<{ deleted: Record<string, number>; endedSessionsOf: string[] }> {
    const deleted: Record<string, number> = {};
    let endedSessionsOf: string[] = [];
    for (const table of TABLE_NAMES) {
      const reset = TABLES[table].reset;
      if (reset === 'keep') continue;
      if (table === 'sessions') {
        const gone = await tx.deleteFrom('sessions').returning('user_uuid').execute();
        endedSessionsOf = [...new Set(gone.map((g) => g.user_uuid))];
        deleted[table] = gone.length;
        continue;
      }
      let q = tx.deleteFrom(table);
      if (reset !== 'empty') {
        const [column, op, value] = reset.keepWhere;
        // Delete what the kept rows are not.
        q = q.where(sql.ref(column), op === 'is' ? 'is not' : op === 'is not' ? 'is' : op === '=' ? '<>' : '=', value);
      }
      deleted[table] = Number((await q.executeTakeFirst()).numDeletedRows);
    }
    return { deleted, endedSessionsOf };
  }

  /**
   * Empties one account: everything it owns (resources, their tags, ACLs, network and simulator state,
   * pending timers), its money, usage, notifications, counts, audit log and events. Sessions are the
   * caller's (they are announced); the user row stays.
   */
  async emptyAccount(tx: Tx, userUuid: string): Promise<Record<string, number>> {
    const deleted: Record<string, number> = {};
    const owned = () => tx.selectFrom('resources').select('uuid').where('owner_uuid', '=', userUuid);
    const run = async (table: string, q: { executeTakeFirst(): Promise<{ numDeletedRows: bigint }> }) => {
      deleted[table] = (deleted[table] ?? 0) + Number((await q.executeTakeFirst()).numDeletedRows);
    };
    await run('timers', tx.deleteFrom('timers').where('unique_key', 'is', null).where('subject', 'in', owned()));
    await run('sim_state', tx.deleteFrom('sim_state').where('uuid', 'in', owned()));
    await run(
      'tag_members',
      tx.deleteFrom('tag_members').where((eb) => eb.or([eb('tag_uuid', 'in', owned()), eb('res_uuid', 'in', owned())])),
    );
    await run('acl_grantees', tx.deleteFrom('acl_grantees').where('acl_uuid', 'in', owned()));
    await run('acl_rules', tx.deleteFrom('acl_rules').where('acl_uuid', 'in', owned()));
    await run(
      'acl_tags',
      tx.deleteFrom('acl_tags').where((eb) => eb.or([eb('acl_uuid', 'in', owned()), eb('tag_uuid', 'in', owned())])),
    );
    await run(
      'ip_servers',
      tx.deleteFrom('ip_servers').where((eb) => eb.or([eb('server_uuid', 'in', owned()), eb('address', 'in', owned())])),
    );
    await run(
      'vlan_servers',
      tx.deleteFrom('vlan_servers').where((eb) => eb.or([eb('server_uuid', 'in', owned()), eb('vlan_uuid', 'in', owned())])),
    );
    await run(
      'fwpolicy_servers',
      tx.deleteFrom('fwpolicy_servers').where((eb) => eb.or([eb('server_uuid', 'in', owned()), eb('policy_uuid', 'in', owned())])),
    );
    await run('notification_preferences', tx.deleteFrom('notification_preferences').where('contact_uuid', 'in', owned()));
    // Its drives' and snapshots' bytes: each block loses the references of the account's maps.
    const maps = sql`(select uuid from resources where owner_uuid = ${userUuid})`;
    await sql`update data_blocks set refs = refs - (select count(*) from data_maps m where m.hash = data_blocks.hash and m.map in ${maps})
      where hash in (select hash from data_maps where map in ${maps})`.execute(tx);
    await run(
      'data_blocks',
      tx
        .deleteFrom('data_blocks')
        .where('refs', '<=', 0)
        .where('hash', 'in', tx.selectFrom('data_maps').select('hash').where('map', 'in', owned())),
    );
    await run('data_maps', tx.deleteFrom('data_maps').where('map', 'in', owned()));
    await run('upload_chunks', tx.deleteFrom('upload_chunks').where('drive', 'in', owned()));
    await run('resources', tx.deleteFrom('resources').where('owner_uuid', '=', userUuid));
    // Its money: subscriptions (and their renewal timers), the ledger, the balance (back to the opening one).
    const subscriptions = tx
      .selectFrom('subscriptions')
      .select((eb) => eb.cast<string>('id', 'varchar(32)').as('id'))
      .where('owner_uuid', '=', userUuid);
    await run('timers', tx.deleteFrom('timers').where('kind', 'in', ['subscription.notice', 'subscription.end']).where('subject', 'in', subscriptions));
    for (const table of [
      'subscriptions',
      'ledger',
      'usage_records',
      'burst_usage',
      'burst_usage_daily',
      'billing_accounts',
      'notifications',
      'notification_deliveries',
    ] as const)
      await run(table, tx.deleteFrom(table).where('owner_uuid', '=', userUuid));
    // Counts go to 0 with a new version (kept rows: the repository caches by (kind, owner, version)).
    const counts = await tx
      .updateTable('resource_counts')
      .set((eb) => ({ n: 0, version: eb('version', '+', 1) }))
      .where('owner_uuid', '=', userUuid)
      .executeTakeFirst();
    deleted.resource_counts = Number(counts.numUpdatedRows);
    await run('audit_log', tx.deleteFrom('audit_log').where('owner_uuid', '=', userUuid));
    await run('event_outbox', tx.deleteFrom('event_outbox').where('owner_uuid', '=', userUuid));
    await run('signup_tokens', tx.deleteFrom('signup_tokens').where('user_uuid', '=', userUuid));
    return deleted;
  }
}
