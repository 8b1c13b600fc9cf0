import { CompiledQuery } from 'kysely';
import type { Dialect, Tx } from './db.js';

/**
 * Many rows into a table in a bounded number of statements, without building a query tree per value (for
 * tens of thousands of rows that costs more than the insert). PostgreSQL: one `INSERT … SELECT * FROM
 * unnest($1::type[], …)` per 10,000 rows, a parameter per column whatever the row count; SQLite: multi-row
 * `VALUES (?, …), …` of up to 2,000 rows (well below its bound-parameter limit), one call into the
 * embedded engine each. `conflict` is an `ON CONFLICT …` clause both engines read alike.
 */
export interface BulkColumn {
  name: string;
  /** The PostgreSQL element type of the column's array (`varchar`, `bigint`, `text`). */
  pg: 'varchar' | 'bigint' | 'integer' | 'text';
}

const PG_ROWS = 10_000;
const SQLITE_ROWS = 2_000;
const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

export async function bulkInsert(
  tx: Tx,
  dialect: Dialect,
  table: string,
  columns: readonly BulkColumn[],
  rows: readonly (readonly (string | number)[])[],
  conflict = '',
): Promise<void> {
  const head = `insert into ${quote(table)} (${columns.map((c) => quote(c.name)).join(', ')})`;
  if (dialect === 'postgres') {
    const from = columns.map((c, i) => `$${i + 1}::${c.pg}[]`).join(', ');
    const text = `${head} select * from unnest(${from}) ${conflict}`;
    for (let i = 0; i < rows.length; i += PG_ROWS) {
      const slice = rows.slice(i, i + PG_ROWS);
      await tx.executeQuery(
        CompiledQuery.raw(
          text,
          columns.map((_, c) => slice.map((r) => r[c])),
        ),
      );
    }
    return;
  }
  const one = `(${columns.map(() => '?').join(', ')})`;
  for (let i = 0; i < rows.length; i += SQLITE_ROWS) {
    const slice = rows.slice(i, i + SQLITE_ROWS);
    const text = `${head} values ${Array.from(slice, () => one).join(', ')} ${conflict}`;
    await tx.executeQuery(CompiledQuery.raw(text, slice.flat()));
  }
}
