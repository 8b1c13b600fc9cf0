/**
 * `npm run build` (and `prepare`, so `npm install` / `npm ci` build it): bundles src/ and the packages it
 * uses into dist/, minified: one CommonJS script, dist/stratus-<hash>.cjs, and its loader dist/stratus.js
 * (src/bundle-loader.ts, which bin/stratus.js runs). A bundle because on Node 20 start-up is mostly loading
 * and compiling code (the same code as a tree of files in node_modules starts ~2x slower); a script, not
 * ES modules, because only a script takes V8's code cache on Node 20, which the loader keeps beside the
 * bundle (dist/.code-cache/): a start then deserialises the bytecode an earlier run compiled (~40% less
 * CPU). Kept out of the bundle:
 * - better-sqlite3: a native addon, loaded from node_modules;
 * - pg, nodemailer, fast-xml-parser: loaded on first use (src/core/lazy.ts); the build fails if one of
 *   them is imported statically after all, since that would load it at every start.
 * The data files of src/ (JSON) are copied to the same relative places under dist/ (src/assets.ts).
 * The .map files map the bundle back to the sources: `NODE_OPTIONS=--enable-source-maps`.
 * `--no-minify` keeps the bundle readable (profiles).
 */
import { Buffer } from 'node:buffer';
import { cpSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, URL } from 'node:url';
import { build } from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(root, 'dist');
const LAZY = ['pg', 'nodemailer', 'fast-xml-parser'];

/**
 * @fastify/compress asks `payload instanceof Response` of every reply, and the first read of the global
 * `Response` loads node's fetch implementation (undici): ~20 ms on the first request and ~12 MiB of memory
 * for a service that never uses fetch. The bundle asks the way fastify itself does (reply.js), by tag.
 */
const PATCHES = [
  {
    file: /node_modules\/@fastify\/compress\/lib\/utils\.js$/,
    from: 'return obj instanceof Response',
    to: "return Object.prototype.toString.call(obj) === '[object Response]'",
  },
];
const patches = {
  name: 'patches',
  setup(b) {
    for (const p of PATCHES)
      b.onLoad({ filter: p.file }, ({ path }) => {
        const text = readFileSync(path, 'utf8');
        // A package update that changes the line fails the build here, to be looked at again.
        if (!text.includes(p.from)) throw new Error(`${path} no longer contains "${p.from}": check scripts/build.js PATCHES`);
        return { contents: text.replace(p.from, p.to), loader: 'js' };
      });
  },
};

const dataFiles = (dir) =>
  readdirSync(dir, { recursive: true })
    // (src/ui/ is the console's: bundled for the browser by buildUi, its tsconfig is no data file.)
    .filter((f) => f.endsWith('.json') && !f.startsWith('ui/'))
    .map((f) => join(dir, f));

const common = {
  absWorkingDir: root,
  bundle: true,
  platform: 'node',
  target: 'node20',
  external: ['better-sqlite3'],
  metafile: true,
  write: false,
  logLevel: 'warning',
  plugins: [patches],
};

/**
 * The bundle as a script: the CommonJS wrapper function itself (the loader, src/bundle-loader.ts, compiles it
 * with vm.Script and calls it), `import.meta.url` (src/assets.ts, src/core/lazy.ts) made from its file name.
 */
const script = {
  ...common,
  format: 'cjs',
  define: { 'import.meta.url': '__stratusUrl' },
  banner: { js: "(function (exports, require, module, __filename, __dirname) { const __stratusUrl = require('node:url').pathToFileURL(__filename).href;" },
  footer: { js: '})' },
};

/** As ES modules (bench/serve-child.ts, buildBeside): the bundled CommonJS packages call `require` for node's own modules, which an ES module has none of. */
const esm = {
  ...common,
  format: 'esm',
  banner: { js: "import { createRequire as __stratusRequire } from 'node:module'; const require = __stratusRequire(import.meta.url);" },
};

/**
 * The web console (src/ui/, docs/console.md): a browser bundle of its own (Preact, TSX through esbuild's
 * automatic JSX runtime, `*.module.css` as local CSS), written to `outdir` (dist/ui/ in the build) with
 * content-hashed names, and an index.html naming them. Every file is local: the page loads nothing from
 * elsewhere (src/http/console.ts serves it under a CSP that allows only 'self'). Returns the files as
 * `{ path, contents }` without writing when `write` is false (buildDist writes them with the rest).
 */
