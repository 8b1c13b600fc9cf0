import { readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../core/errors.js';

/** Where the console is served; the API's own paths are beside it (../api/2.0/, ../websocket). */
export const CONSOLE_PATH = '/ui/';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/**
 * The page may run only its own script and style, talk only to its own origin (the API and the event
 * stream's websocket: CSP3's 'self' covers ws(s): of the same host), and never be framed. Preact sets
 * `style` through the CSSOM, which style-src does not govern, so no 'unsafe-inline' is needed.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
  "base-uri 'self'; form-action 'self'; frame-ancestors 'none'";

const COMMON = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'x-frame-options': 'DENY',
};

/** A name with a content hash (esbuild's `[name]-[hash]`): its bytes never change, so it may be kept a year. */
const HASHED = /-[A-Z0-9]{8}\.(js|css|map|svg|png|woff2)$/;

interface Built {
  indexMtime: number;
  index: string;
  files: Map<string, Buffer>;
}

/**
 * The web console (src/ui/, docs/console.md) at `/ui/`: the files of its build (dist/ui/, scripts/build.js)
 * as they are, and for any other path under /ui/ without a file extension the console's page (a route of
 * the console: /ui/servers/<uuid>/), whose `<base href>` is set relative to the path asked for so its
 * assets resolve to /ui/ wherever the console is mounted (a location's prefix: /sjc/ui/ reaches this app
 * as /ui/, http/locations.ts). Hashed assets are cached for a year, the page never (a new build shows at
 * the next load). A missing asset, or a console that was never built, is a 404 in the API's error format.
 * Public: the console signs in through the API itself (cookie session + CSRF), it has no endpoint of its
 * own. Gzip comes from the app's compression, like every answer.
 */
export function registerConsole(app: FastifyInstance, dir: string): void {
  let built: Built | null = null;
  const load = (): Built => {
    const indexFile = join(dir, 'index.html');
    const mtime = statSync(indexFile, { throwIfNoEntry: false })?.mtimeMs;
    if (mtime === undefined) throw new ApiError('notexist', `The console is not built here (no ${indexFile}): run npm run build`);
    if (built && built.indexMtime === mtime) return built;
    const files = new Map<string, Buffer>();
    for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
      const path = join(dir, name);
      if (statSync(path).isFile() && !name.endsWith('.tmp')) files.set(name.split('\\').join('/'), readFileSync(path));
    }
    built = { indexMtime: mtime, index: files.get('index.html')!.toString('utf8'), files };
    return built;
  };

  const page = (req: FastifyRequest, reply: FastifyReply, rest: string) => {
    const b = load();
    // The page's directory relative to /ui/: one `../` per folder below it.
    const depth = rest.split('/').length - 1;
    const base = depth === 0 ? './' : '../'.repeat(depth);
    return reply
      .code(200)
      .headers({ ...COMMON, 'content-type': TYPES['.html'], 'cache-control': 'no-cache', 'content-security-policy': CONSOLE_CSP })
      .send(b.index.replace('<base href="./">', `<base href="${base}">`));
  };

  app.get('/ui', (req, reply) => {
    // With ignoreTrailingSlash this route also answers /ui/.
    const path = req.url.split('?')[0];
    if (path.endsWith('/')) return page(req, reply, '');
    // Relative, so it holds under a location's prefix too (/sjc/ui -> /sjc/ui/).
    return reply
      .code(301)
      .headers({ ...COMMON, location: 'ui/', 'cache-control': 'no-cache' })
      .send();
  });

  app.get('/ui/*', (req, reply) => {
    // From the URL as sent (the route's wildcard loses a trailing slash, which moves the page's base).
    const path = req.url.split('?')[0];
    const rest = path.slice(path.indexOf(CONSOLE_PATH) + CONSOLE_PATH.length);
    const b = load();
    const file = b.files.get(rest);
    if (file && rest !== 'index.html') {
      const type = TYPES[extname(rest)] ?? 'application/octet-stream';
      return reply
        .code(200)
        .headers({
          ...COMMON,
          'content-type': type,
          'cache-control': HASHED.test(rest) ? 'public, max-age=31536000, immutable' : 'no-cache',
        })
        .send(file);
    }
    // A file name (it has an extension) that the build does not have: a stale page asking for an old asset.
    if (/\.[a-z0-9]+$/i.test(rest)) throw new ApiError('notexist', `No console file ${CONSOLE_PATH}${rest}`);
    return page(req, reply, rest);
  });
}
