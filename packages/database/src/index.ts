export { migrate, readMigrations, createDatabaseIfMissing, dropDatabase, MigrationError } from './migrate.js';
export type { MigrateOptions, MigrationFile } from './migrate.js';
export { findSchemaDrift } from './schema-drift.js';
export type { SqlClient, TransactionalClient, TransactionOptions } from './sql-client.js';
export { execute, identifier, query, sql, Sql } from './sql.js';
export { readOnly, type ReadQuery } from './read-only.js';
export { preparedStatementNames, preparingStatements, type StatementNames } from './prepared-statements.js';
export {
  createPool,
  fromNodePostgres,
  TransactionTimeoutError,
  type PgDatabase,
  type PgTransaction,
} from './node-postgres.js';
export { packageModels, type TableSet } from './table-set.js';
export {
  claimLeased,
  localTakerIn,
  localTakerOf,
  takeHere,
  type LeaseClaim,
  type LocalTaker,
  type UnsafeSqlClient,
} from './leases.js';
export { listen, notify } from './listen.js';
export { afterCommit, clientOf, runningAfterCommit } from './after-commit.js';
