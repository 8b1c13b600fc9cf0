/**
 * Waits for a condition instead of for a duration: polls `probe` until it returns something truthy (which it
 * returns), and fails naming `what` if that has not happened within `ms` (generous: a deadline, not a
 * measurement). For what a test cannot be told about (another process's cache, a file another process
 * writes); an event or the injected clock is better where there is one.
 */
export async function until<T>(what: string, probe: () => Promise<T | undefined | null | false> | T | undefined | null | false, ms = 30_000): Promise<T> {
  for (const started = Date.now(); ;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() - started > ms) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
