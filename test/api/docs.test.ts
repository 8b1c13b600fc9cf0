import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { COMMANDS } from '../../src/cli/index.js';
import { freshDatabase } from '../helpers/db.js';
import { serveProcess } from '../helpers/process.js';
import { needs } from '../helpers/skips.js';

/**
 * Every command and code block of README.md and docs/*.md is run here, or checked where it cannot run, so a doc
 * cannot rot. A fenced block's info string says which: `sh` blocks run (in order, one bash per file, against a real
 * server; `127.0.0.1:8080` is that server's address), `sh norun` blocks (installs, long-running servers, other
 * machines) have each `stratus` line checked against the command table, `json` parses, `python libcloud` runs with
 * /usr/bin/python3 when libcloud is importable, and `text`, `ini`, `go`, `hcl`, `python norun` are for clients that
 * do not run here (checked by hand against the clients' sources). A block without a language fails: say which it is.
 * A `norun` block says why in its info string (`sh norun -- port 443 needs root`): one without a reason fails.
 */

// bin/ is the repository's own (test/run.ts links it beside the transpiled tests): the repository is its parent.
const BIN = realpathSync(fileURLToPath(new URL('../../bin/stratus.js', import.meta.url)));
const ROOT = join(dirname(BIN), '..');
const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

interface Block {
  file: string;
  line: number;
  lang: string;
  tags: string[];
  code: string;
}

function blocks(file: string): Block[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const out: Block[] = [];
  for (const m of text.matchAll(/^```([^\n]*)\n([\s\S]*?)^```[ \t]*$/gm)) {
    const [lang = '', ...tags] = m[1].trim().split(/\s+/);
    out.push({ file, line: text.slice(0, m.index).split('\n').length, lang, tags, code: m[2] });
  }
  return out;
}

const KNOWN = new Set(['sh', 'json', 'python', 'text', 'ini', 'go', 'hcl']);
const runs = (b: Block) => !b.tags.includes('norun');

/**
 * Runs a bash script in `cwd` with `npx stratus` meaning this checkout's command; resolves with its output.
 * `npx` is a script on PATH that execs node, so `npx stratus serve … &` then `kill $!` stops the server itself,
 * as a reader's shell does; servers a recipe leaves behind are stopped with its process group when bash exits.
 */
function bash(script: string, cwd: string, ms: number): Promise<{ status: number | null; out: string }> {
  const bin = mkdtempSync(join(tmpdir(), 'stratus-docs-bin-'));
  const realNpx = spawnSync('bash', ['-c', 'command -v npx'], { encoding: 'utf8' }).stdout.trim() || 'npx';
  writeFileSync(
    join(bin, 'npx'),
    `#!/bin/sh\nif [ "$1" = stratus ]; then shift; exec ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} "$@"; fi\nexec ${JSON.stringify(realNpx)} "$@"\n`,
    { mode: 0o755 },
  );
  return new Promise((resolve) => {
    // Its own process group: the recipes start servers in the background, and whatever is left is stopped.
    const child = spawn('bash', ['-c', `set -euo pipefail\n${script}`], {
      cwd,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      // The compiled program's code cache in a temporary folder (bin's), not in the clone's dist/.
      env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, STRATUS_CODE_CACHE_DIR: join(bin, 'code-cache') },
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const stopGroup = (signal: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, signal);
      } catch {
        // the group is gone already
      }
    };
    const timer = setTimeout(() => stopGroup('SIGKILL'), ms);
    let status: number | null = null;
    // bash is done when it exits; a server it left running would hold the pipes open until the timeout.
    child.on('exit', (code) => {
      status = code;
      stopGroup('SIGTERM');
    });
    child.on('close', () => {
      clearTimeout(timer);
      rmSync(bin, { recursive: true, force: true });
      resolve({ status, out });
    });
  });
}

