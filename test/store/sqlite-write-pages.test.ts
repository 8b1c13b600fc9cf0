import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, readSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, SqliteDialect } from 'kysely';
import { byCodePoint } from '../../src/core/order.js';
import { Store } from '../../src/store/db.js';
import { migrationProvider } from '../../src/store/migrations/index.js';
import { onlyOn } from '../helpers/skips.js';
import { openServices, value } from '../helpers/services.js';

/**
 * SQLite writes touch as few pages as they can (migration 0160): no AUTOINCREMENT high-water mark
 * (`sqlite_sequence`) is written with each row of `resources` and `audit_log`, and a scope's counter in
 * `answer_scopes` lives in one b-tree. A database of the older schema keeps its rows, indexes and triggers
 * through the rebuild, and new keys still follow the old ones.
 */
const skip = onlyOn('sqlite');
let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-write-pages-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Page numbers in the WAL (after a 32-byte header, frames of a 24-byte header and one page). */
function walPages(file: string, pageSize: number): Set<number> {
  const size = statSync(`${file}-wal`, { throwIfNoEntry: false })?.size ?? 0;
  const pages = new Set<number>();
  const fd = openSync(`${file}-wal`, 'r');
  try {
    const header = Buffer.alloc(4);
    for (let at = 32; at + 24 + pageSize <= size; at += 24 + pageSize) {
      readSync(fd, header, 0, 4, at);
      pages.add(header.readUInt32BE(0));
    }
  } finally {
    closeSync(fd);
  }
  return pages;
}

describe('SQLite pages per write', { skip }, () => {
  test('a POST and a PUT of a server write no sqlite_sequence page, and each scope counter once', async () => {
    const file = join(dir, 'pages.db');
    const fx = await openServices({ db: file });
    const look = new SQLite(file);
    try {
      const servers = fx.collection('servers').service;
      const alice = await fx.user();
      const server = (n: number) => ({
        name: `p-${n}`,
        cpu: 1000,
        mem: 1024 ** 3,
        vnc_password: 'pages-vnc',
        nics: [{ ip_v4_conf: { conf: 'dhcp' }, model: 'virtio' }],
      });
      const first = value(await servers.create!(alice, [server(0)]))[0] as { uuid: string };
      value(await servers.update!(alice, first.uuid, { name: 'warm' }));
      const pageSize = look.pragma('page_size', { simple: true }) as number;
      /** The tables and indexes whose pages one write changed. */
      const written = async (write: () => Promise<unknown>): Promise<string[]> => {
        look.pragma('wal_checkpoint(TRUNCATE)');
        await write();
        const pages = walPages(file, pageSize);
        const owners = new Map((look.prepare('select pageno, name from dbstat').all() as { pageno: number; name: string }[]).map((r) => [r.pageno, r.name]));
        return [...pages].map((p) => owners.get(p) ?? `page ${p}`);
      };
      const post = await written(async () => value(await servers.create!(alice, [server(1)])));
      const put = await written(async () => value(await servers.update!(alice, first.uuid, { name: 'renamed', meta: { n: '1' } })));
      for (const [what, names] of [
        ['POST', post],
        ['PUT', put],
      ] as const) {
        assert.ok(names.includes('resources') && names.includes('audit_log'), `${what} writes its row and audit entry: ${names.join(', ')}`);
        assert.ok(!names.includes('sqlite_sequence'), `${what} writes no AUTOINCREMENT mark: ${names.join(', ')}`);
        assert.ok(!names.some((n) => n.startsWith('sqlite_autoindex_answer_scopes')), `${what} writes a scope counter in one b-tree: ${names.join(', ')}`);
      }
      assert.deepEqual(look.prepare('select name from sqlite_sequence').pluck().all(), [], 'no AUTOINCREMENT table was written');
    } finally {
      look.close();
      await fx.close();
    }
  });

  test('migration 0160 on a database of the older schema: rows, indexes and triggers kept; new keys follow the old', async () => {
    const file = join(dir, 'older.db');
    const raw = new SQLite(file);
    const db = new Kysely<any>({ dialect: new SqliteDialect({ database: raw }) });
    try {
      const provider = migrationProvider('sqlite');
      const migrator = new Migrator({ db, provider, nameComparator: byCodePoint });
      // The schema just before 0160 (later migrations add objects of their own, which the check below would count).
      const before0160 = Object.keys(await provider.getMigrations())
        .filter((name) => byCodePoint(name, '0160') < 0)
        .sort(byCodePoint)
        .at(-1)!;
      assert.equal((await migrator.migrateTo(before0160)).error, undefined);
      const row = (seq: number, uuid: string) =>
        raw
          .prepare(
            `insert into resources (seq, kind, uuid, owner_uuid, name, body, created_at, updated_at, status) values (?, 'servers', ?, 'o1', ?, '{}', 't', 't', 'stopped')`,
          )
          .run(seq, uuid, `n-${uuid}`);
      row(7, 'u7');
      row(9, 'u9');
      raw.prepare(`delete from resources where seq = 9`).run();
      raw
        .prepare(
          `insert into audit_log (owner_uuid, actor_uuid, action, category, uuid, details, success, error_type, error_point, error_message, timestamp) values ('o1', null, 'create', 'Servers', 'u7', '', 1, null, null, '', 't')`,
        )
        .run();
    } finally {
      await db.destroy();
    }
    const before = new SQLite(file, { readonly: true });
    const scopes = before.prepare('select scope, n from answer_scopes order by scope').all();
    const schema = (d: SQLite.Database) =>
      d.prepare(`select type, name from sqlite_master where type in ('index', 'trigger') and name not like 'sqlite_autoindex_%' order by type, name`).all();
    const objects = schema(before);
    before.close();

    const store = await Store.open(file, { poolSize: 1 });
    try {
      const look = new SQLite(file, { readonly: true });
      try {
        assert.deepEqual(schema(look), objects, 'every index and trigger is there again');
        assert.deepEqual(look.prepare('select scope, n from answer_scopes order by scope').all(), scopes, 'the scope counters are kept');
        assert.match(look.prepare(`select sql from sqlite_master where name = 'answer_scopes'`).pluck().get() as string, /without rowid$/);
        assert.deepEqual(look.prepare('select seq, uuid from resources').all(), [{ seq: 7, uuid: 'u7' }]);
        assert.equal(look.prepare('select count(*) from audit_log').pluck().get(), 1);
      } finally {
        look.close();
      }
      // The triggers still count: a new row raises its scopes and the sharing counter, and gets the next key.
      const sharing = async () => Number((await store.db.selectFrom('change_counters').select('n').where('scope', '=', 'sharing').executeTakeFirstOrThrow()).n);
      const was = await sharing();
      await store.transaction((tx) => store.resources.insert(tx, new Date(), { kind: 'servers', uuid: 'u10', owner: 'o1', body: { name: 'new' } }));
      assert.equal(await sharing(), was + 1);
      const added = await store.db.selectFrom('resources').select('seq').where('uuid', '=', 'u10').executeTakeFirstOrThrow();
      assert.equal(Number(added.seq), 8, 'after the largest key there is');
      const scope = await store.db.selectFrom('answer_scopes').select('n').where('scope', '=', 'r:u10').executeTakeFirst();
      assert.equal(Number(scope?.n), 1);
    } finally {
      await store.close();
    }
  });
});
