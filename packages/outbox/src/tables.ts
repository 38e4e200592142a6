import type { TableSet } from '@idem/database';
import { fileURLToPath } from 'node:url';

/**
 * The outbox's table (packages/outbox/tables/outbox): one row per event, written in the business
 * transaction and published by the relay.
 */
export const outboxTables: TableSet = {
  owner: '@idem/outbox',
  directory: fileURLToPath(new URL('../tables/outbox', import.meta.url)),
};
