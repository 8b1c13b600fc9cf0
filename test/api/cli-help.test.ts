import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SETTINGS } from '../../src/config.js';
import { COMMANDS } from '../../src/cli/index.js';
import { VERSION } from '../../src/version.js';
import { cli } from '../helpers/cli.js';
import { stratus } from '../helpers/process.js';

/** The command line tells what it takes: help per command with the defaults, --version, and no silently ignored arguments. */
describe('stratus help', () => {
  test('--version, -h and --help, stratus help CMD; a real process once', async () => {
    // bin/ is the repository's own (test/run.ts links it beside the transpiled tests): package.json is beside it.
    const pkg = JSON.parse(readFileSync(join(realpathSync(fileURLToPath(new URL('../../bin', import.meta.url))), '..', 'package.json'), 'utf8'));
    assert.equal(VERSION, pkg.version, 'src/version.ts follows package.json');
    const real = stratus(['--version']);
    assert.equal(real.status, 0, real.stderr);
    assert.equal(real.stdout, `stratus ${pkg.version}\n`);
    const help = stratus(['users', '-h']);
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /stratus users unlock \[EMAIL\] \[--address IP\] \[--all\]/);

    for (const args of [[], ['-h'], ['--help'], ['help']]) {
      const res = await cli(args);
      assert.equal(res.status, 0, args.join(' '));
      assert.match(res.stdout, /^Usage: stratus <command>/);
      for (const name of Object.keys(COMMANDS)) assert.match(res.stdout, new RegExp(`\\n  ${name} +\\S`), name);
    }
    for (const name of Object.keys(COMMANDS)) {
      const a = await cli([name, '--help']);
      const b = await cli(['help', name]);
      assert.equal(a.status, 0, a.stderr);
      assert.equal(a.stdout, b.stdout, `${name}: --help and help ${name} agree`);
      assert.doesNotMatch(a.stdout, /^Usage: stratus <command>/, `${name}: its own page, not the global one`);
    }
    // A command's page: its forms, its own options, and every setting with its variable and default.
    const serve = (await cli(['serve', '--help'])).stdout;
    for (const s of SETTINGS) assert.match(serve, new RegExp(`--${s.flag} +${s.env} +default: \\S`), s.flag);
    assert.match(serve, /--port +STRATUS_PORT +default: 8080/);
    assert.match(serve, /--rate-limits +STRATUS_RATE_LIMITS +default: default \(the spec's table; off under --ci\)/);
    assert.match(serve, /--login-protection +STRATUS_LOGIN_PROTECTION +default: default \(pair=5,address=20,account=50,window=15m,lock=15m; off under --ci\)/);
    const sim = (await cli(['help', 'sim'])).stdout;
    assert.match(sim, /stratus sim drive UUID \[--written BYTES\]\n +show or set/);
    assert.match(sim, /Options:\n {2}--written BYTES/);
    // Help needs no database and no valid settings otherwise: it is read before anything is opened.
    assert.equal((await cli(['users', '--help', '--db', 'postgres://nobody@127.0.0.1:1/x'])).status, 0);
  });

  test('unexpected arguments and options are refused with the form the command takes (exit 2), before any database is opened', async () => {
    for (const [args, pattern] of [
      [['users', 'list', 'extra'], /^stratus: unexpected argument "extra": stratus users list \(stratus help users\)\n$/],
      [['users', 'add'], /^stratus: missing argument: stratus users add EMAIL \[--password P\] \[--state S\] \[--limits RULES\] \(stratus help users\)\n$/],
      [['users', 'add', 'a@example.com', 'b@example.com'], /unexpected argument "b@example\.com"/],
      [['users', 'list', '--count', '2'], /^stratus: --count does not apply to "users list": stratus users list/],
      [['ips', 'list', '--password', 'x'], /--password does not apply to "ips list"/],
      [['users'], /users: a subcommand is needed; one of add, list, set-password, set-state, limits, unlock/],
      [['users', 'frob'], /users: unknown subcommand "frob"/],
      [['serve', 'now'], /unexpected argument "now": stratus serve/],
      [['migrate', 'now'], /unexpected argument "now": stratus migrate/],
      [['sim', 'server', 'uuid'], /missing argument: stratus sim server UUID EVENT/],
      [
        ['help', 'nope'],
        /unknown command "nope"; the commands are serve, migrate, users, ips, vlans, billing, sim, reset, seed, export, import, clock, faults, help/,
      ],
      [['clock'], /clock: a subcommand is needed; one of show, advance, set/],
      [['clock', 'advance'], /missing argument: stratus clock advance DURATION/],
      [['reset', 'a@example.com', 'b@example.com'], /unexpected argument "b@example\.com": stratus reset \[EMAIL\]/],
      [['import'], /missing argument: stratus import FILE/],
      [['faults', 'boot'], /missing argument: stratus faults boot SERVER/],
      [['help', 'users', 'more'], /unexpected argument "more"/],
      [['frobnicate'], /unknown command "frobnicate"/],
      [['users', 'list', '--bogus'], /^stratus: unknown option "--bogus": stratus users list \(stratus help users\)\n$/],
      // Node's parser's own paragraph never reaches the user: one line, the command's form, a near option named.
      [['serve', '--prot', '9000'], /^stratus: unknown option "--prot" \(did you mean --port\?\): stratus serve \(stratus help serve\)\n$/],
      [['serve', '--port'], /^stratus: --port needs a value: stratus serve \(stratus help serve\)\n$/],
      [['--frob'], /^stratus: unknown option "--frob": stratus <command> \[arguments\] \[options\] \(stratus --help\)\n$/],
    ] as const) {
      // An unreachable database: the line is refused before it would be opened.
      const res = await cli([...args, '--db', 'postgres://nobody@127.0.0.1:1/x']);
      assert.equal(res.status, 2, `${args.join(' ')}: ${res.stderr}`);
      assert.match(res.stderr, pattern, args.join(' '));
      assert.doesNotMatch(res.stderr, /\n\s+at /);
    }
  });
});
