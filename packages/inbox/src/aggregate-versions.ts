import { query, sql, type Sql, type SqlClient } from '@idem/database';

/** An aggregate's version as applied in a scope (e.g. "inventory:order"). */
export interface AggregateVersion {
  readonly scope: string;
  readonly aggregateId: string;
  readonly version: number;
  readonly now: Date;
}

/**
 * Records that `version` of an aggregate has been applied in `scope` (e.g. "inventory:order"),
 * unless an equal or newer version already was. Returns false for such a stale message.
 * Call it inside the inbox transaction, before the business change: the row lock taken by
 * the upsert orders concurrent messages for one aggregate.
 */
export async function advanceAggregateVersion(tx: SqlClient, applied: AggregateVersion): Promise<boolean> {
  const rows = await query(tx, aggregateVersionAdvance(applied, sql`TRUE`));
  return rows.length === 1;
}

/**
 * {@link advanceAggregateVersion} as a statement for the WITH list of a handler's one statement
 * (@idem/inbox one-statement.ts), applied only when `onlyIf` holds there: it returns a row when
 * the version advanced, and none when the message is stale or `onlyIf` did not hold.
 */
export function aggregateVersionAdvance({ scope, aggregateId, version, now }: AggregateVersion, onlyIf: Sql): Sql {
  return sql`
    INSERT INTO aggregate_versions (scope, aggregate_id, version, applied_at)
    SELECT ${scope}::text, ${aggregateId}::text, ${version}::int, ${now}::timestamptz WHERE ${onlyIf}
    ON CONFLICT (scope, aggregate_id) DO UPDATE
      SET version = EXCLUDED.version, applied_at = EXCLUDED.applied_at
      WHERE aggregate_versions.version < EXCLUDED.version
    RETURNING version`;
}
