import { Migrator, sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import { byCodePoint } from '../../core/order.js';
import type { Dialect } from '../db.js';
import { accounts } from './0002_accounts.js';
import { rateLimits } from './0003_rate_limits.js';
import { acls } from './0004_acls.js';
import { scheduler } from './0005_scheduler.js';
import { statusColumn } from './0006_status.js';
import { networks } from './0007_networks.js';
import { simState } from './0008_sim_state.js';
import { resourceCounts } from './0009_resource_counts.js';
import { loginUnlock } from './0010_login_unlock.js';
import { fwpolicyServers } from './0011_fwpolicy_servers.js';
import { billing } from './0012_billing.js';
import { subscriptions } from './0013_subscriptions.js';
import { subscriptionConsumed } from './0014_subscription_consumed.js';
import { usage } from './0015_usage.js';
import { notifications } from './0020_notifications.js';
import { answerChanges } from './0021_answer_changes.js';
import { timesAsTimes } from './0022_times_as_times.js';
import { driveData } from './0040_drive_data.js';
import { changeCounters } from './0050_change_counters.js';
import { changeRelay } from './0070_change_relay.js';
import { answerScopes } from './0090_answer_scopes.js';
import { pgSharingCounters } from './0100_pg_sharing_counters.js';
import { announceAfterCommit } from './0120_announce_after_commit.js';
import { wakeOnWork } from './0130_wake_on_work.js';
import { announcePending } from './0131_announce_pending.js';
import { relationStamps } from './0140_relation_stamps.js';
import { sqliteWritePages } from './0160_sqlite_write_pages.js';
import { pgSharingNoWait } from './0161_pg_sharing_no_wait.js';

/**
 * Versioned migrations. Never edit a released one: add the next number, so a newer Stratus opens an
 * older database. Each takes the engine because auto-increment keys are spelled differently.
 */
function migrations(dialect: Dialect): Record<string, Migration> {
  const serialPk = dialect === 'postgres' ? 'bigserial primary key' : 'integer primary key autoincrement';
  return {
    '0001_initial': {
      async up(db: Kysely<any>) {
        await db.schema
          .createTable('users')
          .addColumn('uuid', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('email', 'varchar(320)', (c) => c.notNull().unique())
          .addColumn('password_hash', 'text')
          .addColumn('state', 'varchar(32)', (c) => c.notNull())
          .addColumn('profile', 'text', (c) => c.notNull())
          .addColumn('created_at', 'varchar(40)', (c) => c.notNull())
          .execute();

        // Small operator-level facts (the demo login shown at start-up, ...).
        await db.schema
          .createTable('settings')
          .addColumn('key', 'varchar(64)', (c) => c.primaryKey())
          .addColumn('value', 'text', (c) => c.notNull())
          .execute();

        await db.schema
          .createTable('resources')
          .addColumn('seq', sql.raw(serialPk))
          .addColumn('kind', 'varchar(32)', (c) => c.notNull())
          .addColumn('uuid', 'varchar(64)', (c) => c.notNull())
          .addColumn('owner_uuid', 'varchar(64)')
          .addColumn('name', 'text')
          .addColumn('body', 'text', (c) => c.notNull())
          .addColumn('created_at', 'varchar(40)', (c) => c.notNull())
          .addColumn('updated_at', 'varchar(40)', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('resources_uuid_kind').unique().on('resources').columns(['uuid', 'kind']).execute();
        await db.schema.createIndex('resources_owner_list').on('resources').columns(['kind', 'owner_uuid', 'seq']).execute();
        await db.schema.createIndex('resources_owner_name').on('resources').columns(['kind', 'owner_uuid', 'name']).execute();

        await db.schema
          .createTable('tag_members')
          .addColumn('seq', sql.raw(serialPk))
          .addColumn('tag_uuid', 'varchar(64)', (c) => c.notNull())
          .addColumn('res_type', 'varchar(32)', (c) => c.notNull())
          .addColumn('res_uuid', 'varchar(64)', (c) => c.notNull())
          .execute();
        await db.schema.createIndex('tag_members_tag').unique().on('tag_members').columns(['tag_uuid', 'res_type', 'res_uuid']).execute();
        await db.schema.createIndex('tag_members_res').on('tag_members').columns(['res_type', 'res_uuid']).execute();
      },
    },
    '0002_accounts': accounts,
    '0003_rate_limits': rateLimits,
    '0004_acls': acls,
    '0005_scheduler': scheduler(dialect),
    '0006_status': statusColumn,
    '0007_networks': networks,
    '0008_sim_state': simState(dialect),
    '0009_resource_counts': resourceCounts,
    '0010_login_unlock': loginUnlock,
    '0011_fwpolicy_servers': fwpolicyServers,
    '0012_billing': billing(dialect),
    '0013_subscriptions': subscriptions(dialect),
    '0014_subscription_consumed': subscriptionConsumed(),
    '0015_usage': usage(dialect),
    '0020_notifications': notifications(dialect),
    '0021_answer_changes': answerChanges(dialect),
    '0022_times_as_times': timesAsTimes(),
    '0040_drive_data': driveData(dialect),
    '0050_change_counters': changeCounters(dialect),
    '0070_change_relay': changeRelay(serialPk),
    '0090_answer_scopes': answerScopes(dialect),
    '0100_pg_sharing_counters': pgSharingCounters(dialect),
    '0120_announce_after_commit': announceAfterCommit(dialect),
    '0130_wake_on_work': wakeOnWork(dialect),
    '0131_announce_pending': announcePending(serialPk),
    '0140_relation_stamps': relationStamps(dialect),
    '0160_sqlite_write_pages': sqliteWritePages(dialect),
    '0161_pg_sharing_no_wait': pgSharingNoWait(dialect),
  };
}

export function migrationProvider(dialect: Dialect): MigrationProvider {
  if (dialect === 'sqlite') return { getMigrations: async () => migrations(dialect) };
  // PostgreSQL sends a migration's statements ahead (store/pg-client.ts, PipelineMode); one statement waited
  // for at its end answers for them all, so a failure is reported as this migration's.
  const waited = (m: Migration): Migration => ({
    ...m,
    up: async (db) => {
      await m.up(db);
      await sql`select 1`.execute(db);
    },
  });
  return { getMigrations: async () => Object.fromEntries(Object.entries(migrations(dialect)).map(([name, m]) => [name, waited(m)])) };
}

/**
 * The migrator of a store: on PostgreSQL its bookkeeping tables pinned to `schema` (Kysely otherwise finds a
 * `kysely_migration` table in any schema of the database and skips creating ours). Names sort by code point
 * (`0001_…` < `0002_…`): Kysely's default, localeCompare, loads ICU's collation data.
 */
export function migratorOf(db: Kysely<any>, dialect: Dialect, schema?: string): Migrator {
  return new Migrator({ db, provider: migrationProvider(dialect), migrationTableSchema: schema, nameComparator: byCodePoint });
}
