#!/usr/bin/env node
// The `stratus` command: runs the compiled bundle, dist/stratus.js (scripts/build.js; `npm install` and
// `npm run build` make it). When a source is newer than the bundle (an edit, a `git pull`) it rebuilds
// first, so nobody runs stale code; the check stats the ~110 source files, about a millisecond.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath, URL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const bundle = `${root}dist/stratus.js`;

const mtime = (file) => statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0;

/** The newest modification time of src/ (walked by hand: `readdirSync`'s `recursive` is 3x slower) and the build script. */
function newestSource() {
  let newest = mtime(`${root}scripts/build.js`);
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true }))
      if (e.isDirectory()) walk(`${dir}/${e.name}`);
      else newest = Math.max(newest, mtime(`${dir}/${e.name}`));
  };
  if (existsSync(`${root}src`)) walk(`${root}src`);
  return newest;
}

const built = statSync(bundle, { throwIfNoEntry: false })?.mtimeMs;
if (built === undefined || (existsSync(`${root}scripts/build.js`) && newestSource() > built)) {
  // In a child process: the server keeps none of the build's memory (or esbuild's service process).
  // (node:child_process loaded only here: a start without a build does not pay for it.)
  const { spawnSync } = await import('node:child_process');
  const build = spawnSync(process.execPath, [`${root}scripts/build.js`], { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  if (build.status === 0) process.stderr.write(`stratus: ${built === undefined ? 'built dist/' : 'sources changed: rebuilt dist/'}\n`);
  // When the build fails (a syntax error being typed, esbuild missing) an existing bundle still runs.
  else if (built === undefined) throw new Error(`building dist/ failed:\n${build.stderr}`);
  else process.stderr.write(`stratus: warning: src/ is newer than dist/, and rebuilding failed: running the old build\n${build.stderr}`);
}
await import('../dist/stratus.js');
