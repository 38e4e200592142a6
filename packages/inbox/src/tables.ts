import type { TableSet } from '@idem/database';
import { fileURLToPath } from 'node:url';

/**
 * The inbox's tables (packages/inbox/tables/inbox): processed_messages — the processed record
 * whose primary key decides between a first delivery and a duplicate — and dead_letters.
 */
export const inboxTables: TableSet = {
  owner: '@idem/inbox',
  directory: fileURLToPath(new URL('../tables/inbox', import.meta.url)),
};

/**
 * The highest version applied per aggregate, for consumers that classify older events as stale
 * (`advanceAggregateVersion`; packages/inbox/tables/aggregate-versions).
 */
export const aggregateVersionTables: TableSet = {
  owner: '@idem/inbox',
  directory: fileURLToPath(new URL('../tables/aggregate-versions', import.meta.url)),
};
