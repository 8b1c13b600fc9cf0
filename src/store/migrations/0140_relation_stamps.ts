import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';

/**
 * SQLite: a row's relations as a page shows them (its owner's and the caller's tags on it, the grants on
 * it, a tag's members) are stamped by the `s:<owner>` counters of `answer_scopes` (store/resources/
 * relations.ts `stamp`), so a page of kept object texts reads one counter instead of its relations.
 * Migration 0090 raises `s:<owner>` with every write of that owner's tags, memberships and ACLs; these
 * triggers raise it for the rest of what those relations join to:
 *
 * - a grantee's e-mail (shown in `grantees`) or the user row itself: the owners of the ACLs naming them;
 * - a resource inserted, deleted or moved (uuid, kind, owner) while tags carry it (a tag's `resources`
 *   joins the member's row and shows its owner): the owners of those tags. Deletes through the services
 *   drop memberships first, so the probe (one index range of `tag_members`) finds nothing there.
 *
 * PostgreSQL keeps `answer_scopes` empty (its scopes are announcements) and reads relations as before.
 */
export const relationStamps = (dialect: Dialect): Migration => ({
  async up(db: Kysely<any>) {
    if (dialect !== 'sqlite') return;
    const raise = (owners: string) => `insert into answer_scopes (scope, n) ${owners} on conflict (scope) do update set n = n + 1;`;
    const aclOwnersNaming = (user: string) =>
      raise(
        `select distinct 's:' || coalesce(r.owner_uuid, ''), 1 from acl_grantees as g inner join resources as r on r.uuid = g.acl_uuid and r.kind = 'acls' where g.grantee_uuid = ${user}`,
      );
    const tagOwnersCarrying = (row: string) =>
      raise(
        `select distinct 's:' || coalesce(t.owner_uuid, ''), 1 from tag_members as tm inner join resources as t on t.uuid = tm.tag_uuid and t.kind = 'tags' where tm.res_type = ${row}.kind and tm.res_uuid = ${row}.uuid`,
      );
    const triggers: [string, string, string][] = [
      ['relation_stamps_users_insert', 'after insert on users', aclOwnersNaming('new.uuid')],
      [
        'relation_stamps_users_email',
        'after update of uuid, email on users when old.uuid is not new.uuid or old.email is not new.email',
        aclOwnersNaming('old.uuid') + aclOwnersNaming('new.uuid'),
      ],
      ['relation_stamps_users_delete', 'after delete on users', aclOwnersNaming('old.uuid')],
      ['relation_stamps_resources_insert', 'after insert on resources', tagOwnersCarrying('new')],
      [
        'relation_stamps_resources_move',
        'after update of uuid, kind, owner_uuid on resources when old.uuid is not new.uuid or old.kind is not new.kind or old.owner_uuid is not new.owner_uuid',
        tagOwnersCarrying('old') + tagOwnersCarrying('new'),
      ],
      ['relation_stamps_resources_delete', 'after delete on resources', tagOwnersCarrying('old')],
    ];
    for (const [name, when, body] of triggers) await sql`create trigger ${sql.raw(name)} ${sql.raw(when)} begin ${sql.raw(body)} end`.execute(db);
  },
});
