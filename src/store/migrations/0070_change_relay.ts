import { sql, type Kysely, type Migration } from 'kysely';

/**
 * `change_relay`: on SQLite an operator command (`stratus billing topup`, `stratus sim server …`) runs in a
 * process of its own, and a serving process hears of its changes through this table (store/changes.ts):
 * the command writes its changes in its transaction, the server reads and deletes them. PostgreSQL uses
 * NOTIFY instead and never writes it; the table exists on both so the schemas stay alike. No answer is
 * made of it, so it announces nothing (0021_answer_changes.ts).
 */
export const changeRelay = (serialPk: string): Migration => ({
  async up(db: Kysely<any>) {
    await db.schema
      .createTable('change_relay')
      .addColumn('seq', sql.raw(serialPk))
      .addColumn('changes', 'text', (c) => c.notNull())
      .execute();
  },
});
