import type { SqlClient } from '@idem/database';

/**
 * Records that `version` of an aggregate has been applied in `scope` (e.g. "inventory:order"),
 * unless an equal or newer version already was. Returns false for such a stale message.
 * Call it inside the inbox transaction, before the business change: the row lock taken by
 * the upsert orders concurrent messages for one aggregate.
 */
export async function advanceAggregateVersion(
  tx: SqlClient,
  { scope, aggregateId, version, now }: { scope: string; aggregateId: string; version: number; now: Date },
): Promise<boolean> {
  const rows = await tx.$queryRaw<{ version: number }[]>`
    INSERT INTO aggregate_versions (scope, aggregate_id, version, applied_at)
    VALUES (${scope}, ${aggregateId}, ${version}, ${now})
    ON CONFLICT (scope, aggregate_id) DO UPDATE
      SET version = EXCLUDED.version, applied_at = EXCLUDED.applied_at
      WHERE aggregate_versions.version < EXCLUDED.version
    RETURNING version`;
  return rows.length === 1;
}