export async function buildUi({ outdir = join(DIST, 'ui'), minify = true, write = true } = {}) {
  const result = await build({
    absWorkingDir: root,
    entryPoints: { app: 'src/ui/main.tsx' },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    tsconfig: 'src/ui/tsconfig.json',
    outdir,
    entryNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    minify,
    sourcemap: 'linked',
    sourcesContent: false,
    legalComments: 'none',
    metafile: true,
    write: false,
    logLevel: 'warning',
  });
  const files = result.outputFiles.map((f) => ({ path: f.path, contents: f.contents }));
  const name = (ext) => {
    const f = files.find((x) => x.path.endsWith(ext) && !x.path.endsWith('.map'));
    if (!f) throw new Error(`the console build made no ${ext} file`);
    return relative(outdir, f.path);
  };
  const js = name('.js');
  const css = name('.css');
  // One page for every route of the console (the server answers it for /ui/ and any /ui/<route>): the
  // assets are named relative to it, so the same build works under a location's prefix (/sjc/ui/).
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<base href="./">
<title>Stratus console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${css}">
<script type="module" src="${js}"></script>
</head>
<body>
<noscript>The Stratus console needs JavaScript. The API itself is at ../api/2.0/.</noscript>
<div id="app"></div>
</body>
</html>
`;
  files.push({ path: join(outdir, 'index.html'), contents: Buffer.from(html) });
  if (write)
    for (const f of files) {
      mkdirSync(dirname(f.path), { recursive: true });
      writeFileSync(f.path, f.contents);
    }
  return files;
}

/** Builds dist/ from src/; resolves to the build's duration in ms. */
export async function buildDist({ minify = true } = {}) {
  const started = performance.now();
  const startedAt = new Date();
  const ui = buildUi({ minify, write: false });
  const result = await build({
    ...script,
    entryPoints: ['src/main.ts'],
    outdir: DIST,
    // The name carries a hash of the content: the loader's code cache is per bundle (src/bundle-loader.ts).
    entryNames: 'stratus-[hash]',
    outExtension: { '.js': '.cjs' },
    minify,
    sourcemap: 'linked',
    sourcesContent: false,
    // Licence comments go to *.LEGAL.txt: one of them has a non-ASCII name, and the loader reads the
    // bundle as latin1 (a one-byte string; esbuild escapes non-ASCII characters everywhere else).
    legalComments: 'external',
    charset: 'ascii',
  });
  // (Unminified, esbuild keeps some comments as they are.)
  for (const f of minify ? result.outputFiles : [])
    if (f.path.endsWith('.cjs') && f.contents.some((byte) => byte > 0x7f)) throw new Error(`${f.path} is not ASCII-only (see legalComments above)`);
  const eager = Object.keys(result.metafile.inputs).filter((f) => LAZY.some((p) => f.includes(`node_modules/${p}/`)));
  if (eager.length) throw new Error(`${eager[0]} is in the bundle: import ${LAZY.join(', ')} only as types and load them with lazyPackage (src/core/lazy.ts)`);
  const bundle = result.outputFiles.find((f) => f.path.endsWith('.cjs'));
  // A script compiled by vm.Script has no loader for import(): every module must be in the bundle.
  if (/\bimport\(/.test(bundle.text.replace(/\/\/[^\n]*|\/\*[\s\S]*?\*\//g, '')))
    throw new Error(`${bundle.path} calls import(): bundle the module, or load it with lazyPackage (src/core/lazy.ts)`);
  const loader = await build({
    ...common,
    format: 'esm',
    entryPoints: ['src/bundle-loader.ts'],
    outfile: join(DIST, 'stratus.js'),
    define: { STRATUS_BUNDLE: JSON.stringify(basename(bundle.path)) },
    minify,
  });
  const src = join(root, 'src');
  const entry = join(DIST, 'stratus.js');
  const files = [
    ...dataFiles(src).map((f) => ({ to: join(DIST, relative(src, f)), from: f })),
    ...[...result.outputFiles, ...loader.outputFiles].map((f) => ({ to: f.path, contents: f.contents })),
    ...(await ui).map((f) => ({ to: f.path, contents: f.contents })),
  ].sort((a, b) => Number(a.to === entry) - Number(b.to === entry));
  // Each file is written beside its place and renamed over it, the entry (the loader, naming the bundle)
  // last: a process starting meanwhile loads either the old build or the whole new one.
  for (const f of files) {
    mkdirSync(dirname(f.to), { recursive: true });
    const tmp = `${f.to}.${process.pid}.tmp`;
    if (f.from) cpSync(f.from, tmp);
    else writeFileSync(tmp, f.contents);
    renameSync(tmp, f.to);
  }
  // What earlier builds left (bundle names carry a hash of their content) goes, with their code caches; not
  // another build's files in flight (.tmp), nor the caches of this very bundle (the same sources built again).
  const current = new Set(files.map((f) => f.to));
  const caches = join(DIST, '.code-cache', `${basename(bundle.path)}-`);
  for (const f of readdirSync(DIST, { recursive: true, withFileTypes: true })) {
    const path = join(f.parentPath ?? f.path, f.name);
    if (f.isFile() && !current.has(path) && !path.endsWith('.tmp') && !path.startsWith(caches)) rmSync(path);
  }
  // The bundle is dated when the build began: a source saved while it ran is newer, and the next
  // `stratus` rebuilds (bin/stratus.js compares the dates).
  utimesSync(join(DIST, 'stratus.js'), startedAt, startedAt);
  return performance.now() - started;
}

/**
 * Another program over src/ bundled as dist/stratus.js is (the bench's server process, bench/serve-child.ts):
 * one file beside it, so it finds the data files and the lazily loaded packages the same way. Returns its path.
 */
export async function buildBeside(entry, name, { minify = true } = {}) {
  const outfile = join(DIST, name);
  await build({ ...esm, entryPoints: [entry], outfile, minify, write: true, metafile: false, sourcemap: 'linked', sourcesContent: false });
  return outfile;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  // `--no-minify`: readable function names in profiles (`node --cpu-prof dist/stratus.js …`).
  const minify = !process.argv.includes('--no-minify');
  const ms = await buildDist({ minify });
  console.log(`built ${relative(process.cwd(), DIST) || '.'}/stratus.js in ${Math.round(ms)} ms`);
  // `--beside <entry.ts> <name.mjs>`: also bundle that program into dist/ (see buildBeside).
  const at = process.argv.indexOf('--beside');
  if (at > 0) console.log(`built ${relative(process.cwd(), await buildBeside(process.argv[at + 1], process.argv[at + 2], { minify }))}`);
}
