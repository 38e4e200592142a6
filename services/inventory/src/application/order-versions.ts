import { advanceAggregateVersion } from '@idem/inbox';
import type { Tx } from '../db.js';

/**
 * Records the order's version as seen by inventory, unless a newer one was: false means the
 * message is stale. A cancel leaves its version here as a tombstone for a late order-placed.
 */
export function advanceOrderVersion(tx: Tx, message: { aggregateId: string; aggregateVersion: number }, now: Date) {
  return advanceAggregateVersion(tx, {
    scope: 'inventory:order',
    aggregateId: message.aggregateId,
    version: message.aggregateVersion,
    now,
  });
}