describe('the docs', () => {
  test('every fenced block says what it is; every relative link points at a file of the repository', () => {
    for (const file of DOCS) {
      for (const b of blocks(file)) {
        assert.ok(KNOWN.has(b.lang), `${file}:${b.line}: a block needs a language (${[...KNOWN].join(', ')}), "${b.lang}"`);
        const at = b.tags.indexOf('norun');
        if (at >= 0)
          assert.ok(b.tags[at + 1] === '--' && b.tags.length > at + 2, `${file}:${b.line}: a norun block says why it cannot run: "${b.lang} norun -- REASON"`);
      }
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const [, target] of text.matchAll(/\]\(([^)#:\s]+)(?:#[^)]*)?\)/g))
        assert.ok(existsSync(join(ROOT, dirname(file), target)), `${file}: the link ${target} points at nothing`);
    }
  });

  // Commands named in prose (`npm run test:verify`, `npx tsx bench/pages.ts`) take minutes or run the suite
  // itself, so they are not run here: what they name must exist.
  test('every npm script and tsx file a doc names in its prose exists', () => {
    const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    let named = 0;
    for (const file of DOCS) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      for (const [, script] of text.matchAll(/`npm run ([\w:.-]+)/g)) {
        named++;
        assert.ok(scripts[script], `${file}: no npm script "${script}"`);
      }
      for (const [, path] of text.matchAll(/`(?:[A-Z_]+=\S+ )*npx tsx ([\w./-]+\.ts)/g)) {
        named++;
        assert.ok(existsSync(join(ROOT, path)), `${file}: npx tsx ${path}: no such file`);
      }
    }
    assert.ok(named > 0, 'the docs name scripts and tsx files: the patterns above must find them');
  });

  test('json blocks parse; every stratus command line of a norun block is a command the CLI has', () => {
    for (const file of DOCS)
      for (const b of blocks(file)) {
        if (b.lang === 'json') assert.doesNotThrow(() => JSON.parse(b.code), `${file}:${b.line}`);
        if (b.lang !== 'sh' || runs(b)) continue;
        for (const line of b.code.split('\n')) {
          const m = /^(?:npx )?stratus (\S+)(?: (\S+))?/.exec(line.trim());
          if (!m) continue;
          const c = COMMANDS[m[1]];
          assert.ok(c, `${file}:${b.line}: no command "${m[1]}" (${line})`);
          if (c.subs[0].name !== undefined)
            assert.ok(
              c.subs.some((s) => s.name === m[2]),
              `${file}:${b.line}: no "${m[1]} ${m[2]}" (${line})`,
            );
        }
      }
  });

  for (const file of DOCS) {
    const sh = blocks(file).filter((b) => b.lang === 'sh' && runs(b));
    if (!sh.length) continue;
    test(`${file}: its shell blocks run, in order, against a real server`, { timeout: 540_000 }, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'stratus-docs-'));
      cpSync(join(ROOT, 'examples'), join(dir, 'examples'), { recursive: true });
      // The server the reader starts: the README's own start line of the tour when it has one.
      const start = blocks(file)
        .filter((b) => b.lang === 'sh' && !runs(b))
        .map((b) => /^npx stratus serve (.*--ready-file ready\.json.*)$/m.exec(b.code)?.[1])
        .find(Boolean);
      const args = (start ?? '--demo-login demo@example.com:s3cret --ready-file ready.json')
        .split(/\s+/)
        .map((a) => (a === 'ready.json' ? join(dir, 'ready.json') : a));
      const db = await freshDatabase();
      const srv = await serveProcess([...args, '--db', db.url]);
      try {
        const address = srv.base.replace(/^https?:\/\//, '');
        const script = sh.map((b) => `# ${file}:${b.line}\n${b.code.replaceAll('127.0.0.1:8080', address)}`).join('\n');
        const res = await bash(script, dir, 200_000);
        assert.equal(res.status, 0, `${file}'s shell blocks failed:\n${res.out}`);
      } finally {
        srv.child.kill('SIGTERM');
        await srv.exited;
        await db.drop();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  /** README's python block tagged `tag`, run by the real client against a server started with `flags`. */
  async function runLibcloudRecipe(tag: string, flags: string[]): Promise<void> {
    const recipe = blocks('README.md').find((b) => b.lang === 'python' && b.tags.includes(tag));
    assert.ok(recipe, `README.md has a python ${tag} block`);
    const db = await freshDatabase();
    const srv = await serveProcess(['--db', db.url, ...flags, '--ci', '--demo-login', 'ci@example.com:s3cret']);
    try {
      const port = new URL(srv.base).port;
      const res = spawnSync('/usr/bin/python3', ['-c', recipe.code.replace(', 8080, False', `, ${port}, False`)], { encoding: 'utf8', timeout: 120_000 });
      assert.equal(res.status, 0, res.stderr);
    } finally {
      srv.child.kill('SIGTERM');
      await srv.exited;
      await db.drop();
    }
  }

  test('the libcloud recipe for picking a location runs with the real client against two locations', { skip: needs('python3-libcloud') }, () =>
    runLibcloudRecipe('libcloud-locations', ['--locations', 'zrh,sjc']),
  );

  test('the libcloud recipe runs with the real client', { skip: needs('python3-libcloud') }, () => runLibcloudRecipe('libcloud', []));
});
