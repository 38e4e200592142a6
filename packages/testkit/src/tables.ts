import type { TableSet } from '@idem/database';
import { aggregateVersionTables, inboxTables } from '@idem/inbox';
import { outboxTables } from '@idem/outbox';

/** The stand-in service's package tables: all of them, as the packages' tests need. */
export const PACKAGE_TABLES: readonly TableSet[] = [inboxTables, aggregateVersionTables, outboxTables];
