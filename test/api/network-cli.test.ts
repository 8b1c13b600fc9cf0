import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { engine, freshDatabase } from '../helpers/db.js';
import { cli } from '../helpers/cli.js';
import { startServer } from '../helpers/server.js';
import { Client } from '../helpers/client.js';

/**
 * The operator's `stratus ips …` and `stratus vlans …` commands on a real database (in-process through
 * src/cli), seen by a server on it.
 */
let dir: string;
let db: { url: string; drop: () => Promise<void> };

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-net-'));
  db = engine === 'sqlite' ? { url: join(dir, 'stratus.db'), drop: async () => {} } : await freshDatabase();
});
after(async () => {
  await db.drop();
  rmSync(dir, { recursive: true, force: true });
});

const run = (...args: string[]) => cli([...args, '--db', db.url]);

describe('stratus ips / vlans', () => {
  test('assign, list, release: an operator hands out addresses and VLANs that the API then shows', async () => {
    assert.equal((await run('migrate')).status, 0);
    assert.equal((await run('users', 'add', 'net@example.com', '--password', 'net-secret-1')).status, 0);

    const ips = await run('ips', 'assign', 'net@example.com', '--count', '2');
    assert.equal(ips.status, 0, ips.stderr);
    assert.equal(ips.stdout, 'assigned 185.12.6.2 to net@example.com\nassigned 185.12.6.3 to net@example.com\n');
    const one = await run('ips', 'assign', 'NET@example.com');
    assert.equal(one.status, 0, one.stderr);
    assert.equal(one.stdout, 'assigned 185.12.6.4 to NET@example.com\n');
    const vlans = await run('vlans', 'assign', 'net@example.com', '--count', '2');
    assert.equal(vlans.status, 0, vlans.stderr);
    const vlanIds = [...vlans.stdout.matchAll(/assigned vlan ([0-9a-f-]{36}) to net@example\.com/g)].map((m) => m[1]);
    assert.equal(vlanIds.length, 2);

    const list = await run('ips', 'list');
    assert.equal(list.status, 0, list.stderr);
    assert.match(list.stdout, /^185\.12\.6\.2\s+net@example\.com\s+-\n/m);
    assert.match(list.stdout, /pool 185\.12\.6\.0\/24: 3 of 253 addresses in use\n$/);
    assert.equal((await run('ips', 'list', 'net@example.com')).stdout.split('\n').filter(Boolean).length, 3);
    const vlist = await run('vlans', 'list');
    assert.equal(vlist.status, 0, vlist.stderr);
    for (const id of vlanIds) assert.match(vlist.stdout, new RegExp(`^${id}\\s+net@example\\.com\\s+0 server\\(s\\)$`, 'm'));

    // A server on the same database shows them to the account.
    const srv = await startServer({ db: db.url });
    try {
      const c = new Client(srv.base, { email: 'net@example.com', password: 'net-secret-1' });
      const got = await c.get('ips/?limit=0');
      assert.equal(got.status, 200, got.text);
      assert.deepEqual(
        got.json.objects.map((o: any) => o.uuid),
        ['185.12.6.2', '185.12.6.3', '185.12.6.4'],
      );
      const v = await c.get('vlans/?limit=0');
      assert.deepEqual(v.json.objects.map((o: any) => o.uuid).sort(), [...vlanIds].sort());
    } finally {
      await srv.close();
    }

    const rel = await run('ips', 'release', '185.12.6.3');
    assert.equal(rel.status, 0, rel.stderr);
    assert.equal(rel.stdout, 'released 185.12.6.3\n');
    const again = await run('ips', 'release', '185.12.6.3');
    assert.equal(again.status, 2);
    assert.match(again.stderr, /not assigned/);
    // A released address is the next one handed out.
    assert.equal((await run('ips', 'assign', 'net@example.com')).stdout, 'assigned 185.12.6.3 to net@example.com\n');
    const vrel = await run('vlans', 'release', vlanIds[0]);
    assert.equal(vrel.status, 0, vrel.stderr);
    assert.doesNotMatch((await run('vlans', 'list')).stdout, new RegExp(vlanIds[0]));
  });

  test('operator mistakes: exit 2 with a message, nothing changed', async () => {
    assert.equal((await run('users', 'add', 'small@example.com', '--password', 'small-secret-1')).status, 0);
    const cases: [string[], RegExp][] = [
      [['ips', 'assign', 'nobody@example.com'], /No user with e-mail nobody@example\.com/],
      [['ips', 'assign', 'small@example.com', '--count', '0'], /--count must be a whole number/],
      [['vlans', 'assign', 'small@example.com', '--count', 'many'], /--count must be a whole number/],
      [['ips'], /ips: a subcommand is needed; one of assign, release, list \(stratus help ips\)/],
      [['vlans', 'frobnicate'], /vlans: unknown subcommand "frobnicate"/],
      [['vlans', 'release', '00000000-0000-0000-0000-000000000000'], /No VLAN/],
      [['ips', 'list', '--ip-pool', '10.0.0.1/24'], /ip-pool: "10\.0\.0\.1\/24" has host bits set/],
      // A pool of one free address cannot give two: all or nothing.
      [['ips', 'assign', 'small@example.com', '--count', '2', '--ip-pool', '10.9.0.0/30'], /only 1 free address/],
    ];
    for (const [args, message] of cases) {
      const res = await run(...args);
      assert.equal(res.status, 2, `${args.join(' ')}: ${res.stdout}${res.stderr}`);
      assert.match(res.stderr, message, args.join(' '));
    }
    assert.equal((await run('ips', 'list', 'small@example.com')).stdout, '');
  });
});
