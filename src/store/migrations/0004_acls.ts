import type { Kysely, Migration } from 'kysely';

/**
 * ACLs: the ACL object itself lives in `resources` (kind `acls`); its grantees, rules and tags are
 * relation rows so that "what may user U do with resource R" is a few indexed joins:
 * grantee -> acl -> rule, acl -> tag -> tag_members -> resource.
 */
export const acls: Migration = {
  async up(db: Kysely<any>) {
    await db.schema
      .createTable('acl_grantees')
      .addColumn('acl_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('grantee_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('position', 'integer', (c) => c.notNull())
      .addPrimaryKeyConstraint('acl_grantees_pk', ['acl_uuid', 'grantee_uuid'])
      .execute();
    await db.schema.createIndex('acl_grantees_by_grantee').on('acl_grantees').columns(['grantee_uuid', 'acl_uuid']).execute();

    await db.schema
      .createTable('acl_rules')
      .addColumn('acl_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('permission', 'varchar(16)', (c) => c.notNull())
      .addPrimaryKeyConstraint('acl_rules_pk', ['acl_uuid', 'permission'])
      .execute();

    await db.schema
      .createTable('acl_tags')
      .addColumn('acl_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('tag_uuid', 'varchar(64)', (c) => c.notNull())
      .addColumn('position', 'integer', (c) => c.notNull())
      .addPrimaryKeyConstraint('acl_tags_pk', ['acl_uuid', 'tag_uuid'])
      .execute();
    await db.schema.createIndex('acl_tags_by_tag').on('acl_tags').columns(['tag_uuid', 'acl_uuid']).execute();
  },
};
