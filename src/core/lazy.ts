import { createRequire } from 'node:module';

/**
 * CommonJS packages that only some deployments use (pg, nodemailer, fast-xml-parser) are loaded on first
 * use, not at start-up: each costs the process milliseconds to compile and megabytes of memory, and a
 * SQLite server that never sends mail or reads XML should not pay for them. A plain `require` keeps this
 * synchronous (callers need no `await`) and out of the compiled bundle (scripts/build.js refuses a bundle
 * that contains them); the modules import only their types.
 */
const load = createRequire(import.meta.url);

/** A loader for package `id` that requires it once, on first call; `init` runs once on the fresh module. */
export function lazyPackage<T>(id: string, init?: (mod: T) => void): () => T {
  let mod: T | undefined;
  return () => {
    if (mod === undefined) {
      mod = load(id) as T;
      init?.(mod);
    }
    return mod;
  };
}
