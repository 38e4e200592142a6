import type { SqlClient } from '@idem/database';

/**
 * Empties every table of the service's schema but the migrator's own: a fresh start, schema kept.
 * DELETE rather than TRUNCATE: a schedule leaves a few rows, and TRUNCATE's new files cost more.
 */
export async function emptyTables(db: SqlClient & { $executeRawUnsafe(query: string): PromiseLike<number> }) {
  const rows = await db.$queryRaw<{ name: string }[]>`
    SELECT quote_ident(tablename) AS name FROM pg_tables
     WHERE schemaname = 'public' AND tablename <> '_prisma_migrations' AND tablename NOT LIKE 'processed_messages_%'`;
  // Foreign keys are not checked meanwhile (in this transaction only): every table is emptied.
  const deletes = rows.map((row) => `DELETE FROM ${row.name};`).join(' ');
  await db.$executeRawUnsafe(`DO $$ BEGIN SET LOCAL session_replication_role = replica; ${deletes} END $$`);
}
