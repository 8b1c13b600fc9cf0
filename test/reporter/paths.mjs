/**
 * The suites run from `.test-build/run-<id>/` (plain JavaScript, see test/run.ts); reports name the
 * TypeScript source instead, the file people open. Tests inside a file are already located through source maps.
 */
const BUILT = /([\\/])\.test-build[\\/]run-[0-9a-f]+[\\/](.*)\.js$/;
export const sourcePath = (file) => (typeof file === 'string' ? file.replace(BUILT, '$1$2.ts') : file);

/** The event's data with its file (and a file wrapper's name) as the source path. */
export function withSourcePath(data) {
  if (!data?.file) return data;
  const file = sourcePath(data.file);
  return { ...data, file, ...(data.name === data.file ? { name: file } : {}) };
}
