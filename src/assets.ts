import { fileURLToPath } from 'node:url';

/**
 * The absolute path of a data file shipped with the code, given relative to src/ (e.g.
 * `resources/libdrives/catalogue.json`). Resolved against this module: it sits at the top of src/, and the
 * build puts the bundle at the top of dist/ with the data files copied to the same relative places, so one
 * path works from the sources (tsx, tests) and from the compiled output alike.
 */
export const assetPath = (relative: string): string => fileURLToPath(new URL(relative, import.meta.url));
