import type { SqlClient } from './sql-client.js';

/** A client that can also run SQL built from trusted identifiers (Prisma's `$queryRawUnsafe`). */
export interface UnsafeSqlClient extends SqlClient {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): PromiseLike<T>;
}

/** Which rows of a work-item table one worker claims, and for how long. */
export interface LeaseClaim {
  /** The work-item table: `id`, `status`, `next_attempt_at`, `lease_owner`, `lease_expires_at`. */
  readonly table: string;
  /** Statuses a row is due in. */
  readonly statuses: readonly string[];
  /** A column counting claims (attempts or provider calls), raised by one with each claim. */
  readonly counter: string;
  readonly owner: string;
  readonly leaseMs: number;
  readonly batchSize: number;
  readonly now: Date;
}

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

/**
 * Claims up to `batchSize` due work items for `owner` until `now + leaseMs`, in one statement:
 * rows another worker holds (a live lease, or a row lock this instant) are skipped, never
 * waited for or taken twice (`FOR UPDATE SKIP LOCKED`); a lease that expired — its worker
 * died or stalled — makes the row claimable again. Returns the claimed rows as they are after the
 * claim, oldest due first, each column under its camelCase name (`next_attempt_at` →
 * `nextAttemptAt`, as the Prisma models map them), so no second statement reads what the claim
 * already returned. The payment worker and the e-mail dispatcher both claim this way.
 */
export async function claimLeased<Row extends { nextAttemptAt: Date }>(
  db: UnsafeSqlClient,
  claim: LeaseClaim,
): Promise<Row[]> {
  const { table, counter } = claim;
  if (!IDENTIFIER.test(table) || !IDENTIFIER.test(counter)) throw new Error(`not an identifier: ${table}.${counter}`);
  const rows = await db.$queryRawUnsafe<Record<string, unknown>[]>(
    `UPDATE ${table} AS item
        SET lease_owner = $1, lease_expires_at = $2, ${counter} = item.${counter} + 1
       FROM (SELECT id FROM ${table}
              WHERE status = ANY($3::text[]) AND next_attempt_at <= $4
                AND (lease_expires_at IS NULL OR lease_expires_at < $4)
              ORDER BY next_attempt_at
              LIMIT $5
              FOR UPDATE SKIP LOCKED) AS due
      WHERE item.id = due.id
  RETURNING item.*`,
    claim.owner,
    new Date(claim.now.getTime() + claim.leaseMs),
    claim.statuses,
    claim.now,
    claim.batchSize,
  );
  // RETURNING keeps no order: give the oldest due first, as the claim picked them.
  return rows
    .map((row) => camelCased(row) as Row)
    .sort((a, b) => a.nextAttemptAt.getTime() - b.nextAttemptAt.getTime());
}

function camelCased(row: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(row).map(([column, value]) => [
      column.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()),
      value,
    ]),
  );
}
