import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';

/**
 * PostgreSQL: write announcements may leave after the commit instead of with it (store/db.ts
 * `transaction`, store/answer-barrier.ts `announce`). A transaction that NOTIFYs takes one lock for the
 * whole database at commit and holds it through its WAL flush, so every NOTIFYing commit waits for the
 * previous one's flush: measured with 8 writers, 3.6–4.0 of them waiting on that lock (`Lock/object`) at
 * any moment and half the commits per second of the same writes without NOTIFY (group commit again).
 *
 * The announcing triggers (0021's statement triggers, 0090's scoped row triggers) now call
 * `stratus_announce`: in a transaction that set `stratus.announce_later` (a serving process's), it adds
 * the payload (once) to the transaction-local setting `stratus.announced`, which the process reads before
 * committing and NOTIFYs after the commit from a connection that does not wait for a flush, before it
 * answers. Every other writer (operator commands, a plain statement, another tool) still NOTIFYs in its
 * transaction. A very large transaction (more than ~4000 bytes of distinct payloads) NOTIFYs the rest
 * itself: the setting is copied whole at each addition.
 */
export const announceAfterCommit = (dialect: Dialect): Migration => ({
  async up(db: Kysely<any>) {
    if (dialect !== 'postgres') return;
    await sql`create or replace function stratus_announce(channel text, payload text) returns void language plpgsql as $$
      declare
        acc text;
      begin
        if current_setting('stratus.announce_later', true) = 'on' then
          acc := coalesce(current_setting('stratus.announced', true), '');
          if position(E'\n' || payload || E'\n' in E'\n' || acc) > 0 then return; end if;
          if length(acc) < 4000 then
            perform set_config('stratus.announced', acc || payload || E'\n', true);
            return;
          end if;
        end if;
        perform pg_notify(channel, payload);
      end $$`.execute(db);
    await sql`create or replace function stratus_announce_write() returns trigger language plpgsql as $$
      begin
        perform stratus_announce(TG_ARGV[0], '');
        return null;
      end $$`.execute(db);
    await sql`create or replace function stratus_announce_all() returns trigger language plpgsql as $$
      begin
        perform stratus_announce(TG_ARGV[0], 's:*');
        return null;
      end $$`.execute(db);
    // 0090's function, each pg_notify through stratus_announce.
    await sql`create or replace function stratus_announce_scope_of(channel text, tbl text, r jsonb) returns void language plpgsql as $$
      declare
        owner text;
      begin
        if tbl = 'resources' then
          perform stratus_announce(channel, 's:o:' || case when r->>'kind' = 'jobs' then '' else coalesce(r->>'owner_uuid', '') end);
          perform stratus_announce(channel, 's:r:' || (r->>'uuid'));
          if r->>'kind' in ('acls', 'tags') then perform stratus_announce(channel, 's:s:' || coalesce(r->>'owner_uuid', '')); end if;
          if r->>'kind' = 'acls' then perform stratus_announce(channel, 's:grants'); end if;
          return;
        end if;
        if tbl = 'tag_members' then
          select x.owner_uuid into owner from resources x where x.uuid = r->>'tag_uuid' and x.kind = 'tags';
          perform stratus_announce(channel, 's:r:' || (r->>'res_uuid'));
        else
          select x.owner_uuid into owner from resources x where x.uuid = r->>'acl_uuid' and x.kind = 'acls';
          if tbl = 'acl_grantees' then perform stratus_announce(channel, 's:grants'); end if;
        end if;
        perform stratus_announce(channel, 's:s:' || coalesce(owner, ''));
      end $$`.execute(db);
  },
});
