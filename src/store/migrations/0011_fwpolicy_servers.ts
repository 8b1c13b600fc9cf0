import type { Kysely, Migration } from 'kysely';

/**
 * Which servers have NICs that use each firewall policy, kept with the server's NICs (like the VLAN and
 * static-IP relations): a policy's `servers` and its propagation to running servers are index lookups.
 */
export const fwpolicyServers: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .createTable('fwpolicy_servers')
      .addColumn('policy_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('server_uuid', 'varchar(64)', (c) => c.notNull())
      .addPrimaryKeyConstraint('fwpolicy_servers_pk', ['policy_uuid', 'server_uuid'])
      .execute();
    await db.schema.createIndex('fwpolicy_servers_server').on('fwpolicy_servers').columns(['server_uuid', 'policy_uuid']).execute();
  },
};
