import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';

/**
 * The simulator's own state (what the hypervisor, storage and network hold: a server's power-on time,
 * DHCP leases, console ports, a drive's written bytes, a job's planned duration), keyed by (kind, uuid)
 * and never inside API bodies; the event outbox (events with subscribers, written with the change that
 * caused them); and a unique key for recurring timers, so several processes schedule one of each.
 * Older databases kept simulator state in `_`-prefixed body keys: they move here.
 */
const SIM_KEYS: Record<string, Record<string, string>> = {
  servers: {
    _active_since: 'active_since',
    _leases: 'leases',
    _vnc_port: 'vnc_port',
    _console_port: 'console_port',
    _fail_next_boot: 'fail_next_boot',
    _acpi_ignore: 'acpi_ignore',
  },
  drives: { _written: 'written' },
  jobs: { _started_at: 'started_at', _ends_at: 'ends_at' },
  ips: { _dynamic: 'dynamic' },
};

export function simState(dialect: Dialect): Migration {
  const serialPk = dialect === 'postgres' ? 'bigserial primary key' : 'integer primary key autoincrement';
  return {
    async up(db: Kysely<any>) {
      await db.schema
        .createTable('sim_state')
        .addColumn('kind', 'varchar(32)', (c) => c.notNull())
        .addColumn('uuid', 'varchar(64)', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addPrimaryKeyConstraint('sim_state_pk', ['kind', 'uuid'])
        .execute();

      await db.schema
        .createTable('event_outbox')
        .addColumn('seq', sql.raw(serialPk))
        .addColumn('type', 'varchar(64)', (c) => c.notNull())
        .addColumn('owner_uuid', 'varchar(64)')
        .addColumn('resource_kind', 'varchar(32)')
        .addColumn('resource_uuid', 'varchar(64)')
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('created_at', 'varchar(40)', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('event_outbox_type').on('event_outbox').columns(['type', 'seq']).execute();

      await db.schema.alterTable('timers').addColumn('unique_key', 'varchar(128)').execute();
      await db.schema.createIndex('timers_unique_key').unique().on('timers').column('unique_key').execute();

      // Move simulator keys out of stored bodies (databases written by earlier releases).
      for (const [kind, keys] of Object.entries(SIM_KEYS)) {
        const rows = (await db.selectFrom('resources').select(['seq', 'uuid', 'body', 'kind']).where('kind', '=', kind).execute()) as {
          seq: number;
          uuid: string;
          body: string;
        }[];
        for (const r of rows) {
          const body = JSON.parse(r.body) as Record<string, unknown>;
          const state: Record<string, unknown> = {};
          for (const [old, key] of Object.entries(keys)) {
            if (old in body) {
              if (body[old] !== undefined && body[old] !== false) state[key] = body[old];
              delete body[old];
            }
          }
          if (kind === 'jobs' && '_children' in body) {
            body.children = body._children;
            delete body._children;
          }
          if (!Object.keys(state).length && r.body === JSON.stringify(body)) continue;
          await db
            .updateTable('resources')
            .set({ body: JSON.stringify(body) })
            .where('seq', '=', r.seq)
            .execute();
          if (Object.keys(state).length)
            await db
              .insertInto('sim_state')
              .values({ kind, uuid: r.uuid, state: JSON.stringify(state) })
              .execute();
        }
      }
    },
  };
}
