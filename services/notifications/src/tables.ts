import type { TableSet } from '@idem/database';
import { inboxTables } from '@idem/inbox';

/**
 * The tables the packages this service uses own in its database. `migrate` applies their
 * migrations beside the service's own; `pnpm generate` adds their models to its Prisma schema.
 */
export const PACKAGE_TABLES: readonly TableSet[] = [inboxTables];
