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
  {
    customerId,
    key,
    request,
    now,
    retentionMs,
  }: { customerId: string; key: string; request: unknown; now: Date; retentionMs: number },
  run: (tx: Tx) => Promise<unknown>,
): Promise<IdempotentResult> {
  const requestHash = bodyHash(request);
  return db.$transaction(async (tx) => {
    const [lock] = await tx.$queryRaw<{ locked: boolean }[]>`
      SELECT pg_try_advisory_xact_lock(hashtextextended(${JSON.stringify(['idempotency', customerId, key])}, 0)) AS locked`;
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

/** Deletes expired keys in bounded batches; returns how many. */
export async function purgeExpiredKeys(db: PrismaClient, now: Date, batchSize = 1000): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await db.$executeRaw`
      DELETE FROM idempotency_keys WHERE (customer_id, key) IN (
        SELECT customer_id, key FROM idempotency_keys WHERE expires_at < ${now} LIMIT ${batchSize})`;
    total += deleted;
    if (deleted < batchSize) return total;
  }
}
