/**
 * Values derived from one version of a stored row (a presented object), bounded by an estimate of their
 * size, least recently used out. A key holds one version: asking for another misses, and the entry is
 * replaced when the newer one is stored. Rows carry their version (raised by every write, in any process),
 * so nothing needs invalidating and a stale entry is never served.
 */
export class VersionedCache<V, T extends number | string = number> {
  private readonly entries = new Map<string, { version: T; value: V; bytes: number }>();
  private bytes = 0;

  constructor(readonly maxBytes: number) {}

  get(key: string, version: T): V | undefined {
    const e = this.entries.get(key);
    if (!e || e.version !== version) return undefined;
    // Re-insert: a Map iterates in insertion order, so the first key is the least recently used.
    this.entries.delete(key);
    this.entries.set(key, e);
    return e.value;
  }

  /** Whether some version of `key` is held. */
  has(key: string): boolean {
    return this.entries.has(key);
  }

  set(key: string, version: T, value: V, bytes: number): void {
    const old = this.entries.get(key);
    if (old) {
      // A slower reader of an older state must not displace a newer one (versions that are counts; a token
      // that is not only matches or not, and a stale one is never served either way).
      if (typeof version === 'number' && (old.version as number) > version) return;
      this.entries.delete(key);
      this.bytes -= old.bytes;
    }
    if (bytes > this.maxBytes) return;
    this.entries.set(key, { version, value, bytes });
    this.bytes += bytes;
    for (const [k, e] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(k);
      this.bytes -= e.bytes;
    }
  }

  /** Entries and estimated bytes held (for operators and the bench). */
  get size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.bytes };
  }
}
