/**
 * dist/stratus.js, the entry of the compiled program (scripts/build.js bundles src/main.ts into one
 * CommonJS script, dist/stratus-<hash>.cjs, and this file beside it). It runs the bundle through V8's code
 * cache: on Node 20 (no `module.enableCompileCache`, which came in 22.1) a start-up otherwise spends a third
 * of its time parsing and compiling code, and the cache holds what an earlier run compiled, so a run
 * deserialises its bytecode instead. ESM modules cannot take a code cache on Node 20, hence the script.
 *
 * The cache is a file per bundle, command, Node version and V8 flags under dist/.code-cache/, written by the
 * first run that finds none (or finds it refused): `serve` once it has listened and answered its first
 * requests (src/serve.ts emits `stratus:started`), any other command as it exits. The bundle's name carries a
 * hash of its content, so a rebuilt bundle never meets an old cache (V8 itself only compares the source's
 * length), and the build removes the old files. Written next to the bundle only: a read-only install runs
 * without a cache, never with one from a shared folder (/tmp) that another user could have planted, unless
 * STRATUS_CODE_CACHE_DIR names a folder on purpose (the test runs: a folder of their own).
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';

/** The bundle's file name in dist/, set by the build (esbuild `define`). */
declare const STRATUS_BUNDLE: string;

/** How long after `stratus:started` the cache is written: the first requests' code is compiled by then. */
const SAVE_AFTER_START_MS = 1000;

/** A short hash (FNV-1a) of the flags V8 checks a cache against: another set of flags, another file. */
function flagsHash(): string {
  let h = 0x811c9dc5;
  for (const c of `${process.execArgv.join(' ')}\0${process.env.NODE_OPTIONS ?? ''}`) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193) >>> 0;
  return h.toString(36);
}

const dist = dirname(fileURLToPath(import.meta.url));
const bundle = join(dist, STRATUS_BUNDLE);
// The command (serve, users, ...): each compiles other code, so each has its own cache.
const command = process.argv.slice(2).find((a) => /^[a-z][a-z-]*$/.test(a)) ?? 'none';
// STRATUS_CODE_CACHE_DIR: another folder for it (test runs keep dist/ untouched: theirs is temporary).
const cacheFile = join(
  process.env.STRATUS_CODE_CACHE_DIR || join(dist, '.code-cache'),
  `${STRATUS_BUNDLE}-${command}-${process.version}-${process.arch}-${flagsHash()}.bin`,
);

/** Writes the cache of `script` once (atomically: a run starting meanwhile reads all of it or none); silent when dist/ is read-only. */
function saver(script: Script): () => void {
  let saved = false;
  return () => {
    if (saved) return;
    saved = true;
    try {
      const data = script.createCachedData();
      mkdirSync(dirname(cacheFile), { recursive: true });
      const part = `${cacheFile}.${process.pid}.part`;
      writeFileSync(part, data);
      renameSync(part, cacheFile);
    } catch {
      // No cache: the next run compiles again.
    }
  };
}

type Wrapper = (exports: object, require: NodeJS.Require, module: object, filename: string, dirname: string) => void;

/**
 * With `--enable-source-maps` (stack traces naming the sources, scripts/build.js): Node 20 maps only the code
 * its own module loader compiled, not a vm.Script's. Without the code cache then.
 */
function compileAsModule(): Wrapper {
  const m = new Module(bundle);
  m.filename = bundle;
  (m as unknown as { _compile(content: string, filename: string): void })._compile(`module.exports = ${readFileSync(bundle, 'latin1')}`, bundle);
  return m.exports as Wrapper;
}

/** The bundle compiled (from the cache when it holds it), as the CommonJS wrapper function the build made it. */
function compile(): Wrapper {
  if (process.sourceMapsEnabled) return compileAsModule();
  let cachedData: Buffer | undefined;
  try {
    cachedData = readFileSync(cacheFile);
  } catch {
    // None yet.
  }
  // The bundle is ASCII (the build checks): read as latin1 it is a one-byte string V8 keeps outside its heap.
  const script = new Script(readFileSync(bundle, 'latin1'), { filename: bundle, cachedData });
  if (cachedData === undefined || script.cachedDataRejected) {
    const save = saver(script);
    process.once('stratus:started', () => setTimeout(save, SAVE_AFTER_START_MS).unref());
    process.once('exit', save);
  }
  return script.runInThisContext() as Wrapper;
}

const module = { exports: {}, filename: bundle };
compile()(module.exports, createRequire(bundle), module, bundle, dist);
