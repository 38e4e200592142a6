import { fileURLToPath } from 'node:url';
import type { TableSet } from '@idem/database';

/**
 * The stand-in service's package tables: all of them, as the packages' tests need — the inbox's,
 * its aggregate versions', the outbox's. Read from their folders in this repository, not imported:
 * @idem/inbox's and @idem/outbox's own tests import this kit, and the workspace's graph stays a
 * tree (infra/repository/workspace.unit.spec.ts checks both, and that these are theirs).
 */
export const PACKAGE_TABLES: readonly TableSet[] = [
  { owner: '@idem/inbox', directory: tables('inbox/tables/inbox') },
  { owner: '@idem/inbox', directory: tables('inbox/tables/aggregate-versions') },
  { owner: '@idem/outbox', directory: tables('outbox/tables/outbox') },
];

function tables(path: string): string {
  return fileURLToPath(new URL(`../../${path}`, import.meta.url));
}
