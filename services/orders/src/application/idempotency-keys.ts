import { bodyHash } from '@idem/inbox';
import type { PrismaClient, Tx } from '../db.js';

/** A request waits up to 10 s for a connection under a burst, instead of Prisma's 2 s; past that it answers 503. */
export const HTTP_TRANSACTION = { maxWait: 10_000, timeout: 15_000 } as const;

export interface StoredResponse {
  readonly status: number;
  readonly body: unknown;
}

/** What a request with an Idempotency-Key gets: its response (run now or replayed), or why neither. */
export type IdempotentResult =
  | (StoredResponse & { readonly kind: 'response'; readonly replayed: boolean })
  /** Another request with the key is still running. */
  | { readonly kind: 'key_in_flight' }
  /** The key was used with another request. */
  | { readonly kind: 'key_reused' };

/**
 * The Idempotency-Key pattern at the API edge, as Stripe does it, with keys scoped per customer
 * (another customer's equal key is another key). Within one transaction:
 * take a lock on the key (a second request while the first is running gets 409), replay the
 * stored response of an earlier request with the same key and body (422 for another body),
 * or run the request and store its response together with its effects, so a crash stores
 * neither and the key stays free for a retry.
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
  run: (tx: Tx) => Promise<StoredResponse>,
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
      return { kind: 'response', status: stored.responseStatus, body: stored.responseBody, replayed: true } as const;
    }
    const response = await run(tx);
    const record = {
      requestHash,
      responseStatus: response.status,
      responseBody: response.body as object,
      createdAt: now,
      expiresAt: new Date(now.getTime() + retentionMs),
    };
    await tx.idempotencyKey.upsert({ where: { customerId_key: id }, create: { ...id, ...record }, update: record });
    return { kind: 'response', ...response, replayed: false } as const;
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
