import { query, sql, type Sql } from '@idem/database';
import { bodyHash } from '@idem/inbox';
import type { PrismaClient, Tx } from '../db.js';

/** A request waits up to 10 s for a connection under a burst, instead of Prisma's 2 s; past that it answers 503. */
export const HTTP_TRANSACTION = { maxWait: 10_000, timeout: 15_000 } as const;

/** What a request with an Idempotency-Key gets: its result (run now or replayed), or why neither. */
export type IdempotentResult =
  /** What the request did; a replay's is what the first one did, as it was stored (JSON). */
  | { readonly kind: 'done'; readonly result: unknown; readonly replayed: boolean }
  /** Another request with the key is still running. */
  | { readonly kind: 'key_in_flight' }
  /** The key was used with another request. */
  | { readonly kind: 'key_reused' };

/** A request with an Idempotency-Key: whose key, what identifies the request, and for how long it is kept. */
export interface KeyedRequest {
  readonly customerId: string;
  readonly key: string;
  readonly request: unknown;
  readonly now: Date;
  readonly retentionMs: number;
}

/**
 * The Idempotency-Key pattern, as Stripe does it, with keys scoped per customer (another
 * customer's equal key is another key). Within one transaction: take a lock on the key (another
 * request with it still running is `key_in_flight`), replay the stored result of an earlier
 * request with the same key and the same `request` (`key_reused` for another), or run the
 * request and store its result together with its effects, so a crash stores neither and the
 * key stays free for a retry. `request` is what identifies a request to its caller (the route
 * gives its method, path and body).
 */
export async function idempotent(
  db: PrismaClient,
  { customerId, key, request, now, retentionMs }: KeyedRequest,
  run: (tx: Tx) => Promise<unknown>,
): Promise<IdempotentResult> {
  const requestHash = bodyHash(request);
  return db.$transaction(async (tx) => {
    const [lock] = await query<{ locked: boolean }>(tx, sql`SELECT ${keyLock(customerId, key)} AS locked`);
    if (!lock?.locked) return { kind: 'key_in_flight' } as const;
    const id = { customerId, key };
    const stored = await tx.idempotencyKey.findUnique({ where: { customerId_key: id } });
    if (stored && stored.expiresAt > now) {
      if (stored.requestHash !== requestHash) return { kind: 'key_reused' } as const;
      return { kind: 'done', result: stored.result, replayed: true } as const;
    }
    const result = await run(tx);
    const record = {
      requestHash,
      result: result as object,
      createdAt: now,
      expiresAt: new Date(now.getTime() + retentionMs),
    };
    await tx.idempotencyKey.upsert({ where: { customerId_key: id }, create: { ...id, ...record }, update: record });
    return { kind: 'done', result, replayed: false } as const;
  }, HTTP_TRANSACTION);
}

/**
 * {@link idempotent}'s first request as a piece of one statement that runs alone (its own
 * transaction): `keyed AS (…)` records the key with `result` — and so has a row — only when
 * `onlyIf` holds, the key's lock is free and no live record has the key. Every other case writes
 * nothing, and {@link idempotent} decides it (a repeat, a reused key, one in flight). PostgreSQL
 * may try the lock before `onlyIf`: a statement that writes nothing may have held the key's lock
 * for its own run, which ends with it — a plain request meanwhile answers `key_in_flight`, as it
 * would beside any request with that key.
 */
export function keyedInOneStatement(
  { customerId, key, request, now, retentionMs }: KeyedRequest,
  result: unknown,
  onlyIf: Sql,
): Sql {
  const expiresAt = new Date(now.getTime() + retentionMs);
  return sql`
    keyed AS (
      INSERT INTO idempotency_keys (customer_id, key, request_hash, result, created_at, expires_at)
      SELECT ${customerId}, ${key}, ${bodyHash(request)}, ${JSON.stringify(result)}::jsonb, ${now}::timestamptz, ${expiresAt}::timestamptz
       WHERE ${onlyIf} AND ${keyLock(customerId, key)}
      ON CONFLICT (customer_id, key) DO UPDATE
         SET request_hash = excluded.request_hash, result = excluded.result,
             created_at = excluded.created_at, expires_at = excluded.expires_at
       WHERE idempotency_keys.expires_at <= ${now}::timestamptz
      RETURNING 1
    )`;
}

/** The key's lock, taken if free until the transaction ends: true when it was. */
const keyLock = (customerId: string, key: string) =>
  sql`pg_try_advisory_xact_lock(hashtextextended(${JSON.stringify(['idempotency', customerId, key])}, 0))`;

/**
 * Deletes expired keys in bounded batches; returns how many. The expiry is tested again on each
 * row the DELETE takes: a key revived by a request meanwhile (its record written anew, a live
 * expiry) is re-read after that request commits, and kept.
 */
export async function purgeExpiredKeys(db: PrismaClient, now: Date, batchSize = 1000): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await db.$executeRaw`
      DELETE FROM idempotency_keys AS kept
       USING (SELECT customer_id, key FROM idempotency_keys WHERE expires_at < ${now} LIMIT ${batchSize}) AS expired
       WHERE kept.customer_id = expired.customer_id AND kept.key = expired.key AND kept.expires_at < ${now}`;
    total += deleted;
    if (deleted < batchSize) return total;
  }
}
