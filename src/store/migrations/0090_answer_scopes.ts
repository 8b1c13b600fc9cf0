import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';
import { answerChannel } from '../changes.js';

/** The tables whose rows say what the caller's visible set of a kind is made of (store/answer-scopes.ts). */
export const SCOPED_TABLES = ['resources', 'tag_members', 'acl_grantees', 'acl_rules', 'acl_tags'] as const;

/**
 * Kept answers scoped to what they are made of (store/answer-scopes.ts): the writes of the tables an
 * owner's objects and their sharing are made of name the *scope* they change, in the writing
 * transaction, whoever writes (an API process, an operator command, an import, a timer):
 *
 * - `o:<owner>`: a `resources` row of that owner was inserted, updated or deleted (both owners when one
 *   moves). Ownerless rows (the library) and jobs (listed by other owners' servers and drives: a grantee's
 *   clone's job) name `o:` (every scoped answer depends on it).
 * - `r:<uuid>`: that row, or its tag memberships (its `tags`), changed.
 * - `s:<owner>`: what that owner shares or groups changed: their ACLs (rows, grantees, rules, tags), their
 *   tags (rows, memberships).
 * - `grants`: which ACLs name which grantees may have changed (PostgreSQL keeps each caller's set of
 *   granting owners until it moves).
 *
 * SQLite: row triggers raise a counter per scope in `answer_scopes` (PostgreSQL has the table, empty). PostgreSQL: these tables' statement
 * triggers (migration 0021, payload '': "anything may have changed") become row triggers whose NOTIFY
 * payload is `s:<scope>` (one per scope and transaction: PostgreSQL folds equal notifications), and a
 * TRUNCATE says `s:*` (every scope). Other tables' payload '' moves only unscoped answers.
 */
export const answerScopes = (dialect: Dialect): Migration => ({
  async up(db: Kysely<any>) {
    // On both engines (one schema); only SQLite's triggers write it.
    await db.schema
      .createTable('answer_scopes')
      .addColumn('scope', 'text', (c) => c.primaryKey())
      .addColumn('n', 'bigint', (c) => c.notNull())
      .execute();
    if (dialect === 'sqlite') return sqliteScopes(db);
    const schema = (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0].s;
    const channel = sql.lit(answerChannel(schema));
    await sql`create or replace function stratus_announce_scope_of(channel text, tbl text, r jsonb) returns void language plpgsql as $$
      declare
        owner text;
      begin
        if tbl = 'resources' then
          perform pg_notify(channel, 's:o:' || case when r->>'kind' = 'jobs' then '' else coalesce(r->>'owner_uuid', '') end);
          perform pg_notify(channel, 's:r:' || (r->>'uuid'));
          if r->>'kind' in ('acls', 'tags') then perform pg_notify(channel, 's:s:' || coalesce(r->>'owner_uuid', '')); end if;
          if r->>'kind' = 'acls' then perform pg_notify(channel, 's:grants'); end if;
          return;
        end if;
        if tbl = 'tag_members' then
          select x.owner_uuid into owner from resources x where x.uuid = r->>'tag_uuid' and x.kind = 'tags';
          perform pg_notify(channel, 's:r:' || (r->>'res_uuid'));
        else
          select x.owner_uuid into owner from resources x where x.uuid = r->>'acl_uuid' and x.kind = 'acls';
          if tbl = 'acl_grantees' then perform pg_notify(channel, 's:grants'); end if;
        end if;
        perform pg_notify(channel, 's:s:' || coalesce(owner, ''));
      end $$`.execute(db);
    await sql`create or replace function stratus_announce_scope() returns trigger language plpgsql as $$
      begin
        if TG_OP <> 'INSERT' then perform stratus_announce_scope_of(TG_ARGV[0], TG_TABLE_NAME, to_jsonb(OLD)); end if;
        if TG_OP <> 'DELETE' then perform stratus_announce_scope_of(TG_ARGV[0], TG_TABLE_NAME, to_jsonb(NEW)); end if;
        return null;
      end $$`.execute(db);
    await sql`create or replace function stratus_announce_all() returns trigger language plpgsql as $$
      begin
        perform pg_notify(TG_ARGV[0], 's:*');
        return null;
      end $$`.execute(db);
    for (const table of SCOPED_TABLES) {
      await sql`drop trigger stratus_announce_write on ${sql.table(table)}`.execute(db);
      // The same name as every announcing table's trigger (a test lists them by it).
      await sql`create trigger stratus_announce_write after insert or update or delete on ${sql.table(table)}
        for each row execute function stratus_announce_scope(${channel})`.execute(db);
      await sql`create trigger stratus_announce_truncate after truncate on ${sql.table(table)}
        for each statement execute function stratus_announce_all(${channel})`.execute(db);
    }
  },
});

async function sqliteScopes(db: Kysely<any>): Promise<void> {
  // `where true`: an upsert's SELECT needs a WHERE clause (SQLite's parser), and some bumps are conditional.
  const bump = (scope: string, when = 'true') =>
    `insert into answer_scopes (scope, n) select ${scope}, 1 where ${when} on conflict (scope) do update set n = n + 1;`;
  const rowsOf = (r: string) => `'o:' || case when ${r}.kind = 'jobs' then '' else coalesce(${r}.owner_uuid, '') end`;
  const sharingOf = (r: string) => `'s:' || coalesce(${r}.owner_uuid, '')`;
  const SHARING_KINDS = `('acls', 'tags')`;
  const ownerVia = (kind: string, column: string, r: string) =>
    `'s:' || coalesce((select x.owner_uuid from resources x where x.uuid = ${r}.${column} and x.kind = '${kind}'), '')`;
  const resource = (r: string) =>
    bump(rowsOf(r)) + bump(`'r:' || ${r}.uuid`) + bump(sharingOf(r), `${r}.kind in ${SHARING_KINDS}`) + bump(`'grants'`, `${r}.kind = 'acls'`);
  const bodies: Record<(typeof SCOPED_TABLES)[number], (r: string) => string> = {
    resources: resource,
    tag_members: (r) => bump(ownerVia('tags', 'tag_uuid', r)) + bump(`'r:' || ${r}.res_uuid`),
    acl_grantees: (r) => bump(ownerVia('acls', 'acl_uuid', r)) + bump(`'grants'`),
    acl_rules: (r) => bump(ownerVia('acls', 'acl_uuid', r)),
    acl_tags: (r) => bump(ownerVia('acls', 'acl_uuid', r)),
  };
  for (const table of SCOPED_TABLES) {
    const body = bodies[table];
    // An update counts for the row before and after it (an owner moved: both owners' answers change); a
    // resource's own update (every PUT) bumps each scope once.
    const update =
      table === 'resources'
        ? resource('new') +
          bump(rowsOf('old'), `${rowsOf('old')} <> ${rowsOf('new')}`) +
          bump(`'r:' || old.uuid`, 'old.uuid <> new.uuid') +
          bump(sharingOf('old'), `old.kind in ${SHARING_KINDS}`) +
          bump(`'grants'`, `old.kind = 'acls'`)
        : body('old') + body('new');
    for (const [op, text] of [
      ['insert', body('new')],
      ['delete', body('old')],
      ['update', update],
    ])
      await sql`create trigger ${sql.raw(`answer_scopes_${table}_${op}`)} after ${sql.raw(op)} on ${sql.table(table)} begin ${sql.raw(text)} end`.execute(db);
  }
}
