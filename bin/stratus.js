#!/usr/bin/env node
// The `stratus` command: runs the compiled bundle, dist/stratus.js (scripts/build.js; `npm install` and
// `npm run build` make it). When a source is newer than the bundle (an edit, a `git pull`) it rebuilds
// first, so nobody runs stale code; the check stats the ~110 source files, about a millisecond.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { fileURLToPath, URL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const bundle = `${root}dist/stratus.js`;

const mtime = (file) => statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0;

/** The newest modification time of src/ (walked by hand: `readdirSync`'s `recursive` is 3x slower), the build script, the lockfile. */
function newestSource() {
  let newest = Math.max(mtime(`${root}scripts/build.js`), mtime(`${root}package-lock.json`));
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
  try {
    const { buildDist } = await import('../scripts/build.js');
    const ms = await buildDist();
    process.stderr.write(`stratus: ${built === undefined ? 'built' : 'sources changed: rebuilt'} dist/ in ${Math.round(ms)} ms\n`);
  } catch (e) {
    // Without the build tools (an install without devDependencies) an existing bundle still runs.
    if (built === undefined) throw e;
    process.stderr.write(`stratus: warning: src/ is newer than dist/, and rebuilding failed (${e.message}): running the old build\n`);
  }
}
await import('../dist/stratus.js');
