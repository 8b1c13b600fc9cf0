import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { Store } from '../../src/store/db.js';
import { onlyOn } from '../helpers/skips.js';

/**
 * Group commit on SQLite (store/group-commit.ts): write transactions started together share one COMMIT, each
 * in a savepoint of its own; a failing one is rolled back alone; none is answered before the commit.
 */
let dir: string | undefined;
let store: Store | undefined;
let other: SQLite.Database | undefined;
let path = '';
before(async () => {
  if (onlyOn('sqlite')) return;
  dir = mkdtempSync(join(tmpdir(), 'stratus-group-'));
  path = join(dir, 'stratus.db');
  store = await Store.open(path);
  // Another connection on the file: it sees only what was committed.
  other = new SQLite(path, { readonly: true });
});
after(async () => {
  other?.close();
  await store?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const setting = (key: string) => other!.prepare('select value from settings where key = ?').pluck().get(key) as string | undefined;
const put = (s: Store, key: string) => s.transaction((tx) => tx.insertInto('settings').values({ key, value: key }).execute());

test('writes started together share one commit, and none is answered before it', { skip: onlyOn('sqlite') }, async () => {
  const s = store!;
  const group = s.group!;
  const [commits, writes] = [group.commits, group.writes];
  const answered: string[] = [];
  const seenInLast: (string | undefined)[] = [];
  const firsts = ['g1', 'g2', 'g3'].map((key) => put(s, key).then(() => void answered.push(key)));
  const last = s.transaction(async (tx) => {
    await tx.insertInto('settings').values({ key: 'g4', value: 'g4' }).execute();
    // The writes before this one are done, but neither committed nor answered.
    seenInLast.push(setting('g1'), setting('g3'));
    assert.deepEqual(answered, []);
  });
  await Promise.all([...firsts, last]);
  assert.deepEqual(seenInLast, [undefined, undefined]);
  assert.deepEqual(answered, ['g1', 'g2', 'g3']);
  assert.equal(group.commits - commits, 1);
  assert.equal(group.writes - writes, 4);
  for (const key of ['g1', 'g2', 'g3', 'g4']) assert.equal(setting(key), key);
});

test('a write that fails is rolled back alone; the others of its group commit', { skip: onlyOn('sqlite') }, async () => {
  const s = store!;
  const commits = s.group!.commits;
  const seen: (string | null)[] = [];
  s.changes.enabled = true;
  const unsubscribe = s.changes.subscribe((changes) => seen.push(...changes.map((c) => c.uuid)));
  try {
    const results = await Promise.allSettled([
      put(s, 'f1'),
      s.transaction(async (tx) => {
        await tx.insertInto('settings').values({ key: 'f2', value: 'f2' }).execute();
        s.changes.note(tx, { kind: 'servers', uuid: 'from-the-failed-write', owner: 'someone' });
        throw new Error('refused');
      }),
      // A statement that fails inside a write (a duplicate key) leaves the transaction open: only that write fails.
      s.transaction(async (tx) => {
        await tx.insertInto('settings').values({ key: 'f3', value: 'f3' }).execute();
        await tx.insertInto('settings').values({ key: 'f1', value: 'again' }).execute();
      }),
      s.transaction(async (tx) => {
        await tx.insertInto('settings').values({ key: 'f4', value: 'f4' }).execute();
        s.changes.note(tx, { kind: 'servers', uuid: 'from-a-committed-write', owner: 'someone' });
      }),
    ]);
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'rejected', 'fulfilled'],
    );
    assert.match(String((results[1] as PromiseRejectedResult).reason), /refused/);
    assert.equal(s.group!.commits - commits, 1);
    assert.deepEqual(
      ['f1', 'f2', 'f3', 'f4'].map((k) => setting(k)),
      ['f1', undefined, undefined, 'f4'],
    );
    // Only the committed write's changes reach the event stream.
    assert.deepEqual(seen, ['from-a-committed-write']);
  } finally {
    unsubscribe();
    s.changes.enabled = false;
  }
});

test('a group whose transaction SQLite dropped fails as a whole, and the next group commits', { skip: onlyOn('sqlite') }, async () => {
  const s = store!;
  const results = await Promise.allSettled([
    put(s, 'l1'),
    s.transaction(async (tx) => {
      // As SQLite does on a full disk or an I/O error: the whole transaction is gone.
      await sql`rollback`.execute(tx);
      throw new Error('disk full');
    }),
  ]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['rejected', 'rejected'],
  );
  assert.equal(setting('l1'), undefined);
  await put(s, 'l2');
  assert.equal(setting('l2'), 'l2');
});

test('when the first write of a group fails, it alone is rolled back and the others commit together', { skip: onlyOn('sqlite') }, async () => {
  const s = store!;
  const commits = s.group!.commits;
  const results = await Promise.allSettled([
    s.transaction(async (tx) => {
      await tx.insertInto('settings').values({ key: 'h1', value: 'h1' }).execute();
      throw new Error('refused');
    }),
    put(s, 'h2'),
    put(s, 'h3'),
  ]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['rejected', 'fulfilled', 'fulfilled'],
  );
  assert.equal(s.group!.commits - commits, 1);
  assert.deepEqual(
    ['h1', 'h2', 'h3'].map((k) => setting(k)),
    [undefined, 'h2', 'h3'],
  );
});
