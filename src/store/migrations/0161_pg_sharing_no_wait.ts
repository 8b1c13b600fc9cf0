import { sql, type Kysely, type Migration } from 'kysely';
import type { Dialect } from '../db.js';

/**
 * PostgreSQL: raising the `sharing` counter never waits for another writer (0100's rows, one per backend
 * pid mod 64). Two backends whose pids collide took the same row, held to their commits: a transaction that
 * raised it (an address claimed, store/resources/rows.ts `insertIfAbsent`) and then waited on a row of the
 * other's (the next address, being inserted by it) deadlocked with the other waiting for the counter row
 * (test/api/ips.test.ts, one run in several). Now the backend's own row is taken only when no other
 * transaction holds it (SKIP LOCKED); else any row nobody holds; only when all 64 are held, its own row is
 * waited for as before. The counter is still their sum, raised once by each such statement.
 */
export const pgSharingNoWait = (dialect: Dialect): Migration => ({
  async up(db: Kysely<any>) {
    if (dialect !== 'postgres') return;
    // Every row there from the start: the search for a free one finds them.
    await sql`insert into change_counters (scope, n) select 'sharing:' || i, 0 from generate_series(0, 63) as i on conflict (scope) do nothing`.execute(db);
    await sql`create or replace function stratus_raise_sharing() returns trigger language plpgsql as $$
      declare
        mine text := 'sharing:' || (pg_backend_pid() % 64);
      begin
        update change_counters set n = n + 1 where scope = (select scope from change_counters where scope = mine for update skip locked);
        if found then return null; end if;
        update change_counters set n = n + 1
          where scope = (select scope from change_counters where scope like 'sharing:%' limit 1 for update skip locked);
        if found then return null; end if;
        insert into change_counters (scope, n) values (mine, 1) on conflict (scope) do update set n = change_counters.n + 1;
        return null;
      end $$`.execute(db);
  },
});
