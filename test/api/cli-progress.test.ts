import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../../src/cli/index.js';
import { cli } from '../helpers/cli.js';
import { childEnv } from '../helpers/process.js';
import { engine, freshDatabase } from '../helpers/db.js';
import { TABLE_NAMES, TABLES } from '../../src/store/tables.js';

/**
 * Long operator work (seed, export, import) tells how far it is on stderr: on a terminal as one line
 * rewritten in place, elsewhere only with --progress, as at most about twenty lines; quiet otherwise.
 */
let dir: string;
let url: string;
const USERS = 40;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'stratus-progress-'));
  url = engine === 'sqlite' ? join(dir, 'stratus.db') : (await freshDatabase()).url;
  assert.equal((await cli(['migrate', '--db', url])).status, 0);
  const users = Array.from({ length: USERS }, (_, i) => ({ email: `p${i}@example.com`, password: 'pw-secret-1', tags: [{ name: 't' }] }));
  writeFileSync(join(dir, 'seed.json'), JSON.stringify({ users }));
});
after(() => rmSync(dir, { recursive: true, force: true }));

const exported = TABLE_NAMES.filter((t) => TABLES[t].exported).length;

describe('progress of operator work', () => {
  test('quiet without --progress when stderr is no terminal', async () => {
    const res = await cli(['seed', join(dir, 'seed.json'), '--db', url]);
    assert.equal(res.status, 0, res.stderr);
    assert.equal(res.stderr, '');
    assert.match(res.stdout, new RegExp(`created ${USERS} users`));
  });

  test('seed --progress: lines of users done, the last one complete; stdout keeps the result', async () => {
    const res = await cli(['seed', join(dir, 'seed.json'), '--db', url, '--progress']);
    assert.equal(res.status, 0, res.stderr);
    const lines = res.stderr.trimEnd().split('\n');
    assert.ok(lines.length >= 2 && lines.length <= 21, res.stderr);
    for (const l of lines) assert.match(l, new RegExp(`^seed: \\d+/${USERS} user p\\d+@example\\.com$`));
    assert.equal(lines.at(-1), `seed: ${USERS}/${USERS} user p${USERS - 1}@example.com`);
    assert.match(res.stdout, /^seeded from /);
  });

  test('export --progress and import --progress: a line per step of the tables, the state untouched by it', async () => {
    const file = join(dir, 'state.json');
    const out = await cli(['export', file, '--db', url, '--progress']);
    assert.equal(out.status, 0, out.stderr);
    const lines = out.stderr.trimEnd().split('\n');
    assert.match(lines.at(-1)!, new RegExp(`^export: ${exported}/${exported} table \\w+ \\(\\d+ rows\\)$`));
    for (const l of lines) assert.match(l, new RegExp(`^export: \\d+/${exported} table \\w+ \\(\\d+ rows\\)$`));
    const toStdout = await cli(['export', '--db', url, '--progress']);
    assert.equal(JSON.parse(toStdout.stdout).format, 'stratus-state', 'stdout is the state alone');
    const back = await cli(['import', file, '--db', url, '--progress']);
    assert.equal(back.status, 0, back.stderr);
    assert.match(back.stderr.trimEnd().split('\n').at(-1)!, new RegExp(`^import: ${exported}/${exported} table \\w+ \\(\\d+ rows\\)$`));
  });

  test('on a terminal it is shown without --progress, as one line rewritten in place', async () => {
    let stderr = '';
    const code = await runCli(
      ['export', join(dir, 'tty.json'), '--db', url],
      { out: () => undefined, err: (s) => (stderr += s), errIsTTY: true },
      { env: childEnv({}) },
    );
    assert.equal(code, 0, stderr);
    assert.ok(stderr.startsWith('\r'), JSON.stringify(stderr));
    assert.equal(stderr.split('\n').length, 2, 'one line, ended once');
    assert.match(stderr, new RegExp(`\\rexport: ${exported}/${exported} table \\w+ \\(\\d+ rows\\)\\x1b\\[K\\n$`));
  });

  test('--progress belongs to seed, export and import only', async () => {
    const res = await cli(['billing', 'show', 'p0@example.com', '--db', url, '--progress']);
    assert.equal(res.status, 2);
    assert.match(res.stderr, /--progress does not apply to "billing show"/);
  });
});
