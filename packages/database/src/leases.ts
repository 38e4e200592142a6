import { afterCommit, clientOf } from './after-commit.js';
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
  /**
   * A column counting takeovers, raised by one when a claim finds a lease that ran out with its
   * owner still named: that worker died or froze before it said how its work went. @defaultValue none
   */
  readonly takeovers?: string;
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
  const { table, counter, takeovers } = claim;
  for (const name of [table, counter, takeovers ?? 'none'])
    if (!IDENTIFIER.test(name)) throw new Error(`not an identifier: ${name}`);
  const takenOver = takeovers ? `, ${takeovers} = item.${takeovers} + (item.lease_owner IS NOT NULL)::int` : '';
  const rows = await db.$queryRawUnsafe<Record<string, unknown>[]>(
    `UPDATE ${table} AS item
        SET lease_owner = $1, lease_expires_at = $2, ${counter} = item.${counter} + 1${takenOver}
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

/**
 * A worker that takes the work items its own process writes, right after the writing transaction
 * commits: each is written already leased to it (no claim, no notification) and handed over in
 * memory, so its poll only recovers what a crash left — after the lease, as for a claimed item.
 */
export interface LocalTaker<Item> {
  /** Written as the item's lease owner. */
  readonly owner: string;
  /** The lease an item is written with, as long as the worker's claims hold theirs. */
  readonly leaseMs: number;
  /** Acts on the committed item; never throws (it records its own failures). */
  take(item: Item): void;
}

/** Local takers by the client whose transactions write their items, then by table. */
const takers = new WeakMap<object, Map<string, LocalTaker<unknown>>>();

/**
 * From now on `taker` takes the items of `table` that transactions of `db` write (a client made by
 * `runningAfterCommit`: it runs the handover after the commit), until the returned function is called.
 */
export function takeHere<Item>(db: object, table: string, taker: LocalTaker<Item>): () => void {
  let byTable = takers.get(db);
  if (!byTable) takers.set(db, (byTable = new Map()));
  byTable.set(table, taker as LocalTaker<unknown>);
  return () => {
    if (byTable.get(table) === taker) byTable.delete(table);
  };
}

/**
 * The worker that takes what `tx` writes into `table`, registered with `takeHere` on `tx`'s client;
 * undefined when none is, or when `tx` runs no work after its commit. `handOver` runs once `tx`
 * commits: the writer calls it when its item was written.
 */
export function localTakerIn<Item>(
  tx: object,
  table: string,
): (LocalTaker<Item> & { handOver(item: Item): void }) | undefined {
  const client = clientOf(tx);
  const taker = client && localTakerOf<Item>(client, table);
  return taker && { ...taker, handOver: (item) => void afterCommit(tx, () => taker.take(item)) };
}

/**
 * The worker that takes what `db` writes into `table` with a statement that runs alone (it is its
 * own commit): the writer calls `take` once that statement has committed its item.
 */
export const localTakerOf = <Item>(db: object, table: string): LocalTaker<Item> | undefined =>
  takers.get(db)?.get(table) as LocalTaker<Item> | undefined;
