import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { startServer, type TestServer } from '../helpers/server.js';

/**
 * Compiled shapes run as named prepared statements on PostgreSQL, which keeps 63 bytes of a name: shapes
 * whose keys are alike in their first 63 characters must still be two statements (and run on SQLite too).
 */
let srv: TestServer;
before(async () => {
  srv = await startServer();
});
after(() => srv.close());

test('shapes with long keys alike in their first 63 characters stay distinct statements', async () => {
  const { store } = srv.services;
  const long = `test.long-key:${'x'.repeat(60)}`;
  const run = (key: string, op: '+' | '*', n: number) =>
    store.resources.shaped<{ v: number }, 'n'>(
      store.db,
      key,
      (arg) => store.db.selectNoFrom(sql<number>`cast(${arg('n')} as integer) ${sql.raw(op)} 10`.as('v')),
      { n },
    );
  // Each twice: the second run of a shape reuses the statement prepared on the connection.
  for (let i = 0; i < 2; i++) {
    assert.equal(Number((await run(`${long}:plus`, '+', 1))[0].v), 11);
    assert.equal(Number((await run(`${long}:times`, '*', 2))[0].v), 20);
  }
});
