/**
 * `npm run build` (and `prepare`, so `npm install` / `npm ci` build it): bundles src/ and the packages it
 * uses into dist/ (entry dist/stratus.js, which bin/stratus.js runs), minified. A bundle because on Node 20
 * (no compile cache) start-up is mostly loading and compiling code: the same code as a tree of files in
 * node_modules starts ~2x slower. Split into files of a few hundred KB (see packageEntries), and
 * src/serve.ts (the HTTP server) into a chunk of its own that only `serve` loads. Kept out of the bundle:
 * - better-sqlite3: a native addon, loaded from node_modules;
 * - pg, nodemailer, fast-xml-parser: loaded on first use (src/core/lazy.ts); the build fails if one of
 *   them is imported statically after all, since that would load it at every start.
 * The data files of src/ (JSON) are copied to the same relative places under dist/ (src/assets.ts).
 * The .map files map the bundle back to the sources: `NODE_OPTIONS=--enable-source-maps`.
 * `--no-minify` keeps the bundle readable (profiles).
 */
import { Buffer } from 'node:buffer';
import { cpSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
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

/** The package directory a bundled file belongs to (`…/node_modules/@scope/name`), or null for our own. */
const packageOf = (file) => /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(file)?.[1] ?? null;

/** A package is split into its own file(s) from this many bytes (unminified) on. */
const SPLIT_BYTES = 60_000;

const common = {
  absWorkingDir: root,
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: ['better-sqlite3'],
  metafile: true,
  write: false,
  logLevel: 'warning',
  plugins: [patches],
  // The bundled CommonJS packages call `require` for node's own modules: an ES module has none.
  banner: { js: "import { createRequire as __stratusRequire } from 'node:module'; const require = __stratusRequire(import.meta.url);" },
};

/**
 * The bundle is cut into files of at most a few hundred KB: the bigger packages each become an entry
 * point of their own, so esbuild's code splitting puts every package into its own chunk. Why: V8's
 * compilation of one big script leaves ~12 MiB of freed memory that glibc's malloc does not hand back
 * (measured: 11-12 MiB more idle RSS for one 1.5 MB file than for the same code in files of 450 KB or
 * less), while loading a dozen files instead of one costs a millisecond or two. The entries are the files
 * of each package that code outside it imports, found in a quick first pass.
 */
async function packageEntries() {
  const { metafile } = await build({ ...common, entryPoints: ['src/main.ts'], outfile: join(DIST, 'stratus.js') });
  const bytes = new Map();
  for (const [file, input] of Object.entries(Object.values(metafile.outputs)[0].inputs)) {
    const pkg = packageOf(file);
    if (pkg) bytes.set(pkg, (bytes.get(pkg) ?? 0) + input.bytesInOutput);
  }
  const entries = new Set();
  for (const [file, input] of Object.entries(metafile.inputs))
    for (const i of input.imports) {
      const pkg = packageOf(i.path);
      if (pkg && pkg !== packageOf(file) && bytes.get(pkg) >= SPLIT_BYTES && !i.external) entries.add(i.path);
    }
  return [...entries].sort();
}

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
  const [vendors, ui] = await Promise.all([packageEntries(), buildUi({ minify, write: false })]);
  const result = await build({
    ...common,
    entryPoints: [
      { in: 'src/main.ts', out: 'stratus' },
      ...vendors.map((file) => ({ in: file, out: `packages/${file.replace(/.*node_modules\//, '').replace(/\.[cm]?js$/, '')}` })),
    ],
    outdir: DIST,
    splitting: true,
    // Chunks sit at the top of dist/, beside stratus.js: whichever of them src/assets.ts lands in, its
    // directory is dist/.
    chunkNames: '[name]-[hash]',
    minify,
    sourcemap: 'linked',
    sourcesContent: false,
    // Licence comments go to *.LEGAL.txt: one of them has a non-ASCII name, and a single non-ASCII
    // character makes V8 hold a whole file's source as two bytes a character.
    legalComments: 'external',
    charset: 'ascii',
  });
  // (Unminified, esbuild keeps some comments as they are.)
  for (const f of minify ? result.outputFiles : [])
    if (f.path.endsWith('.js') && f.contents.some((byte) => byte > 0x7f)) throw new Error(`${f.path} is not ASCII-only (see legalComments above)`);
  const eager = Object.keys(result.metafile.inputs).filter((f) => LAZY.some((p) => f.includes(`node_modules/${p}/`)));
  if (eager.length) throw new Error(`${eager[0]} is in the bundle: import ${LAZY.join(', ')} only as types and load them with lazyPackage (src/core/lazy.ts)`);
  // src/assets.ts finds the data files from the directory of the file it is compiled into: dist/.
  const assets = Object.entries(result.metafile.outputs).find(([, o]) => o.inputs['src/assets.ts'])?.[0];
  if (dirname(assets ?? '') !== 'dist') throw new Error(`src/assets.ts landed in ${assets}, not at the top of dist/: the data files would not be found`);
  const src = join(root, 'src');
  const entry = join(DIST, 'stratus.js');
  const files = [
    ...dataFiles(src).map((f) => ({ to: join(DIST, relative(src, f)), from: f })),
    ...result.outputFiles.map((f) => ({ to: f.path, contents: f.contents })),
    ...ui.map((f) => ({ to: f.path, contents: f.contents })),
  ].sort((a, b) => Number(a.to === entry) - Number(b.to === entry));
  // Each file is written beside its place and renamed over it, the entry last: a process starting
  // meanwhile loads either the old build or the whole new one, never half a file or a missing chunk.
  for (const f of files) {
    mkdirSync(dirname(f.to), { recursive: true });
    const tmp = `${f.to}.${process.pid}.tmp`;
    if (f.from) cpSync(f.from, tmp);
    else writeFileSync(tmp, f.contents);
    renameSync(tmp, f.to);
  }
  // What earlier builds left (chunk names carry a hash of their content) goes; not another build's
  // files in flight (.tmp).
  const current = new Set(files.map((f) => f.to));
  for (const f of readdirSync(DIST, { recursive: true, withFileTypes: true })) {
    const path = join(f.parentPath ?? f.path, f.name);
    if (f.isFile() && !current.has(path) && !path.endsWith('.tmp')) rmSync(path);
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
  await build({ ...common, entryPoints: [entry], outfile, minify, write: true, metafile: false, sourcemap: 'linked', sourcesContent: false });
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
