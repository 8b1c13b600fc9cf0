import type { Kysely, Migration } from 'kysely';

/**
 * Which server uses which public IP and which servers sit in which private VLAN (the IPs and VLANs
 * themselves are rows of `resources`, kinds `ips` and `vlans`). `ip_servers.dynamic` = 1 marks a DHCP
 * lease (the address is the pool's, held for a running server), 0 a static configuration. Also an index
 * for the audit log's action filters (`/logs/?name=`).
 */
export const networks: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .createTable('ip_servers')
      .addColumn('address', 'varchar(64)', (c) => c.primaryKey())
      .addColumn('server_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('dynamic', 'integer', (c) => c.notNull()) // 0|1: one spelling for both engines
      .execute();
    await db.schema.createIndex('ip_servers_server').on('ip_servers').columns(['server_uuid', 'dynamic']).execute();

    await db.schema
      .createTable('vlan_servers')
      .addColumn('vlan_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('server_uuid', 'varchar(64)', (c) => c.notNull())
      .addPrimaryKeyConstraint('vlan_servers_pk', ['vlan_uuid', 'server_uuid'])
      .execute();
    await db.schema.createIndex('vlan_servers_server').on('vlan_servers').columns(['server_uuid', 'vlan_uuid']).execute();

    await db.schema.createIndex('audit_log_owner_action').on('audit_log').columns(['owner_uuid', 'action', 'seq']).execute();
  },
};
