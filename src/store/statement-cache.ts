/**
 * Kysely prepares every query afresh; on SQLite preparing costs more than running a small indexed query.
 * Queries are built from a fixed set of shapes, so their SQL texts repeat: the prepared statements are kept.
 * Not every text is a shape: a Kysely `in (?, ?, …)` list is a new text per length, so the kept statements
 * are bounded (`--statement-cache`, least recently used out). A statement holds SQLite's compiled program in
 * native memory (tens of KiB for a page query with its relation columns), outside the JavaScript heap.
 * Reuse is safe because better-sqlite3 runs each statement synchronously to completion.
 */
export class StatementCache<S> {
  private readonly kept = new Map<string, S>();

  constructor(
    private readonly compile: (text: string) => S,
    readonly max: number,
  ) {}

  prepare(text: string): S {
    let stmt = this.kept.get(text);
    if (stmt)
      this.kept.delete(text); // re-inserted below: Map order is least recently used first
    else {
      stmt = this.compile(text);
      if (this.max <= 0) return stmt;
      if (this.kept.size >= this.max) this.kept.delete(this.kept.keys().next().value!);
    }
    this.kept.set(text, stmt);
    return stmt;
  }

  get size(): number {
    return this.kept.size;
  }
}
